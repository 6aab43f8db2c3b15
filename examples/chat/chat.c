/*
 * chat.c -- a chat: rooms are topics, presence is a message like the
 * others, and a message reaches everyone in the room whichever worker or
 * instance (with --pubsub-redis) holds their connection.
 *
 *   petrel --dev --root examples/chat --module examples/chat/chat.c
 *   then open http://127.0.0.1:8080/ in two windows.
 *
 * GET /chat/ws?room=ROOM&user=NAME, a WebSocket:
 *   the server sends  {"type":"welcome","id":ID,"pid":PID,"room":ROOM}
 *   to the new member only, subscribes it to the topic "chat:ROOM" and
 *   publishes {"type":"join","id":ID,"user":NAME} to the room; when it
 *   leaves, {"type":"leave",...}.
 *   The client sends text frames:
 *     "m" TEXT   a message: the room gets {"type":"msg","id":ID,"user":NAME,
 *                "seq":N,"text":TEXT}, N counting this member's messages
 *                from 1 (so that every member can check it got them all, in
 *                order)
 *     "h0"/"h1"  presence: {"type":"here","id":ID,"user":NAME,"ready":0|1},
 *                the answer of members already in the room to a join
 * POST /chat/say?room=ROOM&user=NAME   the body as a message, from an HTTP
 *                client (curl -d 'hello' ...)
 * GET /chat/stats                      this worker's publish/subscribe
 *                                      counters, as JSON
 *
 * A room is 1 to 32 letters, digits, '-' or '_'; a name 1 to 32 bytes of
 * UTF-8 without control characters; a message up to 2000 bytes (a longer
 * one closes the connection with 1009).  Every string goes out escaped
 * for JSON; the page shows them as text.
 */
#include <petrel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define MAX_TEXT 2000

typedef struct member {
    char id[32];
    char user[33];
    char topic[40]; /* "chat:" + room */
    unsigned long seq;
} member_t;

/* Per worker process: connection ids are unique across workers and
 * instances (a random prefix, then a counter). */
static unsigned prefix;
static unsigned long next_id;
static unsigned long http_seq;
static char out[8 * MAX_TEXT + 512]; /* one message being published */

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
    if (getrandom(&prefix, sizeof(prefix), 0) != (ssize_t)sizeof(prefix))
        prefix = (unsigned)getpid() * 2654435761u;
    return 0;
}

static int room_ok(const char *r)
{
    size_t n = r ? strlen(r) : 0;
    if (n == 0 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= 'A' && r[i] <= 'Z') ||
              (r[i] >= '0' && r[i] <= '9') || r[i] == '-' || r[i] == '_'))
            return 0;
    return 1;
}

static int user_ok(const char *u)
{
    size_t n = u ? strlen(u) : 0;
    if (n == 0 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u[i] < 0x20 || u[i] == 0x7f)
            return 0;
    return 1; /* UTF-8: the topic check below would refuse it otherwise */
}

/* `s` as a JSON string, quotes included, at p; returns the end. */
static char *json_str(char *p, const char *s, size_t n)
{
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            p += sprintf(p, "\\u%04x", c);
        } else {
            *p++ = (char)c;
        }
    }
    *p++ = '"';
    return p;
}

/* {"type":TYPE,"id":ID,"user":USER followed by `rest` and "}" */
static size_t event(const member_t *m, const char *type, const char *rest)
{
    char *p = out + sprintf(out, "{\"type\":\"%s\",\"id\":\"%s\",\"user\":", type, m->id);
    p = json_str(p, m->user, strlen(m->user));
    p += sprintf(p, "%s}", rest);
    return (size_t)(p - out);
}

static void on_open(petrel_ws_t *ws, petrel_req_t *req)
{
    const char *room = petrel_req_query(req, "room");
    const char *user = petrel_req_query(req, "user");
    if (!room_ok(room) || !user_ok(user)) {
        petrel_ws_close(ws, 1008, "room: 1-32 of a-z A-Z 0-9 - _; user: 1-32 bytes");
        return;
    }
    member_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        petrel_ws_close(ws, 1011, "out of memory");
        return;
    }
    snprintf(m->id, sizeof(m->id), "%08x-%lu", prefix, ++next_id);
    snprintf(m->user, sizeof(m->user), "%s", user);
    snprintf(m->topic, sizeof(m->topic), "chat:%s", room);
    petrel_ws_set_data(ws, m);
    char hello[160];
    int n = snprintf(hello, sizeof(hello),
                     "{\"type\":\"welcome\",\"id\":\"%s\",\"pid\":%ld,\"room\":\"%s\"}", m->id,
                     (long)getpid(), room);
    petrel_ws_send_text(ws, hello, (size_t)n);
    int rc = petrel_ws_subscribe(ws, m->topic);
    if (rc < 0) {
        petrel_ws_close(ws, 1008, petrel_strerror(rc));
        return;
    }
    petrel_publish_text(m->topic, out, event(m, "join", ""));
}

static void on_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    member_t *m = petrel_ws_get_data(ws);
    const char *s = data;
    if (m == NULL || binary || len == 0) {
        petrel_ws_close(ws, 1003, "text frames: m<text>, h0 or h1");
        return;
    }
    if (s[0] == 'h' && len == 2 && (s[1] == '0' || s[1] == '1')) {
        petrel_publish_text(m->topic, out,
                            event(m, "here", s[1] == '1' ? ",\"ready\":1" : ",\"ready\":0"));
        return;
    }
    if (s[0] != 'm') {
        petrel_ws_close(ws, 1003, "text frames: m<text>, h0 or h1");
        return;
    }
    char rest[8 * MAX_TEXT + 64], *p = rest;
    p += sprintf(p, ",\"seq\":%lu,\"text\":", ++m->seq);
    p = json_str(p, s + 1, len - 1);
    *p = '\0';
    petrel_publish_text(m->topic, out, event(m, "msg", rest));
}

static void on_close(petrel_ws_t *ws, int code, const char *reason)
{
    (void)code, (void)reason;
    member_t *m = petrel_ws_get_data(ws);
    if (m == NULL)
        return;
    petrel_publish_text(m->topic, out, event(m, "leave", ""));
    free(m);
    petrel_ws_set_data(ws, NULL);
}

static const petrel_ws_handler_t endpoint = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = on_close,
    .max_message_size = MAX_TEXT + 1,
};

/* POST /chat/say?room=R&user=U: a message from an HTTP client. */
static int say(petrel_req_t *req, void *data)
{
    (void)data;
    const char *room = petrel_req_query(req, "room");
    const char *user = petrel_req_query(req, "user");
    if (!room_ok(room) || !user_ok(user))
        return 400;
    if (req->body.len > MAX_TEXT)
        return 413;
    member_t m;
    snprintf(m.id, sizeof(m.id), "%08x-http", prefix);
    snprintf(m.user, sizeof(m.user), "%s", user);
    snprintf(m.topic, sizeof(m.topic), "chat:%s", room);
    char rest[8 * MAX_TEXT + 64], *p = rest;
    p += sprintf(p, ",\"seq\":%lu,\"text\":", ++http_seq);
    p = json_str(p, req->body.ptr, req->body.len);
    *p = '\0';
    int rc = petrel_publish_text(m.topic, out, event(&m, "msg", rest));
    if (rc == PETREL_EINVAL)
        return 400; /* not UTF-8 */
    if (rc < 0)
        return rc;
    return petrel_send_text(req, 202, "text/plain", "sent\n");
}

static int stats(petrel_req_t *req, void *data)
{
    (void)data;
    petrel_pubsub_stats_t st;
    if (petrel_pubsub_stats(&st) < 0)
        return 500;
    char *body = petrel_arena_printf(
        req->arena,
        "{\"pid\":%ld,\"published\":%llu,\"delivered\":%llu,\"from_workers\":%llu,"
        "\"to_redis\":%llu,\"from_redis\":%llu,\"unbridged\":%llu,\"redis\":%d,"
        "\"topics\":%zu,\"subscriptions\":%zu}\n",
        (long)getpid(), (unsigned long long)st.published, (unsigned long long)st.delivered,
        (unsigned long long)st.from_workers, (unsigned long long)st.to_redis,
        (unsigned long long)st.from_redis, (unsigned long long)st.unbridged, st.redis, st.topics,
        st.subscriptions);
    if (body == NULL)
        return 503;
    petrel_resp_header(req, "Cache-Control", "no-store");
    return petrel_send_text(req, 200, "application/json", body);
}

static const petrel_route_t routes[] = {
    {PETREL_POST, "/chat/say", say, NULL},
    {PETREL_GET, "/chat/stats", stats, NULL},
    {0},
};

static int init(petrel_server_t *srv, const char *args)
{
    (void)args;
    return petrel_ws_route_add(srv, "/chat/ws", &endpoint, NULL);
}

PETREL_MODULE(chat, routes, init, worker_init, NULL)
