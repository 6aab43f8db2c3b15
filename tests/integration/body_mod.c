/*
 * body_mod.c -- the module of test_body_stream.sh: request bodies read as
 * they arrive (PETREL_BODY_STREAM, petrel_body_read()).
 *   POST|PUT /sink      reads the body and answers at its end
 *                       "bytes N sum S parts P length L\n" (S: FNV-1a 32 of
 *                       the bytes, L: petrel_body_length());
 *   POST|PUT /slowsink  the same, pausing 50 ms after each part
 *                       (petrel_body_pause()): the client's sending blocks;
 *                       ?every=K: after every K-th part;
 *   POST|PUT /latesink  the same, reading only 100 ms after the head;
 *   POST /early         answers without reading the body: 413 when its
 *                       declared length is over 1000, else 200 "early\n";
 *   POST /whole         not streamed: "whole N\n" (req->body's length).
 * A body that fails (end < 0) is answered 500 "error NAME\n", except
 * PETREL_ELIMIT, which petrel answers 413; every end is logged at info
 * ("body end E after N bytes").
 */
#include <petrel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct sink {
    petrel_req_t *req;
    uint64_t bytes;
    uint32_t sum;
    unsigned parts;
    int slow; /* pause after every slow-th part; 0: never */
    bool done;
    petrel_timer_t *t;
} sink_t;

static void resume(void *data)
{
    sink_t *s = data;
    s->t = NULL;
    if (!s->done)
        petrel_body_pause(s->req, 0);
}

static void part(petrel_req_t *req, const void *ptr, size_t len, int end, void *data)
{
    sink_t *s = data;
    const unsigned char *p = ptr;
    for (size_t i = 0; i < len; i++)
        s->sum = (s->sum ^ p[i]) * 16777619u;
    s->bytes += len;
    s->parts += len > 0;
    if (end == 0) {
        if (s->slow && len && s->parts % (unsigned)s->slow == 0 && s->t == NULL) {
            petrel_body_pause(req, 1);
            s->t = petrel_timer_start(50, resume, s);
        }
        return;
    }
    s->done = true;
    if (s->t) {
        petrel_timer_stop(s->t);
        s->t = NULL;
    }
    petrel_log(PETREL_LOG_INFO, "body end %d after %llu bytes", end, (unsigned long long)s->bytes);
    /* the text must live until the response is written: the request's arena */
    const char *text = NULL;
    if (end == 1)
        text = petrel_arena_printf(req->arena, "bytes %llu sum %08x parts %u length %lld\n",
                                   (unsigned long long)s->bytes, s->sum, s->parts,
                                   (long long)petrel_body_length(req));
    else if (end != PETREL_ELIMIT)
        text = petrel_arena_printf(req->arena, "error %s\n", petrel_strerror(end));
    if (text)
        petrel_send_text(req, end == 1 ? 200 : 500, "text/plain", text);
    else if (end != PETREL_ELIMIT)
        petrel_send_status(req, 503);
}

static void aborted(petrel_req_t *req, void *data)
{
    sink_t *s = data;
    s->done = true;
    if (s->t) {
        petrel_timer_stop(s->t);
        s->t = NULL;
    }
    petrel_send_status(req, 500); /* lets go of it */
}

static void start_late(void *data)
{
    sink_t *s = data;
    s->t = NULL;
    if (petrel_body_read(s->req, part, s) < 0)
        petrel_send_status(s->req, 500);
}

static int sink_begin(petrel_req_t *req, int slow, int late)
{
    sink_t *s = petrel_arena_new(req->arena, sink_t, 1);
    if (s == NULL)
        return 503;
    *s = (sink_t){.req = req, .sum = 2166136261u, .slow = slow};
    if (late) {
        s->t = petrel_timer_start(100, start_late, s);
        if (s->t == NULL)
            return 503;
    } else if (petrel_body_read(req, part, s) < 0) {
        return 500;
    }
    /* the API's own checks: a second read, a body that is not req->body */
    if (!late && petrel_body_read(req, part, s) != PETREL_EINVAL)
        return 500;
    if (req->body.len != 0)
        return 500;
    petrel_req_on_abort(req, aborted, s);
    return PETREL_LATER;
}

static int sink(petrel_req_t *req, void *data)
{
    (void)data;
    return sink_begin(req, 0, 0);
}

static int slowsink(petrel_req_t *req, void *data)
{
    (void)data;
    const char *every = petrel_req_query(req, "every");
    int k = every ? atoi(every) : 1;
    return sink_begin(req, k > 0 ? k : 1, 0);
}

static int latesink(petrel_req_t *req, void *data)
{
    (void)data;
    return sink_begin(req, 0, 1);
}

static int early(petrel_req_t *req, void *data)
{
    (void)data;
    if (petrel_body_length(req) > 1000)
        return 413;
    return petrel_send_text(req, 200, "text/plain", "early\n");
}

static int whole(petrel_req_t *req, void *data)
{
    (void)data;
    /* not a streamed request: petrel_body_read() refuses it */
    if (petrel_body_read(req, part, NULL) != PETREL_EINVAL)
        return 500;
    const char *text = petrel_arena_printf(req->arena, "whole %zu\n", req->body.len);
    return text ? petrel_send_text(req, 200, "text/plain", text) : 503;
}

static const petrel_route_t routes[] = {
    {PETREL_POST | PETREL_PUT | PETREL_BODY_STREAM, "/sink", sink, NULL},
    {PETREL_POST | PETREL_PUT | PETREL_BODY_STREAM, "/slowsink", slowsink, NULL},
    {PETREL_POST | PETREL_PUT | PETREL_BODY_STREAM, "/latesink", latesink, NULL},
    {PETREL_POST | PETREL_BODY_STREAM, "/early", early, NULL},
    {PETREL_POST, "/whole", whole, NULL},
    {0},
};

PETREL_MODULE(bodytest, routes, NULL, NULL, NULL)
