/*
 * h2-scan.c -- what petrel judges in the input before nghttp2 sees it, and
 * the stream-reset limits:
 *   - the frame scanner (petrel__h2_recv_frames): the input is handed to
 *     nghttp2 split before the frames petrel judges first (DATA and
 *     HEADERS on closed streams, RFC 9113 §5.1; PRIORITY frames, §6.3);
 *   - stream ids that go backwards (§5.1.1: petrel__h2_on_begin_frame);
 *   - the streams we reset lately, whose frames are ignored (§5.1);
 *   - the rapid-reset bucket (--h2-max-resets, --h2-reset-rate,
 *     CVE-2023-44487) and ENHANCE_YOUR_CALM (§7).
 * doc/conformance.md has the rules and their tests.
 */
#include "protocols/h2-int.h"

#include <string.h>

static bool recently_reset(h2conn_t *h, int32_t id)
{
    for (int i = 0; i < RST_RING; i++)
        if (h->rst[i] == id)
            return true;
    return false;
}

void petrel__h2_remember_reset(h2conn_t *h, int32_t id)
{
    if (!recently_reset(h, id))
        h->rst[h->rst_pos++ % RST_RING] = id;
}

/* RFC 9113 §7, ENHANCE_YOUR_CALM: a peer whose behaviour generates excessive
 * load (a flood of PINGs, SETTINGS, CONTINUATIONs or resets), as opposed to
 * a protocol error. */
void petrel__h2_calm_down(h2conn_t *h, const char *what)
{
    petrel_log(PETREL_LOG_DEBUG, "h2: %s: ENHANCE_YOUR_CALM", what);
    nghttp2_session_terminate_session(h->ngh, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* One reset (a RST_STREAM received, or one sent for frames on a closed
 * stream) out of a bucket of --h2-max-resets refilled at --h2-reset-rate
 * per second
 * (the rapid-reset defence, CVE-2023-44487).  False when it is empty: the
 * connection is ended with ENHANCE_YOUR_CALM. */
bool petrel__h2_reset_token(h2conn_t *h)
{
    const petrel__config_t *cfg = h->c->cs->cfg;
    uint32_t burst = cfg->h2_reset_burst, rate = cfg->h2_reset_rate;
    uint64_t now = petrel__loop->now_ms;
    if (now > h->resets_ms && rate) {
        uint64_t add = (now - h->resets_ms) * rate / 1000;
        if (add) {
            h->resets = add >= burst - h->resets ? burst : h->resets + (uint32_t)add;
            h->resets_ms = h->resets == burst ? now : h->resets_ms + add * 1000 / rate;
        }
    }
    if (h->resets == 0) {
        petrel__h2_calm_down(h, "too many stream resets");
        return false;
    }
    h->resets--;
    return true;
}

/* Did the client open stream `id` (not above scan_max)?  Known for the
 * last 64 client stream ids; false for older ones. */
static bool was_opened(const h2conn_t *h, int32_t id)
{
    if (id > h->scan_max)
        return false;
    uint32_t k = (uint32_t)(h->scan_max - id) / 2;
    return k < 64 && (h->opened >> k & 1);
}

int petrel__h2_on_begin_frame(nghttp2_session *ngh, const nghttp2_frame_hd *hd, void *ud)
{
    h2conn_t *h = ud;
    if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1))
        return 0;
    if (hd->stream_id > h->max_seen) {
        h->max_seen = hd->stream_id;
        return 0;
    }
    /* RFC 9113 §5.1.1: a HEADERS frame may not open a stream whose id is not
     * larger than every id the client used before.  nghttp2 ignores such a
     * frame when the stream is gone from its memory; it is a connection
     * error.  (HEADERS on a stream the client opened and closed lately was
     * judged by closed_frame() first.) */
    if (nghttp2_session_find_stream(ngh, hd->stream_id) == NULL &&
        !recently_reset(h, hd->stream_id)) {
        petrel_log(PETREL_LOG_DEBUG, "h2: HEADERS on stream %d after stream %d: PROTOCOL_ERROR",
                   hd->stream_id, h->max_seen);
        nghttp2_session_terminate_session(ngh, NGHTTP2_PROTOCOL_ERROR);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

/* A DATA or HEADERS frame for a client stream that is neither idle nor open
 * in nghttp2 (which forgets closed streams and then drops such frames
 * silently), judged before nghttp2 sees its header (RFC 9113 §5.1):
 *   - a stream we reset lately: ignored ("MUST ignore frames that it
 *     receives on closed streams after it has sent a RST_STREAM frame");
 *   - DATA on any other closed stream (closed by the client's END_STREAM or
 *     RST_STREAM, or implicitly): stream error STREAM_CLOSED (§5.1, §6.1);
 *     each stream gets one RST_STREAM (then it is in the ring and later
 *     frames are ignored), and each counts as a reset (reset_token);
 *   - HEADERS on a stream the client opened and ended or reset itself:
 *     connection error STREAM_CLOSED (§5.1 allows it for a closed stream;
 *     nghttp2 does the same while the stream is half-closed (remote));
 *     on one it never opened, or closed long ago (beyond the 64 ids
 *     remembered): on_begin_frame's connection error PROTOCOL_ERROR (§5.1.1).
 * Returns 0, or NGHTTP2_ERR_CALLBACK_FAILURE once the session is ended. */
static int closed_frame(h2conn_t *h, uint8_t type, int32_t id)
{
    if (nghttp2_session_find_stream(h->ngh, id) || recently_reset(h, id))
        return 0; /* open (nghttp2 judges), or ignored */
    if (type == NGHTTP2_HEADERS) {
        if (!was_opened(h, id))
            return 0;
        petrel_log(PETREL_LOG_DEBUG, "h2: HEADERS on closed stream %d: STREAM_CLOSED", id);
        nghttp2_session_terminate_session(h->ngh, NGHTTP2_STREAM_CLOSED);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (!petrel__h2_reset_token(h))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    petrel_log(PETREL_LOG_DEBUG, "h2: DATA on closed stream %d: STREAM_CLOSED", id);
    if (nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, id, NGHTTP2_STREAM_CLOSED) == 0)
        petrel__h2_remember_reset(h, id);
    return 0;
}

static int recv_bytes(h2conn_t *h, const uint8_t *p, size_t n)
{
    if (n == 0)
        return 0;
    ssize_t rv = nghttp2_session_mem_recv(h->ngh, p, n);
    return rv < 0 ? (int)rv : 0;
}

static inline bool priority5(const uint8_t *f)
{
    return f[3] == NGHTTP2_PRIORITY && f[0] == 0 && f[1] == 0 && f[2] == 5;
}

/* Hand the input to nghttp2, split before the frames that petrel judges
 * first: DATA and HEADERS on a stream id already used (closed_frame), and
 * PRIORITY frames, which nghttp2 no longer checks once
 * SETTINGS_NO_RFC7540_PRIORITIES is sent: one on stream 0 (RFC 9113 §6.3)
 * or one that makes a stream depend on itself (RFC 7540 §5.3.1, which RFC
 * 9113 §6.3 refers to for the field) is a connection error PROTOCOL_ERROR.
 * The scanner follows frame boundaries (fskip) and reads each frame header
 * -- 14 bytes for PRIORITY, 9 for the others -- in place, or gathers it in
 * fhd when it is split across two reads, holding it back from nghttp2
 * until it is judged. */
int petrel__h2_recv_frames(h2conn_t *h, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n, *from = p, *cur = p, *hs = NULL;
    while (cur < end) {
        if (h->fskip) {
            size_t k = (size_t)(end - cur) < h->fskip ? (size_t)(end - cur) : h->fskip;
            cur += k;
            h->fskip -= (uint32_t)k;
            continue;
        }
        const uint8_t *f;
        size_t had = h->fhn, need;
        hs = had ? p : cur; /* where this header's bytes start in this input */
        if (had == 0 && end - cur >= 14) {
            f = cur; /* the usual case: the whole header in this input */
            need = priority5(f) ? 14 : 9;
            cur += need;
        } else {
            f = h->fhd;
            need = had >= 9 ? 14 : 9;
            for (;;) {
                size_t k = need - h->fhn;
                if ((size_t)(end - cur) < k)
                    k = (size_t)(end - cur);
                memcpy(h->fhd + h->fhn, cur, k);
                cur += k;
                h->fhn = (uint8_t)(h->fhn + k);
                if (h->fhn < need || need == 14 || !priority5(f))
                    break;
                need = 14; /* a PRIORITY frame: its payload too */
            }
            if (h->fhn < need)
                break; /* held back until the rest arrives */
            h->fhn = 0;
        }
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        h->fskip = (uint32_t)(len - (need - 9));
        int32_t id =
            (int32_t)(((uint32_t)f[5] << 24 | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 8 | f[8]) &
                      0x7fffffff);
        bool judge = false;
        if (f[3] == NGHTTP2_HEADERS && (id & 1)) {
            if (id > h->scan_max) {
                /* a new stream: nothing to judge */
                uint32_t shift = (uint32_t)(id - h->scan_max) / 2;
                h->opened = (shift >= 64 ? 0 : h->opened << shift) | 1;
                h->scan_max = id;
            } else {
                judge = true;
            }
        } else if (f[3] == NGHTTP2_DATA && (id & 1) && id <= h->scan_max) {
            judge = true;
        } else if (need == 14) {
            /* PRIORITY on stream 0 (RFC 9113 §6.3), or on a stream it
             * makes depend on itself */
            int32_t dep = (int32_t)(((uint32_t)f[9] << 24 | (uint32_t)f[10] << 16 |
                                     (uint32_t)f[11] << 8 | f[12]) &
                                    0x7fffffff);
            judge = dep == id || id == 0;
        }
        if (judge) {
            /* nghttp2 first takes every frame before this one */
            int rv = recv_bytes(h, from, (size_t)(hs - from));
            if (rv < 0)
                return rv;
            from = hs;
            if (f[3] == NGHTTP2_PRIORITY) {
                petrel_log(PETREL_LOG_DEBUG, "h2: PRIORITY on stream %d: PROTOCOL_ERROR", id);
                nghttp2_session_terminate_session(h->ngh, NGHTTP2_PROTOCOL_ERROR);
                return NGHTTP2_ERR_CALLBACK_FAILURE;
            }
            if ((rv = closed_frame(h, f[3], id)) < 0)
                return rv;
        }
        if (had) {
            int rv = recv_bytes(h, h->fhd, had); /* the part held back */
            if (rv < 0)
                return rv;
        }
        hs = NULL;
    }
    return recv_bytes(h, from, (size_t)((h->fhn && hs ? hs : end) - from));
}
