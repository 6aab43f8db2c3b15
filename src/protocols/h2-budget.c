/*
 * h2-budget.c -- the output budget of the h2 connections of a worker
 * (--h2-output-budget, CVE-2019-9517) and the streamed-output cap of one
 * connection.
 */
#include "protocols/h2-int.h"

/* Output is produced lazily: DATA frames are framed (file bytes as
 * references to the file, sent with sendfile) only while the connection's
 * queue holds less than OUT_HIGH and the queues of all h2 connections of
 * the worker hold less than --h2-output-budget.  A connection that stopped
 * at the worker's bound waits on out_waiting, and is scheduled again as
 * soon as other queues drain below it; one stopped at its own bound goes on
 * when its socket drains (EPOLLOUT).  A peer that opens large windows and
 * never reads thus holds at most OUT_HIGH of queue (and what the kernel
 * takes), and is closed by --send-timeout (CVE-2019-9517). */
static size_t out_total;
static petrel__list_t out_waiting = {&out_waiting, &out_waiting};

static size_t out_budget(const petrel__config_t *cfg)
{
    return cfg->h2_output_budget ? cfg->h2_output_budget : H2_DEFAULT_OUTPUT_BUDGET;
}

/* Whether `h` may frame more output now: 0, or why not (1: its own queue
 * is full, 2: the worker's budget is spent). */
int petrel__h2_out_full(const h2conn_t *h)
{
    size_t mine = petrel__out_bytes(h->c);
    if (mine >= OUT_HIGH)
        return 1;
    return out_total - h->out_counted + mine >= out_budget(h->c->cs->cfg) ? 2 : 0;
}

/* `h` stopped at the worker's budget: it is scheduled again when there is
 * room (petrel__h2_out_sync). */
void petrel__h2_out_wait(h2conn_t *h)
{
    h->flags |= PETREL__H2_WAITING;
    list_append(&out_waiting, &h->wlink);
}

/* Bring the worker's count of `h`'s queue up to date; when it shrank below
 * the budget, connections waiting for room are scheduled. */
void petrel__h2_out_sync(h2conn_t *h, size_t now)
{
    out_total = out_total - h->out_counted + now;
    bool shrank = now < h->out_counted;
    h->out_counted = now;
    if (!shrank)
        return;
    size_t budget = out_budget(h->c->cs->cfg);
    while (out_total < budget && !list_empty(&out_waiting)) {
        h2conn_t *w = container_of(out_waiting.next, h2conn_t, wlink);
        list_unlink(&w->wlink);
        w->flags &= ~PETREL__H2_WAITING;
        petrel__h2_schedule(w);
    }
}

/* The streamed-output cap of a connection (petrel__conn_budget: what a
 * peer that does not read may make it hold): `len` more bytes on `s` would
 * pass it.  Then the stream is reset and the connection takes no new
 * streams; true (the write fails with PETREL_ENOMEM). */
bool petrel__h2_out_refuse(h2stream_t *s, size_t len)
{
    h2conn_t *h = s->h;
    size_t budget = petrel__conn_budget(h->c->cs->cfg);
    if (h->buffered + len <= budget)
        return false;
    /* RFC 9113 §8.1: a response that cannot complete ends with
     * RST_STREAM; its buffers go now */
    petrel_req_log(&s->req, PETREL_LOG_WARN,
                   "h2: %zu bytes of streamed output waiting for a peer that does not take "
                   "them (limit %zu, see --max-body-size): stream %d reset",
                   h->buffered + len, budget, s->id);
    petrel__conn_close_why(h->c, PETREL__CLOSE_LIMIT);
    s->flags |= PETREL__H2S_RESET;
    petrel__h2_sbuf_free_all(s);
    nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    if (!(h->flags & PETREL__H2_OVER)) {
        /* and no new streams on a connection whose peer does not take
         * what it asked for: it closes once its streams are done */
        h->flags |= PETREL__H2_OVER;
        static const char why[] = "output budget exceeded";
        nghttp2_submit_goaway(h->ngh, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(h->ngh), NGHTTP2_NO_ERROR,
                              (const uint8_t *)why, sizeof(why) - 1);
    }
    petrel__h2_schedule(h);
    return true;
}
