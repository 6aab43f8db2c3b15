/*
 * wssub.c -- the other side of petrel's publish/subscribe benchmarks
 * (tests/ws-bench/fanout.sh, doc/benchmarks.md): many WebSocket
 * subscribers that count what they receive, or one publisher that stamps
 * its messages with the time they were sent.  One thread, epoll; it speaks
 * just enough RFC 6455 for this (masked client frames, unfragmented server
 * frames, no extension).
 *
 *   cc -O2 -o wssub wssub.c
 *   wssub [-c CONNS] [-n MSGS] [-d SECS] HOST PORT PATH
 *       CONNS subscribers of PATH (e.g. /topics?sub=bench); once all are
 *       connected it prints "ready CONNS" on stderr; it ends when each has
 *       received MSGS messages, or after SECS seconds (default 60).
 *   wssub -p RATE [-s SIZE] [-n MSGS] [-d SECS] HOST PORT PATH
 *       one publisher (e.g. /topics?pub=bench): a SIZE-byte text message
 *       (default 100) RATE times a second, starting with "T" and the time
 *       of sending (CLOCK_MONOTONIC, 16 hex digits), MSGS of them or for
 *       SECS seconds.
 *
 * A subscriber receiving a stamped message records its latency (the
 * publisher and the subscribers on one machine share the clock).  The
 * subscribers' last line: "connections C messages M seconds S
 * msgs_per_sec R p50_us A p99_us B max_us X" (the latencies when messages
 * were stamped, else 0).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (64u << 10)
#define LAT_MAX_US 2000000 /* latencies above 2 s count as 2 s */

typedef struct sub {
    int fd;
    int state; /* 0 connecting, 1 waiting for the 101, 2 open */
    uint64_t got;
    size_t len;
    uint8_t *buf;
} sub_t;

static uint32_t *lat_hist; /* microseconds -> count */
static uint64_t lat_n, lat_max;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "wssub: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int dial(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 && errno != EINPROGRESS)
        die("connect");
    return fd;
}

static char request[1024];
static size_t request_len;

static void make_request(const char *host, const char *path)
{
    request_len = (size_t)snprintf(request, sizeof(request),
                                   "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                                   "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                                   path, host);
}

/* Complete frames at the start of s->buf: counted, latencies recorded. */
static void frames(sub_t *s)
{
    size_t off = 0;
    for (;;) {
        uint8_t *p = s->buf + off;
        size_t avail = s->len - off;
        if (avail < 2)
            break;
        size_t hl = 2, len = p[1] & 0x7f;
        if (len == 126)
            hl = 4;
        else if (len == 127)
            hl = 10;
        if (avail < hl)
            break;
        if (len == 126)
            len = (size_t)p[2] << 8 | p[3];
        else if (len == 127) {
            len = 0;
            for (int i = 0; i < 8; i++)
                len = len << 8 | p[2 + i];
        }
        if (avail < hl + len) {
            if (hl + len > BUF) {
                fprintf(stderr, "wssub: a frame of %zu bytes is over the buffer\n", len);
                exit(1);
            }
            break;
        }
        int op = p[0] & 0x0f;
        if (op == 1 || op == 2) {
            s->got++;
            if (len >= 17 && p[hl] == 'T') {
                char hex[17];
                memcpy(hex, p + hl + 1, 16);
                hex[16] = '\0';
                uint64_t sent = strtoull(hex, NULL, 16), us = (now_ns() - sent) / 1000;
                if (us > LAT_MAX_US)
                    us = LAT_MAX_US;
                lat_hist[us]++;
                lat_n++;
                if (us > lat_max)
                    lat_max = us;
            }
        } else if (op == 8) {
            fprintf(stderr, "wssub: the server closed a subscriber\n");
            exit(1);
        }
        off += hl + len;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
}

static uint64_t percentile(double q)
{
    uint64_t want = (uint64_t)(q * (double)lat_n), seen = 0;
    for (uint64_t us = 0; us <= LAT_MAX_US; us++) {
        seen += lat_hist[us];
        if (seen > want)
            return us;
    }
    return LAT_MAX_US;
}

static int subscribe(const struct sockaddr_in *sa, int conns, uint64_t msgs, double secs)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    sub_t *subs = calloc((size_t)conns, sizeof(*subs));
    lat_hist = calloc(LAT_MAX_US + 1, sizeof(*lat_hist));
    if (ep < 0 || subs == NULL || lat_hist == NULL)
        die("memory");
    int opened = 0, ready = 0, done = 0;
    uint64_t total = 0, t0 = now_ns(), tfirst = 0, tlast = 0;
    struct epoll_event evs[512];
    while (done < conns) {
        /* connect in waves: the listen queue takes a few hundred at once */
        while (opened < conns && opened - ready < 256) {
            sub_t *s = &subs[opened];
            s->fd = dial(sa);
            s->buf = malloc(BUF);
            if (s->buf == NULL)
                die("memory");
            struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.ptr = s};
            epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
            opened++;
        }
        if ((double)(now_ns() - t0) / 1e9 > secs) {
            fprintf(stderr, "wssub: %d of %d subscribers done after %.0f s\n", done, conns, secs);
            break;
        }
        int n = epoll_wait(ep, evs, 512, 100);
        for (int i = 0; i < n; i++) {
            sub_t *s = evs[i].data.ptr;
            if (s->state == 0 && (evs[i].events & EPOLLOUT)) {
                if (write(s->fd, request, request_len) != (ssize_t)request_len)
                    die("handshake");
                s->state = 1;
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
                epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
                continue;
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            for (;;) {
                ssize_t r = read(s->fd, s->buf + s->len, BUF - s->len);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    fprintf(stderr, "wssub: a subscriber's connection ended\n");
                    exit(1);
                }
                if (r < 0)
                    break;
                s->len += (size_t)r;
                if (s->state == 1) {
                    uint8_t *e = memmem(s->buf, s->len, "\r\n\r\n", 4);
                    if (e == NULL)
                        continue;
                    if (memcmp(s->buf, "HTTP/1.1 101", 12) != 0) {
                        fprintf(stderr, "wssub: handshake refused: %.40s\n", (char *)s->buf);
                        exit(1);
                    }
                    size_t hl = (size_t)(e + 4 - s->buf);
                    memmove(s->buf, s->buf + hl, s->len - hl);
                    s->len -= hl;
                    s->state = 2;
                    if (++ready == conns)
                        fprintf(stderr, "ready %d\n", conns);
                }
                uint64_t before = s->got;
                frames(s);
                if (s->got > before) {
                    if (total == 0)
                        tfirst = now_ns();
                    total += s->got - before;
                    tlast = now_ns();
                    if (msgs && before < msgs && s->got >= msgs)
                        done++;
                }
                if ((size_t)r < BUF - s->len)
                    break;
            }
        }
    }
    double span = tlast > tfirst ? (double)(tlast - tfirst) / 1e9 : 0;
    printf("connections %d messages %llu seconds %.3f msgs_per_sec %.0f p50_us %llu p99_us %llu "
           "max_us %llu\n",
           conns, (unsigned long long)total, span, span > 0 ? (double)total / span : 0,
           (unsigned long long)(lat_n ? percentile(0.5) : 0),
           (unsigned long long)(lat_n ? percentile(0.99) : 0), (unsigned long long)lat_max);
    return done == conns ? 0 : 1;
}

static int publish(const struct sockaddr_in *sa, double rate, size_t size, uint64_t msgs,
                   double secs)
{
    int fd = dial(sa);
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (write(fd, request, request_len) < 0)
        if (errno != ENOTCONN && errno != EAGAIN)
            die("handshake");
    char head[1024];
    ssize_t r = read(fd, head, sizeof(head) - 1);
    if (r < 12 || memcmp(head, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "wssub: the publisher's handshake was refused\n");
        return 1;
    }
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    if (size < 17 || size > 65535)
        size = 100;
    uint8_t frame[65536 + 8];
    size_t hl = size < 126 ? 2 : 4;
    frame[0] = 0x81;
    if (hl == 2) {
        frame[1] = (uint8_t)(0x80 | size);
    } else {
        frame[1] = 0x80 | 126;
        frame[2] = (uint8_t)(size >> 8);
        frame[3] = (uint8_t)size;
    }
    memset(frame + hl, 0, 4); /* mask key 0: the payload as it is */
    uint8_t *pl = frame + hl + 4;
    memset(pl, 'x', size);
    uint64_t t0 = now_ns(), sent = 0, gap = (uint64_t)(1e9 / rate);
    while ((!msgs || sent < msgs) && (double)(now_ns() - t0) / 1e9 < secs) {
        uint64_t due = t0 + sent * gap, t = now_ns();
        if (t < due) {
            struct timespec ts = {0, (long)(due - t)};
            nanosleep(&ts, NULL);
        }
        char hex[20];
        snprintf(hex, sizeof(hex), "T%016llx", (unsigned long long)now_ns());
        memcpy(pl, hex, 17);
        size_t off = 0, all = hl + 4 + size;
        while (off < all) {
            ssize_t w = write(fd, frame + off, all - off);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                die("publish");
            if (w > 0)
                off += (size_t)w;
        }
        sent++;
        char sink[65536];
        while (read(fd, sink, sizeof(sink)) > 0)
            ; /* a publisher subscribed to its own topic: drop it */
    }
    printf("published %llu in %.3f s\n", (unsigned long long)sent, (double)(now_ns() - t0) / 1e9);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    int conns = 1, opt;
    uint64_t msgs = 0;
    double secs = 60, rate = 0;
    size_t size = 100;
    while ((opt = getopt(argc, argv, "c:n:d:p:s:")) != -1) {
        switch (opt) {
        case 'c':
            conns = atoi(optarg);
            break;
        case 'n':
            msgs = strtoull(optarg, NULL, 10);
            break;
        case 'd':
            secs = atof(optarg);
            break;
        case 'p':
            rate = atof(optarg);
            break;
        case 's':
            size = (size_t)atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: wssub [-c CONNS] [-n MSGS] [-d SECS] [-p RATE [-s SIZE]] "
                            "HOST PORT PATH\n");
            return 2;
        }
    }
    if (argc - optind != 3 || conns < 1) {
        fprintf(stderr, "usage: wssub [-c CONNS] [-n MSGS] [-d SECS] [-p RATE [-s SIZE]] "
                        "HOST PORT PATH\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)atoi(argv[optind + 1]))};
    if (inet_pton(AF_INET, argv[optind], &sa.sin_addr) != 1) {
        fprintf(stderr, "wssub: HOST must be an IPv4 address\n");
        return 2;
    }
    make_request(argv[optind], argv[optind + 2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    return rate > 0 ? publish(&sa, rate, size, msgs, secs) : subscribe(&sa, conns, msgs, secs);
}
