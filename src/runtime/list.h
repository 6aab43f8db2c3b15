/*
 * list.h -- intrusive, circular, doubly linked lists with a head node, and
 * the few macros every file of the library uses.  The bottom of the
 * include graph: it includes nothing of petrel's.
 */
#ifndef PETREL_LIST_H
#define PETREL_LIST_H

#include <stdbool.h>
#include <stddef.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

typedef struct petrel__list {
    struct petrel__list *prev, *next;
} petrel__list_t;

static inline void list_init(petrel__list_t *l)
{
    l->prev = l->next = l;
}
static inline bool list_empty(const petrel__list_t *l)
{
    return l->next == l;
}
static inline void list_unlink(petrel__list_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
static inline void list_append(petrel__list_t *l, petrel__list_t *n)
{
    n->prev = l->prev;
    n->next = l;
    l->prev->next = n;
    l->prev = n;
}

#endif /* PETREL_LIST_H */
