/*
 * settings.h -- the settings of a server (server.c fills them from the command
 * line or an embedder).  Plain data: every layer reads it, none writes it
 * after start-up.
 */
#ifndef PETREL_SETTINGS_H
#define PETREL_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct petrel__config {
    size_t max_header_size; /* whole request head, bytes */
    size_t max_uri_size;
    size_t max_body_size;
    size_t max_connections; /* per worker */
    unsigned max_pipelined; /* HTTP/1.1 requests of a connection handled at once */
    uint64_t header_timeout_ms;
    uint64_t keepalive_timeout_ms;
    uint64_t send_timeout_ms;
    uint64_t drain_timeout_ms;
    uint64_t handler_timeout_ms; /* a request waits this long for its handler: then 504 */
    /* A request body (HTTP/1.1, h2) or a WebSocket message must arrive within
     * body_timeout_ms of its start, plus 1 s per body_min_rate bytes
     * received: a slow client is fine, a trickle is not (408, close 1008). */
    uint64_t body_timeout_ms;
    size_t body_min_rate;
    int workers;
    int log_level;
    const char *access_log; /* NULL: off */
    /* HTTP/2 (h2.c); 0 means the default */
    uint32_t h2_max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS (128) */
    uint32_t h2_initial_window_size;    /* SETTINGS_INITIAL_WINDOW_SIZE (1 MiB) */
    size_t h2_max_header_list_size;     /* SETTINGS_MAX_HEADER_LIST_SIZE (max_header_size) */
    size_t h2_output_budget;            /* h2 output queued, all connections (64 MiB) */
    uint32_t h2_reset_burst;            /* RST_STREAMs per h2 connection at once (1000) */
    uint32_t h2_reset_rate;             /* ... then per second (33) */
    /* WebSocket (ws.c); 0 means the default */
    size_t ws_max_message_size;  /* larger messages: close 1009 (16 MiB) */
    uint64_t ws_idle_timeout_ms; /* silence before a ping, then a close (30 s) */
    size_t ws_send_limit;        /* output queued past this: close 1008 (4 MiB) */
    bool ws_send_overflow_drop;  /* past the send limit: drop the message, not the connection */
    /* publish/subscribe (pubsub.c, redis.c); 0 or NULL means the default */
    size_t pubsub_max_topic_size;    /* bytes of a topic name (256) */
    size_t pubsub_max_message_size;  /* bytes of a published message (64 KiB) */
    size_t pubsub_max_subscriptions; /* topics per WebSocket (64) */
    size_t pubsub_max_subscribers;   /* WebSockets per topic, per worker (100,000) */
    size_t pubsub_ring_size;         /* shared ring per worker (4 MiB) */
    const char *pubsub_redis;        /* HOST:PORT or unix:PATH; NULL: no bridge */
    const char *pubsub_redis_prefix; /* Redis channel = prefix + topic ("petrel:") */
    bool dev;                        /* --dev: build .c modules, rebuild and reload on change */
    /* Production (proxy.c, entry.c, admin.c, worker.c) */
    bool proxy_protocol;                /* --proxy-protocol: every connection starts with one */
    const struct petrel__cidr *trusted; /* --trusted-proxies (NULL: any peer) */
    size_t ntrusted;
    size_t max_proxy_header_size; /* the whole v2 header (4 KiB) */
    uint64_t drain_delay_ms;      /* /readyz says 503 this long before the drain */
    int access_log_format;        /* PETREL__ALOG_COMBINED or _JSON */
    const char *error_log;        /* NULL: standard error */
    size_t admin_max_connections; /* per worker on the admin listener (256) */
    /* Faults (worker.c, fault.c) */
    uint64_t init_timeout_ms;     /* a generation's trial: load + every init (30 s) */
    uint64_t watchdog_timeout_ms; /* a loop turn longer than this: SIGABRT (5 s; 0: off) */
    int restart_limit;            /* failed starts in a row before the master gives up (5) */
    /* Memory that comes back (worker.c) */
    size_t memory_reserve;            /* free memory a worker keeps for the next burst (256 KiB) */
    uint64_t memory_release_delay_ms; /* how often idle free memory goes back (1 s) */
} petrel__config_t;

void petrel__config_defaults(petrel__config_t *cfg);

/* The memory budget of a connection (HTTP/1.1: its arena limit, which
 * queued output counts toward) and of an h2 stream's arena, and the cap of
 * the streamed output an h2 connection may hold: twice --max-body-size plus
 * twice --max-header-size plus 1 MiB. */
static inline size_t petrel__conn_budget(const petrel__config_t *cfg)
{
    return 2 * cfg->max_body_size + 2 * cfg->max_header_size + (1 << 20);
}

/* How long a kept-alive HTTP connection stays idle before it gives back
 * its protocol state (an idle connection is then its struct alone). */
#define PETREL__IDLE_MS 200

/* While a body arrives past --body-timeout, its moving deadline is checked
 * this often. */
#define PETREL__BODY_CHECK_MS 1000

/* Whether a body (an HTTP/1.1 request body, a WebSocket message) that
 * started at `start` ms and has `got` bytes so far is past its deadline at
 * `now` ms: --body-timeout plus one second per --body-min-rate bytes
 * received. */
static inline bool petrel__body_late(const petrel__config_t *cfg, uint64_t start, uint64_t got,
                                     uint64_t now)
{
    uint64_t grace = cfg->body_min_rate ? got * 1000 / cfg->body_min_rate : 0;
    return now >= start + cfg->body_timeout_ms + grace;
}

#endif /* PETREL_SETTINGS_H */
