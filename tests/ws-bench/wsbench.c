/*
 * wsbench.c -- WebSocket echo round trips: C connections, each with one
 * message in flight (send, wait for its echo, send the next), for D seconds
 * after a warm-up; prints messages/s and the round-trip latency percentiles.
 * Superseded by petrel-bench's WebSocket mode (ws:// URLs), which run.sh now
 * uses; kept for the comparison in doc/benchmarks.md (WSBENCH=1 run.sh).  It
 * speaks just enough RFC 6455 for an echo server (masked client frames, one
 * fixed mask key; unmasked server frames without fragmentation).
 *
 *   cc -O2 -pthread -o wsbench wsbench.c
 *   wsbench [-c CONNS] [-t THREADS] [-d SECS] [-w WARMUP_SECS] [-s BYTES] [-b]
 *           HOST PORT [PATH]
 *
 * Output, one line each: "connections", "messages", "errors", "msgs_per_sec",
 * "p50_us", "p90_us", "p99_us", "max_us".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
    int fd;
    uint64_t sent_at;
    size_t have;
    uint8_t *in; /* bytes of the echo read so far */
} conn_t;

typedef struct worker {
    pthread_t th;
    int nconns;
    conn_t *conns;
    uint32_t *lat; /* microseconds, one per measured message */
    size_t nlat, cap;
    uint64_t errors;
} worker_t;

static const char *host, *port, *path = "/ws";
static int nconns = 100, nthreads = 1, binary;
static double secs = 10, warmup = 1;
static size_t msg_size = 32;
static uint8_t *frame; /* the masked frame every connection sends */
static size_t frame_len, echo_len;
static uint64_t t_start, t_measure, t_end;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "wsbench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int connect_ws(void)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        fprintf(stderr, "wsbench: cannot resolve %s\n", host);
        exit(1);
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0)
        die("connect");
    freeaddrinfo(res);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     path, host, port);
    if (write(fd, req, (size_t)n) != n)
        die("write");
    char buf[2048];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            die("handshake");
        got += (size_t)r;
        buf[got] = '\0';
        char *e = strstr(buf, "\r\n\r\n");
        if (e) {
            if (strncmp(buf, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "wsbench: handshake refused: %.60s\n", buf);
                exit(1);
            }
            if ((size_t)(e + 4 - buf) != got) {
                fprintf(stderr, "wsbench: bytes after the 101\n");
                exit(1);
            }
            break;
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void send_msg(worker_t *w, conn_t *c)
{
    c->sent_at = now_ns();
    c->have = 0;
    ssize_t n = write(c->fd, frame, frame_len);
    if (n != (ssize_t)frame_len) {
        /* frames are small: a short write means trouble */
        w->errors++;
    }
}

static void *run(void *arg)
{
    worker_t *w = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < w->nconns; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, w->conns[i].fd, &ev);
    }
    while (now_ns() < t_start)
        ;
    for (int i = 0; i < w->nconns; i++)
        send_msg(w, &w->conns[i]);
    struct epoll_event evs[256];
    for (;;) {
        uint64_t t = now_ns();
        if (t >= t_end)
            break;
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            for (;;) {
                ssize_t r = read(c->fd, c->in + c->have, echo_len - c->have);
                if (r > 0) {
                    c->have += (size_t)r;
                    if (c->have < echo_len)
                        continue;
                    uint64_t done = now_ns();
                    if (c->in[0] != (binary ? 0x82 : 0x81))
                        w->errors++;
                    if (c->sent_at >= t_measure && done < t_end) {
                        if (w->nlat == w->cap) {
                            w->cap = w->cap ? w->cap * 2 : 1 << 16;
                            w->lat = realloc(w->lat, w->cap * sizeof(*w->lat));
                        }
                        w->lat[w->nlat++] = (uint32_t)((done - c->sent_at) / 1000);
                    }
                    if (done < t_end)
                        send_msg(w, c);
                    break;
                }
                if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    w->errors++;
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                }
                break;
            }
        }
    }
    close(ep);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int o;
    while ((o = getopt(argc, argv, "c:t:d:w:s:b")) != -1) {
        switch (o) {
        case 'c':
            nconns = atoi(optarg);
            break;
        case 't':
            nthreads = atoi(optarg);
            break;
        case 'd':
            secs = atof(optarg);
            break;
        case 'w':
            warmup = atof(optarg);
            break;
        case 's':
            msg_size = (size_t)atol(optarg);
            break;
        case 'b':
            binary = 1;
            break;
        default:
            fprintf(stderr, "usage: wsbench [-c CONNS] [-t THREADS] [-d SECS] [-w SECS] "
                            "[-s BYTES] [-b] HOST PORT [PATH]\n");
            return 2;
        }
    }
    if (argc - optind < 2 || nconns < 1 || nthreads < 1 || nthreads > nconns || msg_size > 60000) {
        fprintf(stderr, "wsbench: bad arguments (see the top of wsbench.c)\n");
        return 2;
    }
    host = argv[optind];
    port = argv[optind + 1];
    if (argc - optind > 2)
        path = argv[optind + 2];

    /* one masked frame, and the length of its unmasked echo */
    size_t hl = msg_size < 126 ? 2 : 4;
    frame = malloc(hl + 4 + msg_size);
    frame[0] = binary ? 0x82 : 0x81;
    if (msg_size < 126) {
        frame[1] = (uint8_t)(0x80 | msg_size);
    } else {
        frame[1] = 0x80 | 126;
        frame[2] = (uint8_t)(msg_size >> 8);
        frame[3] = (uint8_t)msg_size;
    }
    static const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    memcpy(frame + hl, mask, 4);
    for (size_t i = 0; i < msg_size; i++)
        frame[hl + 4 + i] = (uint8_t)('a' + i % 26) ^ mask[i & 3];
    frame_len = hl + 4 + msg_size;
    echo_len = hl + msg_size;

    worker_t *ws = calloc((size_t)nthreads, sizeof(*ws));
    for (int t = 0; t < nthreads; t++) {
        worker_t *w = &ws[t];
        w->nconns = nconns / nthreads + (t < nconns % nthreads);
        w->conns = calloc((size_t)w->nconns, sizeof(conn_t));
        for (int i = 0; i < w->nconns; i++) {
            w->conns[i].fd = connect_ws();
            w->conns[i].in = malloc(echo_len);
        }
    }
    t_start = now_ns() + 50000000;
    t_measure = t_start + (uint64_t)(warmup * 1e9);
    t_end = t_measure + (uint64_t)(secs * 1e9);
    for (int t = 0; t < nthreads; t++)
        pthread_create(&ws[t].th, NULL, run, &ws[t]);
    size_t total = 0;
    uint64_t errors = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(ws[t].th, NULL);
        total += ws[t].nlat;
        errors += ws[t].errors;
    }
    uint32_t *all = malloc((total ? total : 1) * sizeof(uint32_t));
    size_t k = 0;
    for (int t = 0; t < nthreads; t++) {
        memcpy(all + k, ws[t].lat, ws[t].nlat * sizeof(uint32_t));
        k += ws[t].nlat;
    }
    qsort(all, total, sizeof(uint32_t), cmp_u32);
#define PCT(p) (total ? all[(size_t)((double)(total - 1) * (p))] : 0)
    printf("connections %d\nmessages %zu\nerrors %llu\nmsgs_per_sec %.0f\n"
           "p50_us %u\np90_us %u\np99_us %u\nmax_us %u\n",
           nconns, total, (unsigned long long)errors, (double)total / secs, PCT(0.50), PCT(0.90),
           PCT(0.99), total ? all[total - 1] : 0);
    return errors ? 1 : 0;
}
