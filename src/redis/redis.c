/*
 * redis.c -- the Redis bridge of publish/subscribe: libpetrel-redis, its
 * one file (`petrel_redis_bridge`, <petrel/redis.h>), on hiredis's
 * asynchronous API driven by the worker's loop (petrel_watch_start()).
 * libpetrel does not link hiredis: the program installs this bridge with
 * petrel_pubsub_use_bridge() and publish/subscribe calls it through the
 * table of framework/pubsub.h; the bridge calls petrel only through the
 * public API and that table's two callbacks.
 *
 * Each worker holds two connections to Redis: one publishes (PUBLISH
 * PREFIX+topic), the other subscribes (SUBSCRIBE PREFIX+topic for every
 * topic with subscribers in the worker; a subscribed connection takes no
 * other command).  A message sent to Redis is an envelope: 0xff "PTRL",
 * a version byte, a flags byte (binary), a zero byte and this instance's
 * 64-bit identifier, then the message.  What comes back with this
 * instance's identifier was delivered here already (by the publishing
 * worker itself and through the rings) and is skipped; what another
 * program publishes without an envelope is delivered as it is (text when
 * it is UTF-8, else binary: pubsub.c tells).
 *
 * Redis going away: local delivery goes on; messages published meanwhile
 * are counted (`unbridged`: the gap the other instances see) and dropped,
 * not queued; both connections are retried (100 ms, doubling up to 2 s)
 * and the subscriptions restored once back; the outage and its gap are
 * logged when it starts and when it ends.
 *
 * Allocation: hiredis allocates per command and per reply (its reply
 * objects, its callback list); petrel's own part formats commands into one
 * per-worker buffer.
 */
#include "framework/pubsub.h"
#include "petrel.h"
#include "petrel/redis.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#define REDIS_PREFIX_DEFAULT "petrel:"
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 2000
/* Output waiting for Redis past this: publications are dropped, counted as
 * not bridged, until it drains. */
#define OUT_MAX (16u << 20)

#define ENV_LEN 16
static const uint8_t env_magic[6] = {0xff, 'P', 'T', 'R', 'L', 1};
enum { ENV_BINARY = 1 };

/* The address, checked in the master (redis_config). */
static struct {
    bool set;
    bool unix_;
    char host[64]; /* numeric */
    int port;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char text[300];
    char prefix[128];
    size_t prefix_len;
} addr;

static int redis_config(const char *spec, const char *prefix, char *err, size_t errlen)
{
    memset(&addr, 0, sizeof(addr));
    if (prefix == NULL)
        prefix = REDIS_PREFIX_DEFAULT;
    addr.prefix_len = strlen(prefix);
    if (addr.prefix_len >= sizeof(addr.prefix)) {
        snprintf(err, errlen, "--pubsub-redis-prefix: at most %zu bytes", sizeof(addr.prefix) - 1);
        return PETREL_EINVAL;
    }
    memcpy(addr.prefix, prefix, addr.prefix_len + 1);
    snprintf(addr.text, sizeof(addr.text), "%s", spec);
    if (strncmp(spec, "unix:", 5) == 0) {
        if (spec[5] == '\0' || strlen(spec + 5) >= sizeof(addr.path)) {
            snprintf(err, errlen,
                     "--pubsub-redis '%s': expected unix:PATH with a path of 1 to "
                     "%zu bytes",
                     spec, sizeof(addr.path) - 1);
            return PETREL_EINVAL;
        }
        addr.unix_ = true;
        snprintf(addr.path, sizeof(addr.path), "%s", spec + 5);
        addr.set = true;
        return 0;
    }
    const char *colon = strrchr(spec, ':');
    char host[256];
    if (colon == NULL || colon == spec || (size_t)(colon - spec) >= sizeof(host)) {
        snprintf(err, errlen, "--pubsub-redis '%s': expected HOST:PORT or unix:PATH", spec);
        return PETREL_EINVAL;
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host) - 2);
        host[strlen(host) - 2] = '\0';
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end || port < 1 || port > 65535) {
        snprintf(err, errlen, "--pubsub-redis '%s': expected a port from 1 to 65535", spec);
        return PETREL_EINVAL;
    }
    /* resolved once, here: the workers reconnect to the address, without a
     * blocking look-up in their loops */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "--pubsub-redis '%s': cannot resolve '%s': %s", spec, host,
                 gai_strerror(rc));
        return PETREL_ENOTFOUND;
    }
    rc = getnameinfo(res->ai_addr, res->ai_addrlen, addr.host, sizeof(addr.host), NULL, 0,
                     NI_NUMERICHOST);
    freeaddrinfo(res);
    if (rc != 0) {
        snprintf(err, errlen, "--pubsub-redis '%s': %s", spec, gai_strerror(rc));
        return PETREL_ENOTFOUND;
    }
    addr.port = (int)port;
    addr.set = true;
    return 0;
}

typedef struct rconn {
    redisAsyncContext *ac;
    petrel_watch_t *w;
    int events;
    bool up;
    bool sub; /* the subscribing connection */
} rconn_t;

/* Per worker process (doc/architecture.md, "Processes"). */
static struct {
    bool on;
    const petrel__bridge_peer_t *ops;
    uint64_t instance;
    size_t max_message;
    rconn_t pub, sub;
    petrel_timer_t *retry;
    uint64_t retry_ms;
    bool down;        /* an outage is under way (logged) */
    uint64_t down_at; /* ms */
    uint64_t down_unbridged;
    bool ever_up;
    char *cmd; /* a formatted command */
    size_t cmd_cap;
    petrel__bridge_stats_t st;
} rb;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void connect_both(void);

/* ------------------------------------------------------------------------ */
/* hiredis on the worker's loop                                             */

static void set_events(rconn_t *c, int events)
{
    if (c->events != events && c->w) {
        c->events = events;
        petrel_watch_set(c->w, events);
    }
}

static void ev_add_read(void *p)
{
    set_events(p, ((rconn_t *)p)->events | PETREL_WATCH_READ);
}
static void ev_del_read(void *p)
{
    set_events(p, ((rconn_t *)p)->events & ~PETREL_WATCH_READ);
}
static void ev_add_write(void *p)
{
    set_events(p, ((rconn_t *)p)->events | PETREL_WATCH_WRITE);
}
static void ev_del_write(void *p)
{
    set_events(p, ((rconn_t *)p)->events & ~PETREL_WATCH_WRITE);
}

/* hiredis frees the context after this (a disconnect, a failed connect). */
static void ev_cleanup(void *p)
{
    rconn_t *c = p;
    petrel_watch_stop(c->w);
    c->w = NULL;
    c->ac = NULL;
    c->up = false;
    c->events = 0;
}

static void on_ready(petrel_watch_t *w, int fd, int events, void *data)
{
    rconn_t *c = data;
    (void)w, (void)fd;
    if ((events & PETREL_WATCH_WRITE) && c->ac)
        redisAsyncHandleWrite(c->ac);
    if ((events & PETREL_WATCH_READ) && c->ac) /* the write may have ended it */
        redisAsyncHandleRead(c->ac);
}

/* ------------------------------------------------------------------------ */
/* Outages                                                                  */

static void retry_cb(void *data)
{
    (void)data;
    rb.retry = NULL;
    connect_both();
}

static void schedule_retry(void)
{
    if (rb.retry || !rb.on)
        return;
    rb.retry = petrel_timer_start(rb.retry_ms, retry_cb, NULL);
    rb.retry_ms = rb.retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : rb.retry_ms * 2;
}

static void went_down(const char *why)
{
    if (!rb.down) {
        rb.down = true;
        rb.down_at = now_ms();
        rb.down_unbridged = rb.st.unbridged;
        if (rb.ever_up) {
            rb.st.disconnects++;
            petrel_log(PETREL_LOG_WARN,
                       "pubsub: redis %s: connection lost (%s): delivery in this instance goes "
                       "on, messages published here are not bridged until it is back; "
                       "reconnecting",
                       addr.text, why);
        } else {
            petrel_log(PETREL_LOG_WARN,
                       "pubsub: redis %s: cannot connect (%s): delivery in this instance goes "
                       "on; retrying",
                       addr.text, why);
        }
    }
    schedule_retry();
}

static void maybe_up(void)
{
    if (!rb.pub.up || !rb.sub.up)
        return;
    rb.retry_ms = RETRY_MIN_MS;
    if (rb.down) {
        uint64_t gap = rb.st.unbridged - rb.down_unbridged;
        if (rb.ever_up)
            petrel_log(PETREL_LOG_WARN,
                       "pubsub: redis %s: back after %.1f s; %llu message%s published here "
                       "meanwhile %s not bridged (%llu in all); subscriptions restored",
                       addr.text, (double)(now_ms() - rb.down_at) / 1000.0, (unsigned long long)gap,
                       gap == 1 ? "" : "s", gap == 1 ? "was" : "were",
                       (unsigned long long)rb.st.unbridged);
        else
            petrel_log(PETREL_LOG_INFO, "pubsub: redis %s: connected after %.1f s", addr.text,
                       (double)(now_ms() - rb.down_at) / 1000.0);
        rb.down = false;
    }
    rb.ever_up = true;
}

/* ------------------------------------------------------------------------ */
/* Messages from Redis                                                      */

static void on_message(redisAsyncContext *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    (void)ac, (void)privdata;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3)
        return; /* the connection is going, or a (un)subscribe confirmation */
    redisReply *kind = reply->element[0], *chan = reply->element[1], *msg = reply->element[2];
    if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, "message") != 0 ||
        chan->type != REDIS_REPLY_STRING || msg->type != REDIS_REPLY_STRING)
        return;
    if ((size_t)chan->len <= addr.prefix_len || memcmp(chan->str, addr.prefix, addr.prefix_len))
        return;
    const char *topic = chan->str + addr.prefix_len;
    size_t tlen = (size_t)chan->len - addr.prefix_len;
    const uint8_t *p = (const uint8_t *)msg->str;
    size_t len = (size_t)msg->len;
    int binary;
    if (len >= ENV_LEN && memcmp(p, env_magic, sizeof(env_magic)) == 0) {
        uint64_t from;
        memcpy(&from, p + 8, 8);
        if (from == rb.instance)
            return; /* ours: delivered in this instance when it was published */
        binary = (p[6] & ENV_BINARY) != 0;
        p += ENV_LEN;
        len -= ENV_LEN;
    } else {
        binary = -1; /* another program's message, as it is: pubsub.c tells text */
    }
    if (len > rb.max_message) {
        petrel_log(PETREL_LOG_DEBUG,
                   "pubsub: redis: a message of %zu bytes on '%.*s' is over "
                   "--pubsub-max-message-size: dropped",
                   len, (int)tlen, topic);
        return;
    }
    if (rb.ops->deliver(topic, tlen, binary, p, len))
        rb.st.received++;
}

static void subscribe_one(const char *topic, size_t tlen, void *arg)
{
    (void)arg;
    if (rb.sub.up)
        redisAsyncCommand(rb.sub.ac, on_message, NULL, "SUBSCRIBE %b%b", addr.prefix,
                          addr.prefix_len, topic, tlen);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */

static void on_connect(const redisAsyncContext *ac, int status)
{
    rconn_t *c = ac->data;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this */
        went_down(ac->errstr[0] ? ac->errstr : "connect failed");
        return;
    }
    c->up = true;
    if (c->sub)
        rb.ops->each_topic(subscribe_one, NULL);
    maybe_up();
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    went_down(ac->errstr[0] ? ac->errstr : "closed by the server");
}

static void conn_open(rconn_t *c)
{
    if (c->ac)
        return;
    redisAsyncContext *ac =
        addr.unix_ ? redisAsyncConnectUnix(addr.path) : redisAsyncConnect(addr.host, addr.port);
    if (ac == NULL) {
        went_down("out of memory");
        return;
    }
    if (ac->err) {
        char why[128];
        snprintf(why, sizeof(why), "%s", ac->errstr);
        redisAsyncFree(ac);
        went_down(why);
        return;
    }
    c->ac = ac;
    c->events = 0;
    ac->data = c;
    ac->ev.data = c;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    c->w = petrel_watch_start(ac->c.fd, 0, on_ready, c);
    if (c->w == NULL) {
        ac->ev.cleanup = NULL;
        redisAsyncFree(ac);
        c->ac = NULL;
        went_down(strerror(errno));
        return;
    }
    /* the connect completes at the first write event: this asks for it */
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void connect_both(void)
{
    conn_open(&rb.pub);
    conn_open(&rb.sub);
}

static int redis_start(const petrel__bridge_peer_t *ops, uint64_t instance, size_t max_message)
{
    if (!addr.set)
        return PETREL_EINVAL;
    memset(&rb, 0, sizeof(rb));
    rb.on = true;
    rb.ops = ops;
    rb.instance = instance;
    rb.max_message = max_message;
    rb.sub.sub = true;
    rb.retry_ms = RETRY_MIN_MS;
    rb.down = true; /* until both are connected */
    rb.down_at = now_ms();
    connect_both();
    return 0;
}

static void redis_stop(void)
{
    if (!rb.on)
        return;
    rb.on = false;
    petrel_timer_stop(rb.retry);
    rb.retry = NULL;
    rconn_t *cs[2] = {&rb.pub, &rb.sub};
    for (int i = 0; i < 2; i++)
        if (cs[i]->ac) {
            cs[i]->ac->onDisconnect = NULL;
            cs[i]->ac->onConnect = NULL;
            redisAsyncFree(cs[i]->ac); /* cleanup stops the watch */
        }
    free(rb.cmd);
    rb.cmd = NULL;
}

static bool redis_on(void)
{
    return rb.on;
}

static void redis_subscribe(const char *topic, size_t tlen)
{
    subscribe_one(topic, tlen, NULL);
}

static void redis_unsubscribe(const char *topic, size_t tlen)
{
    if (rb.sub.up)
        redisAsyncCommand(rb.sub.ac, NULL, NULL, "UNSUBSCRIBE %b%b", addr.prefix, addr.prefix_len,
                          topic, tlen);
}

/* "$N\r\n" then the bytes then "\r\n"; returns the end */
static char *bulk(char *p, const void *a, size_t an, const void *b, size_t bn)
{
    p += sprintf(p, "$%zu\r\n", an + bn);
    memcpy(p, a, an);
    memcpy(p + an, b, bn);
    p += an + bn;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static void redis_publish(const char *topic, size_t tlen, int binary, const void *data, size_t len)
{
    if (!rb.pub.up || sdslen(rb.pub.ac->c.obuf) > OUT_MAX) {
        rb.st.unbridged++;
        return;
    }
    size_t need = 128 + addr.prefix_len + tlen + ENV_LEN + len; /* with the RESP framing */
    if (need > rb.cmd_cap) {
        char *nb = realloc(rb.cmd, need);
        if (nb == NULL) {
            rb.st.unbridged++;
            return;
        }
        rb.cmd = nb;
        rb.cmd_cap = need;
    }
    uint8_t env[ENV_LEN];
    memcpy(env, env_magic, sizeof(env_magic));
    env[6] = binary ? ENV_BINARY : 0;
    env[7] = 0;
    memcpy(env + 8, &rb.instance, 8);
    char *p = rb.cmd;
    memcpy(p, "*3\r\n$7\r\nPUBLISH\r\n", 17);
    p = bulk(p + 17, addr.prefix, addr.prefix_len, topic, tlen);
    /* the envelope and the message: one bulk string */
    p += sprintf(p, "$%zu\r\n", (size_t)ENV_LEN + len);
    memcpy(p, env, ENV_LEN);
    memcpy(p + ENV_LEN, data, len);
    p += ENV_LEN + len;
    *p++ = '\r';
    *p++ = '\n';
    if (redisAsyncFormattedCommand(rb.pub.ac, NULL, NULL, rb.cmd, (size_t)(p - rb.cmd)) !=
        REDIS_OK) {
        rb.st.unbridged++;
        return;
    }
    rb.st.sent++;
}

static void redis_get_stats(petrel__bridge_stats_t *st)
{
    *st = rb.st;
    st->connected = rb.on ? (rb.pub.up && rb.sub.up) : -1;
}

const petrel_pubsub_bridge_t petrel_redis_bridge = {
    .name = "Redis",
    .config = redis_config,
    .start = redis_start,
    .stop = redis_stop,
    .on = redis_on,
    .subscribe = redis_subscribe,
    .unsubscribe = redis_unsubscribe,
    .publish = redis_publish,
    .get_stats = redis_get_stats,
};
