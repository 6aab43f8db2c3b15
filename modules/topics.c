/*
 * topics.c -- publish/subscribe over WebSocket and HTTP, with nothing in
 * between: petrel's topics (petrel_ws_subscribe, petrel_publish_text) as
 * endpoints.
 *
 *   GET /topics?sub=A,B&pub=C   a WebSocket subscribed to topics A and B;
 *                               each message it sends is published, as it
 *                               is (text or binary), to topic C
 *   POST /topics/:topic         publishes the request body to the topic
 *                               (binary with Content-Type
 *                               application/octet-stream, else text):
 *                               202, 400 (a bad topic, text not UTF-8),
 *                               413 (over --pubsub-max-message-size)
 *   GET /topics-stats           this worker's counters (petrel_pubsub_stats)
 *                               as JSON, with its pid
 *
 * A subscriber gets every message published to its topics in every worker
 * (and, with --pubsub-redis, in every instance), its own included; a
 * WebSocket that cannot subscribe (a bad name, a limit) is closed with
 * 1008 and the reason.  petrel-bench's WebSocket mode drives it as an echo:
 * ws://HOST/topics?sub=t&pub=t gets back each message it publishes.
 */
#include <petrel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The topic a connection publishes to: kept in its user data. */
static void on_open(petrel_ws_t *ws, petrel_req_t *req)
{
    const char *sub = petrel_req_query(req, "sub");
    const char *pub = petrel_req_query(req, "pub");
    if (sub && *sub) {
        char *list = petrel_arena_strndup(req->arena, sub, strlen(sub));
        if (list == NULL) {
            petrel_ws_close(ws, 1011, "out of memory");
            return;
        }
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            int rc = petrel_ws_subscribe(ws, t);
            if (rc < 0) {
                char why[64];
                snprintf(why, sizeof(why), "cannot subscribe: %s", petrel_strerror(rc));
                petrel_ws_close(ws, 1008, why);
                return;
            }
        }
    }
    if (pub && *pub) {
        /* the request's memory goes with on_open: the name is copied, and
         * freed in on_close */
        char *copy = strdup(pub);
        if (copy == NULL) {
            petrel_ws_close(ws, 1011, "out of memory");
            return;
        }
        petrel_ws_set_data(ws, copy);
    }
}

static void on_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    const char *topic = petrel_ws_get_data(ws);
    if (topic == NULL)
        return; /* a subscriber only */
    int rc =
        binary ? petrel_publish_binary(topic, data, len) : petrel_publish_text(topic, data, len);
    if (rc < 0) {
        char why[64];
        snprintf(why, sizeof(why), "cannot publish: %s", petrel_strerror(rc));
        petrel_ws_close(ws, rc == PETREL_ELIMIT ? 1009 : 1008, why);
    }
}

static void on_close(petrel_ws_t *ws, int code, const char *reason)
{
    (void)code, (void)reason;
    free(petrel_ws_get_data(ws));
    petrel_ws_set_data(ws, NULL);
}

static const petrel_ws_handler_t endpoint = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = on_close,
};

static int post(petrel_req_t *req, void *data)
{
    (void)data;
    const char *type = petrel_req_header(req, "content-type");
    int binary = type && strncmp(type, "application/octet-stream", 24) == 0;
    const char *topic = petrel_req_param(req, "topic");
    int rc = binary ? petrel_publish_binary(topic, req->body.ptr, req->body.len)
                    : petrel_publish_text(topic, req->body.ptr, req->body.len);
    if (rc == PETREL_ELIMIT)
        return 413;
    if (rc == PETREL_EINVAL)
        return 400;
    if (rc < 0)
        return rc;
    return petrel_send_text(req, 202, "text/plain", "published\n");
}

static int stats(petrel_req_t *req, void *data)
{
    (void)data;
    petrel_pubsub_stats_t st;
    int rc = petrel_pubsub_stats(&st);
    if (rc < 0)
        return rc;
    char *body = petrel_arena_printf(
        req->arena,
        "{\"pid\": %ld, \"published\": %llu, \"delivered\": %llu, \"dropped\": %llu, "
        "\"closed\": %llu, \"from_workers\": %llu, \"lost_workers\": %llu, "
        "\"to_redis\": %llu, \"from_redis\": %llu, \"unbridged\": %llu, "
        "\"redis_disconnects\": %llu, \"redis\": %d, \"topics\": %zu, "
        "\"subscriptions\": %zu}\n",
        (long)getpid(), (unsigned long long)st.published, (unsigned long long)st.delivered,
        (unsigned long long)st.dropped, (unsigned long long)st.closed,
        (unsigned long long)st.from_workers, (unsigned long long)st.lost_workers,
        (unsigned long long)st.to_redis, (unsigned long long)st.from_redis,
        (unsigned long long)st.unbridged, (unsigned long long)st.redis_disconnects, st.redis,
        st.topics, st.subscriptions);
    if (body == NULL)
        return PETREL_ENOMEM;
    petrel_resp_header(req, "Cache-Control", "no-store");
    return petrel_send_text(req, 200, "application/json", body);
}

static const petrel_route_t routes[] = {
    {PETREL_POST, "/topics/:topic", post, NULL},
    {PETREL_GET, "/topics-stats", stats, NULL},
    {0},
};

static int init(petrel_server_t *srv, const char *args)
{
    (void)args;
    return petrel_ws_route_add(srv, "/topics", &endpoint, NULL);
}

PETREL_MODULE(topics, routes, init, NULL, NULL)
