/*
 * h2-buf.c -- streamed bytes in chains of pool chunks: a stream's output
 * not framed yet (a streamed body, a tunnel's writes) and a tunnel's input
 * its carrier has not taken.
 */
#include "protocols/h2-int.h"

/* A streamed body's bytes count in h->buffered (the connection waits for
 * the peer while there are some); a tunnel's do not (its carrier has a
 * send timeout of its own). */
static inline bool counted(const h2stream_t *s)
{
    return s->h && !(s->flags & PETREL__H2S_TUNNEL);
}

/* The head chunk of a chain has been read to its end: it goes. */
void petrel__h2_chain_pop(sbuf_t **head, sbuf_t **tail)
{
    sbuf_t *b = *head;
    *head = b->next;
    if (*head == NULL)
        *tail = NULL;
    petrel__chunk_put(&petrel__pool, b);
}

void petrel__h2_chain_free(sbuf_t **head, sbuf_t **tail)
{
    while (*head)
        petrel__h2_chain_pop(head, tail);
}

void petrel__h2_sbuf_free_all(h2stream_t *s)
{
    if (counted(s))
        s->h->buffered -= s->sb_bytes;
    petrel__h2_chain_free(&s->sb_head, &s->sb_tail);
    s->sb_bytes = 0;
}

/* Append `len` bytes to a chain of pool chunks (its tail); the bytes
 * appended (fewer when out of memory). */
size_t petrel__h2_chain_append(sbuf_t **head, sbuf_t **tail, const void *data, size_t len)
{
    const char *d = data;
    size_t left = len;
    while (left) {
        sbuf_t *b = *tail;
        if (b == NULL || b->w == SBUF_CAP) {
            b = petrel__chunk_get(&petrel__pool);
            if (b == NULL)
                break;
            b->next = NULL;
            b->r = b->w = 0;
            if (*tail)
                (*tail)->next = b;
            else
                *head = b;
            *tail = b;
        }
        size_t k = SBUF_CAP - b->w;
        if (k > left)
            k = left;
        memcpy(b->data + b->w, d, k);
        b->w += (uint32_t)k;
        d += k;
        left -= k;
    }
    return len - left;
}

/* Queue output bytes on the stream.  0 or PETREL_ENOMEM. */
int petrel__h2_sbuf_append(h2stream_t *s, const void *data, size_t len)
{
    size_t k = petrel__h2_chain_append(&s->sb_head, &s->sb_tail, data, len);
    s->sb_bytes += k;
    if (counted(s))
        s->h->buffered += k;
    return k == len ? 0 : PETREL_ENOMEM;
}

/* Copy up to `length` queued output bytes into `buf`. */
size_t petrel__h2_sbuf_take(h2stream_t *s, uint8_t *buf, size_t length)
{
    size_t n = 0;
    while (s->sb_head && n < length) {
        sbuf_t *b = s->sb_head;
        size_t k = b->w - b->r;
        if (k > length - n)
            k = length - n;
        memcpy(buf + n, b->data + b->r, k);
        b->r += (uint32_t)k;
        n += k;
        if (b->r == b->w)
            petrel__h2_chain_pop(&s->sb_head, &s->sb_tail);
    }
    s->sb_bytes -= n;
    if (counted(s))
        s->h->buffered -= n;
    return n;
}
