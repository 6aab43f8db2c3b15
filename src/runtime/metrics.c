/*
 * metrics.c -- the counters of an instance in shared memory, and their
 * Prometheus text exposition (see metrics.h for the model).
 *
 * The region, mapped MAP_SHARED by the master before it forks:
 *
 *   header     sequence counter, the master's figures, the module metrics'
 *              names (published by a count: an entry never changes once
 *              counted), the retired counts
 *   slots[n]   one block per worker process alive, each on cache lines of
 *              its own so that workers never share a line they write
 *
 * Writers: a worker writes its own block only, with plain stores; the
 * master writes the header and frees blocks.  Folding a gone worker's
 * block into the retired counts is the one change a reader could see half
 * done, so the master makes it odd-numbered on the sequence counter and
 * readers (a /metrics request) read again when the counter moved.
 */
#include "runtime/metrics.h"

#include "config.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define UNAME_MAX 64
#define UHELP_MAX 128

typedef struct umetric {
    char name[UNAME_MAX];
    char help[UHELP_MAX];
    uint8_t gauge;
} umetric_t;

typedef struct upslot {
    char name[33];
    char address[256]; /* "" for the upstream's own slot; escaped (label_copy) */
} upslot_t;

typedef struct registry {
    uint32_t n; /* entries published (written by the master, before forking) */
    umetric_t m[PETREL__M_USER_MAX];
    uint32_t nup; /* upstream slots published */
    upslot_t up[PETREL__M_UP_SLOTS];
} registry_t;

typedef struct slot {
    int32_t pid;   /* the worker's, 0 before its fork returned */
    uint32_t live; /* 1: counted by readers */
    petrel__stats_t st;
} __attribute__((aligned(64))) slot_t;

/* Faults by module (the master writes, once per dead worker). */
#define FAULT_MODS 16
typedef struct fault_mod {
    char name[48];
    uint64_t n[2]; /* crashes, watchdog kills */
} fault_mod_t;

typedef struct shm {
    uint32_t seq; /* odd while the master folds a block into `retired` */
    uint32_t nslots;
    uint64_t inst[PETREL__I_N];
    uint32_t nfault_mods; /* entries of fault_mods published */
    fault_mod_t fault_mods[FAULT_MODS];
    uint64_t start_time; /* seconds since the epoch */
    registry_t reg;
    petrel__stats_t retired;
    slot_t slots[];
} shm_t;

static petrel__stats_t private_stats;
petrel__stats_t *petrel__stats = &private_stats;
bool petrel__metrics_on;
unsigned petrel__req_measure;

/* Per process (the master's, inherited by its workers). */
static shm_t *shm;
static registry_t private_reg; /* without shared memory */
static bool in_worker;

static registry_t *reg(void)
{
    return shm ? &shm->reg : &private_reg;
}

/* ------------------------------------------------------------------------ */
/* The master                                                               */

int petrel__metrics_init(int workers)
{
    if (shm)
        return 0;
    size_t n = (size_t)workers * 4 + 16; /* serving, successors of a reload, retiring */
    size_t size = sizeof(shm_t) + n * sizeof(slot_t);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return PETREL_ENOMEM;
    shm = p;
    shm->nslots = (uint32_t)n;
    shm->start_time = (uint64_t)time(NULL);
    shm->reg = private_reg; /* metrics registered before (none, in petrel_main) */
    petrel__metrics_on = true;
    petrel__req_measure |= PETREL__MEASURE_COUNT;
    return 0;
}

int petrel__metrics_block_take(void)
{
    if (shm == NULL)
        return -1;
    for (uint32_t i = 0; i < shm->nslots; i++) {
        slot_t *s = &shm->slots[i];
        if (__atomic_load_n(&s->live, __ATOMIC_RELAXED) == 0 && s->pid == 0) {
            memset(&s->st, 0, sizeof(s->st));
            s->pid = -1; /* taken, the fork to come */
            __atomic_store_n(&s->live, 1, __ATOMIC_RELEASE);
            return (int)i;
        }
    }
    return -1;
}

/* Add the counters of `from` to `to` (and the gauges when `gauges`). */
static void add_stats(petrel__stats_t *to, const petrel__stats_t *from, bool gauges, uint32_t nuser,
                      const umetric_t *um)
{
    for (unsigned i = 0; i < PETREL__C_N; i++)
        to->c[i] += __atomic_load_n(&from->c[i], __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < nuser; i++)
        if (gauges || !um[i].gauge)
            to->user[i] += __atomic_load_n(&from->user[i], __ATOMIC_RELAXED);
    if (gauges)
        for (unsigned i = 0; i < PETREL__G_N; i++)
            to->g[i] += __atomic_load_n(&from->g[i], __ATOMIC_RELAXED);
    for (unsigned i = 0; i < PETREL__M_UP_SLOTS; i++) {
        petrel__up_stats_t *t = &to->up[i];
        const petrel__up_stats_t *f = &from->up[i];
        for (unsigned k = 0; k < PETREL__M_UP_RESULTS; k++)
            t->calls[k] += __atomic_load_n(&f->calls[k], __ATOMIC_RELAXED);
        t->retries += __atomic_load_n(&f->retries, __ATOMIC_RELAXED);
        t->connects += __atomic_load_n(&f->connects, __ATOMIC_RELAXED);
        t->reuses += __atomic_load_n(&f->reuses, __ATOMIC_RELAXED);
        if (gauges) {
            t->pending += __atomic_load_n(&f->pending, __ATOMIC_RELAXED);
            t->open += __atomic_load_n(&f->open, __ATOMIC_RELAXED);
            t->idle += __atomic_load_n(&f->idle, __ATOMIC_RELAXED);
            t->breaker_open += __atomic_load_n(&f->breaker_open, __ATOMIC_RELAXED);
        }
    }
}

static void slot_free(slot_t *s, bool fold)
{
    uint32_t seq = shm->seq;
    __atomic_store_n(&shm->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (fold)
        add_stats(&shm->retired, &s->st, false, shm->reg.n, shm->reg.m);
    __atomic_store_n(&s->live, 0, __ATOMIC_RELAXED);
    s->pid = 0;
    __atomic_store_n(&shm->seq, seq + 2, __ATOMIC_RELEASE);
}

void petrel__metrics_block_owner(int idx, pid_t pid)
{
    if (shm == NULL || idx < 0)
        return;
    if (pid > 0)
        shm->slots[idx].pid = pid;
    else
        slot_free(&shm->slots[idx], false);
}

void petrel__metrics_block_enter(int idx)
{
    in_worker = true;
    if (shm && idx >= 0)
        petrel__stats = &shm->slots[idx].st;
    else
        memset(petrel__stats, 0, sizeof(*petrel__stats));
}

void petrel__metrics_worker_gone(pid_t pid)
{
    if (shm == NULL)
        return;
    for (uint32_t i = 0; i < shm->nslots; i++) {
        slot_t *s = &shm->slots[i];
        if (s->live && s->pid == pid) {
            slot_free(s, true);
            return;
        }
    }
}

void petrel__metrics_detach(void)
{
    if (shm == NULL)
        return;
    private_reg = shm->reg;
    shm = NULL;
    petrel__stats = &private_stats;
}

void petrel__metrics_instance_set(unsigned what, uint64_t v)
{
    if (shm && what < PETREL__I_N)
        __atomic_store_n(&shm->inst[what], v, __ATOMIC_RELAXED);
}

void petrel__metrics_instance_add(unsigned what, uint64_t n)
{
    if (shm && what < PETREL__I_N)
        __atomic_store_n(&shm->inst[what], shm->inst[what] + n, __ATOMIC_RELAXED);
}

/* A label value as the text format writes it: backslash, double quote and
 * line feed escaped, other control characters as '_'; cut at a whole
 * character when it does not fit. */
static void label_copy(char *dst, size_t size, const char *src)
{
    size_t k = 0;
    for (const char *p = src; *p; p++) {
        char e = *p == '\\' ? '\\' : *p == '"' ? '"' : *p == '\n' ? 'n' : 0;
        size_t need = e ? 2 : 1;
        if (k + need >= size)
            break;
        if (e) {
            dst[k++] = '\\';
            dst[k++] = e;
        } else {
            dst[k++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '_' : *p;
        }
    }
    dst[k] = '\0';
}

void petrel__metrics_fault(const char *module, bool watchdog)
{
    if (shm == NULL)
        return;
    char name[sizeof(shm->fault_mods[0].name)];
    label_copy(name, sizeof(name), module ? module : "");
    uint32_t n = shm->nfault_mods, i = 0;
    while (i < n && strcmp(shm->fault_mods[i].name, name) != 0)
        i++;
    if (i == n) {
        if (n == FAULT_MODS)
            return; /* the totals still count it */
        memcpy(shm->fault_mods[i].name, name, sizeof(name));
        __atomic_store_n(&shm->nfault_mods, n + 1, __ATOMIC_RELEASE);
    }
    uint64_t *c = &shm->fault_mods[i].n[watchdog ? 1 : 0];
    __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

uint64_t petrel__metrics_instance_get(unsigned what)
{
    return shm && what < PETREL__I_N ? __atomic_load_n(&shm->inst[what], __ATOMIC_RELAXED) : 0;
}

/* ------------------------------------------------------------------------ */
/* Module metrics (petrel.h)                                                */

struct petrel_metric {
    uint32_t idx;
    bool gauge;
};

static struct petrel_metric handles[PETREL__M_USER_MAX];

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= UNAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':';
        if (!alpha && !(i > 0 && ch >= '0' && ch <= '9'))
            return false;
    }
    return strncmp(s, "__", 2) != 0; /* reserved by Prometheus */
}

static petrel_metric_t *metric_new(const char *name, const char *help, bool gauge)
{
    if (name == NULL || !name_ok(name) || (shm && in_worker))
        return NULL;
    if (help == NULL)
        help = "";
    if (strlen(help) >= UHELP_MAX || strpbrk(help, "\n\\"))
        return NULL;
    registry_t *r = reg();
    for (uint32_t i = 0; i < r->n; i++)
        if (strcmp(r->m[i].name, name) == 0)
            return r->m[i].gauge == gauge ? &handles[i] : NULL;
    if (r->n == PETREL__M_USER_MAX)
        return NULL;
    umetric_t *m = &r->m[r->n];
    snprintf(m->name, sizeof(m->name), "%s", name);
    snprintf(m->help, sizeof(m->help), "%s", help);
    m->gauge = gauge;
    handles[r->n].idx = r->n;
    handles[r->n].gauge = gauge;
    /* published: a reader in a worker sees the entry whole */
    __atomic_store_n(&r->n, r->n + 1, __ATOMIC_RELEASE);
    return &handles[r->n - 1];
}

int petrel__metrics_upstream_slot(const char *name, const char *address)
{
    if (shm && in_worker)
        return -1;
    registry_t *r = reg();
    upslot_t want;
    label_copy(want.name, sizeof(want.name), name);
    label_copy(want.address, sizeof(want.address), address ? address : "");
    for (uint32_t i = 0; i < r->nup; i++)
        if (strcmp(r->up[i].name, want.name) == 0 && strcmp(r->up[i].address, want.address) == 0)
            return (int)i;
    if (r->nup == PETREL__M_UP_SLOTS)
        return -1;
    upslot_t *u = &r->up[r->nup];
    memcpy(u->name, want.name, sizeof(u->name));
    memcpy(u->address, want.address, sizeof(u->address));
    __atomic_store_n(&r->nup, r->nup + 1, __ATOMIC_RELEASE);
    return (int)r->nup - 1;
}

petrel__up_stats_t *petrel__metrics_up(int i)
{
    static petrel__up_stats_t scratch;
    return i >= 0 && i < PETREL__M_UP_SLOTS ? &petrel__stats->up[i] : &scratch;
}

petrel_metric_t *petrel_metric_counter(petrel_server_t *srv, const char *name, const char *help)
{
    (void)srv;
    return metric_new(name, help, false);
}

petrel_metric_t *petrel_metric_gauge(petrel_server_t *srv, const char *name, const char *help)
{
    (void)srv;
    return metric_new(name, help, true);
}

void petrel_metric_add(petrel_metric_t *m, int64_t n)
{
    if (m && (m->gauge || n > 0))
        petrel__stats->user[m->idx] += n;
}

void petrel_metric_set(petrel_metric_t *m, int64_t v)
{
    if (m && m->gauge)
        petrel__stats->user[m->idx] = v;
}

int petrel_ready_set(petrel_server_t *srv, const char *check, int ready)
{
    (void)srv;
    if (check == NULL || check[0] == '\0' || strlen(check) >= PETREL__M_CHECK_NAME)
        return PETREL_EINVAL;
    if (!in_worker)
        return PETREL_ESTATE;
    petrel__stats_t *st = petrel__stats;
    int free_i = -1;
    for (int i = 0; i < PETREL__M_CHECKS; i++) {
        if (st->checks[i].name[0] == '\0') {
            if (free_i < 0)
                free_i = i;
        } else if (strcmp(st->checks[i].name, check) == 0) {
            __atomic_store_n(&st->checks[i].down, !ready, __ATOMIC_RELEASE);
            return 0;
        }
    }
    if (free_i < 0)
        return PETREL_ELIMIT;
    snprintf(st->checks[free_i].name, PETREL__M_CHECK_NAME, "%s", check);
    __atomic_store_n(&st->checks[free_i].down, !ready, __ATOMIC_RELEASE);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */

/* The sum of the instance, consistent with respect to folds. */
static void snapshot(petrel__stats_t *out, uint32_t *nuser)
{
    if (shm == NULL) {
        *out = *petrel__stats;
        *nuser = private_reg.n;
        return;
    }
    for (;;) {
        uint32_t s1 = __atomic_load_n(&shm->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        uint32_t nu = __atomic_load_n(&shm->reg.n, __ATOMIC_ACQUIRE);
        memset(out, 0, sizeof(*out));
        add_stats(out, &shm->retired, false, nu, shm->reg.m);
        for (uint32_t i = 0; i < shm->nslots; i++) {
            const slot_t *s = &shm->slots[i];
            if (__atomic_load_n(&s->live, __ATOMIC_ACQUIRE))
                add_stats(out, &s->st, true, nu, shm->reg.m);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&shm->seq, __ATOMIC_RELAXED) == s1) {
            *nuser = nu;
            return;
        }
    }
}

bool petrel__metrics_ready(char *why, size_t len)
{
    if (petrel__metrics_instance_get(PETREL__I_DRAINING)) {
        snprintf(why, len, "draining");
        return false;
    }
    if (petrel__metrics_instance_get(PETREL__I_GAVE_UP)) {
        snprintf(why, len, "workers fail to start");
        return false;
    }
    uint64_t serving = petrel__metrics_instance_get(PETREL__I_WORKERS),
             wanted = petrel__metrics_instance_get(PETREL__I_WANTED);
    if (serving < wanted) {
        /* a worker crashed (or was killed by the watchdog) and its
         * successor is not serving yet */
        snprintf(why, len, "%llu of %llu workers serving", (unsigned long long)serving,
                 (unsigned long long)wanted);
        return false;
    }
    uint32_t n = shm ? shm->nslots : 1;
    for (uint32_t i = 0; i < n; i++) {
        const petrel__stats_t *st = shm ? &shm->slots[i].st : petrel__stats;
        if (shm && !__atomic_load_n(&shm->slots[i].live, __ATOMIC_ACQUIRE))
            continue;
        for (int k = 0; k < PETREL__M_CHECKS; k++)
            if (__atomic_load_n(&st->checks[k].down, __ATOMIC_ACQUIRE)) {
                char name[PETREL__M_CHECK_NAME];
                memcpy(name, st->checks[k].name, sizeof(name));
                name[sizeof(name) - 1] = '\0';
                snprintf(why, len, "%s is down", name);
                return false;
            }
    }
    return true;
}

/* A text buffer that counts what it cannot hold (the first pass sizes it). */
typedef struct out {
    char *p;
    size_t len, cap;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int k = vsnprintf(o->p ? o->p + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0)
        o->len += (size_t)k;
}

static void family(out_t *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(out_t *o, const char *name, uint64_t v)
{
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

/* A family with one label: n samples name{label="values[i]"} counts[i]. */
static void labelled(out_t *o, const char *name, const char *type, const char *help,
                     const char *label, const char *const *values, const uint64_t *counts, int n)
{
    family(o, name, type, help);
    for (int i = 0; i < n; i++)
        put(o, "%s{%s=\"%s\"} %llu\n", name, label, values[i], (unsigned long long)counts[i]);
}

/* A histogram of `slots` counts: bucket i holds the values below
 * 2^(shift + step * i), so its `le` is that bound minus 1 (in ns shown as
 * seconds when `ns`); the slots past `bounds` go to +Inf. */
static void histogram(out_t *o, const char *name, const char *help, const uint64_t *b, int slots,
                      int bounds, int shift, int step, bool ns, uint64_t sum)
{
    family(o, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < slots; i++) {
        cum += b[i];
        if (i >= bounds && i < slots - 1)
            continue;
        if (i >= bounds)
            put(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
        else {
            uint64_t le = ((uint64_t)1 << (shift + step * i)) - 1;
            if (ns)
                put(o, "%s_bucket{le=\"%llu.%09llu\"} %llu\n", name,
                    (unsigned long long)(le / 1000000000), (unsigned long long)(le % 1000000000),
                    (unsigned long long)cum);
            else
                put(o, "%s_bucket{le=\"%llu\"} %llu\n", name, (unsigned long long)le,
                    (unsigned long long)cum);
        }
    }
    if (ns)
        put(o, "%s_sum %llu.%09llu\n", name, (unsigned long long)(sum / 1000000000),
            (unsigned long long)(sum % 1000000000));
    else
        put(o, "%s_sum %llu\n", name, (unsigned long long)sum);
    put(o, "%s_count %llu\n", name, (unsigned long long)cum);
}

/* in the order of petrel__close_t (conn.h) */
static const char *const close_names[PETREL__METRICS_CLOSE_N] = {"client", "timeout", "limit",
                                                                 "reset",  "drain",   "error"};
static const char *const proxy_rej_names[PETREL__PROXY_REJ_N] = {"untrusted", "invalid", "timeout",
                                                                 "eof"};
static const char *const proto_names[PETREL__M_PROTOS] = {"HTTP/1.0", "HTTP/1.1", "HTTP/2"};
static const char *const method_names[PETREL__M_METHODS] = {"GET",    "HEAD",  "POST",    "PUT",
                                                            "DELETE", "PATCH", "OPTIONS", "other"};

/* The upstream client's families, labelled by upstream (and address). */
static void format_upstreams(out_t *o, const petrel__stats_t *s)
{
    static const char *const results[PETREL__M_UP_RESULTS] = {
        "2xx",     "1xx_3xx", "4xx",  "5xx",      "timeout",
        "refused", "breaker", "full", "protocol", "closed"};
    const registry_t *r = reg();
    uint32_t n = __atomic_load_n(&r->nup, __ATOMIC_ACQUIRE);
    if (n > PETREL__M_UP_SLOTS)
        n = PETREL__M_UP_SLOTS;
    if (n == 0)
        return;
    family(o, "petrel_upstream_calls_total", "counter",
           "Calls to an upstream, by result: the status class of the response, or why it failed.");
    for (uint32_t i = 0; i < n; i++)
        if (r->up[i].address[0] == '\0')
            for (int k = 0; k < PETREL__M_UP_RESULTS; k++)
                put(o, "petrel_upstream_calls_total{upstream=\"%s\",result=\"%s\"} %llu\n",
                    r->up[i].name, results[k], (unsigned long long)s->up[i].calls[k]);
    family(o, "petrel_upstream_retries_total", "counter",
           "Calls sent again on another connection (within the retry budget).");
    for (uint32_t i = 0; i < n; i++)
        if (r->up[i].address[0] == '\0')
            put(o, "petrel_upstream_retries_total{upstream=\"%s\"} %llu\n", r->up[i].name,
                (unsigned long long)s->up[i].retries);
    family(o, "petrel_upstream_pending_calls", "gauge", "Calls waiting for a connection now.");
    for (uint32_t i = 0; i < n; i++)
        if (r->up[i].address[0] == '\0')
            put(o, "petrel_upstream_pending_calls{upstream=\"%s\"} %lld\n", r->up[i].name,
                (long long)s->up[i].pending);
    static const struct {
        const char *name, *type, *help;
    } per_addr[] = {
        {"petrel_upstream_connects_total", "counter", "Connections opened to an upstream address."},
        {"petrel_upstream_reuses_total", "counter", "Calls sent on a pooled connection."},
        {"petrel_upstream_connections", "gauge", "Connections open to an upstream address now."},
        {"petrel_upstream_idle_connections", "gauge", "Pooled connections unused now."},
        {"petrel_upstream_breaker_open", "gauge",
         "Workers whose circuit breaker keeps the address out now."},
    };
    for (size_t f = 0; f < sizeof(per_addr) / sizeof(per_addr[0]); f++) {
        family(o, per_addr[f].name, per_addr[f].type, per_addr[f].help);
        for (uint32_t i = 0; i < n; i++) {
            if (r->up[i].address[0] == '\0')
                continue;
            const petrel__up_stats_t *u = &s->up[i];
            long long v = f == 0   ? (long long)u->connects
                          : f == 1 ? (long long)u->reuses
                          : f == 2 ? u->open
                          : f == 3 ? u->idle
                                   : u->breaker_open;
            put(o, "%s{upstream=\"%s\",address=\"%s\"} %lld\n", per_addr[f].name, r->up[i].name,
                r->up[i].address, v);
        }
    }
}

static void format(out_t *o, const petrel__stats_t *s, uint32_t nuser)
{
    const uint64_t *c = s->c;
    family(o, "petrel_build_info", "gauge", "Always 1: the version of petrel serving.");
    put(o, "petrel_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
    family(o, "petrel_start_time_seconds", "gauge",
           "When the master process started, in seconds since the epoch.");
    sample(o, "petrel_start_time_seconds", shm ? shm->start_time : 0);
    family(o, "petrel_workers", "gauge", "Worker processes serving.");
    sample(o, "petrel_workers", petrel__metrics_instance_get(PETREL__I_WORKERS));
    family(o, "petrel_module_generation", "gauge",
           "The generation of modules served: 0 at start-up, one more for each reload.");
    sample(o, "petrel_module_generation", petrel__metrics_instance_get(PETREL__I_GENERATION));
    family(o, "petrel_worker_restarts_total", "counter",
           "Workers that died (a crash, a kill) and were started again.");
    sample(o, "petrel_worker_restarts_total", petrel__metrics_instance_get(PETREL__I_RESTARTS));
    family(o, "petrel_worker_crashes_total", "counter",
           "Workers killed by a fault of their own (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT).");
    sample(o, "petrel_worker_crashes_total", petrel__metrics_instance_get(PETREL__I_CRASHES));
    family(o, "petrel_watchdog_kills_total", "counter",
           "Workers killed by the watchdog: a loop turn longer than --watchdog-timeout.");
    sample(o, "petrel_watchdog_kills_total", petrel__metrics_instance_get(PETREL__I_WATCHDOG));
    uint32_t nfm = shm ? __atomic_load_n(&shm->nfault_mods, __ATOMIC_ACQUIRE) : 0;
    static const char *const fault_names[2] = {"petrel_module_crashes_total",
                                               "petrel_module_watchdog_kills_total"};
    static const char *const fault_helps[2] = {
        "Worker crashes by the module of the request (or init, or code) at fault "
        "(\"\": none known).",
        "Watchdog kills by the module of the request the worker was stuck in."};
    for (int k = 0; k < 2; k++) {
        family(o, fault_names[k], "counter", fault_helps[k]);
        for (uint32_t i = 0; i < nfm; i++)
            put(o, "%s{module=\"%s\"} %llu\n", fault_names[k], shm->fault_mods[i].name,
                (unsigned long long)__atomic_load_n(&shm->fault_mods[i].n[k], __ATOMIC_RELAXED));
    }
    static const char *const results[] = {"ok", "failed"};
    uint64_t reloads[2] = {petrel__metrics_instance_get(PETREL__I_RELOADS_OK),
                           petrel__metrics_instance_get(PETREL__I_RELOADS_FAIL)};
    labelled(o, "petrel_reloads_total", "counter", "Reloads (SIGHUP), by result.", "result",
             results, reloads, 2);
    family(o, "petrel_draining", "gauge", "1 from SIGTERM on (/readyz answers 503).");
    sample(o, "petrel_draining", petrel__metrics_instance_get(PETREL__I_DRAINING));

    family(o, "petrel_connections_accepted_total", "counter",
           "Connections accepted on the public listeners.");
    sample(o, "petrel_connections_accepted_total", c[PETREL__C_CONN_ACCEPTED]);
    family(o, "petrel_connections_open", "gauge", "Connections open now.");
    sample(o, "petrel_connections_open",
           (uint64_t)(s->g[PETREL__G_CONN_OPEN] > 0 ? s->g[PETREL__G_CONN_OPEN] : 0));
    labelled(o, "petrel_connections_closed_total", "counter",
             "Connections closed, by reason: client (the client closed or ended the exchange), "
             "timeout, limit (a size limit), reset (the connection broke), drain (shutdown or "
             "reload), error (a protocol error of the client).",
             "reason", close_names, c + PETREL__C_CONN_CLOSED, PETREL__METRICS_CLOSE_N);
    family(o, "petrel_received_bytes_total", "counter",
           "Bytes read from client connections (all protocols).");
    sample(o, "petrel_received_bytes_total", c[PETREL__C_BYTES_IN]);
    family(o, "petrel_sent_bytes_total", "counter",
           "Bytes written to client connections (all protocols, files included).");
    sample(o, "petrel_sent_bytes_total", c[PETREL__C_BYTES_OUT]);

    family(o, "petrel_requests_total", "counter",
           "Requests answered, by protocol, method and status class.");
    for (int p = 0; p < PETREL__M_PROTOS; p++)
        for (int m = 0; m < PETREL__M_METHODS; m++)
            for (int k = 0; k < PETREL__M_CLASSES; k++) {
                uint64_t v =
                    c[PETREL__C_REQUESTS + (p * PETREL__M_METHODS + m) * PETREL__M_CLASSES + k];
                if (v)
                    put(o,
                        "petrel_requests_total{protocol=\"%s\",method=\"%s\",status=\"%dxx\"} "
                        "%llu\n",
                        proto_names[p], method_names[m], k + 1, (unsigned long long)v);
            }
    histogram(o, "petrel_request_duration_seconds",
              "Time from the loop turn that read a request's first bytes to its whole response "
              "queued.",
              c + PETREL__C_DUR, PETREL__M_DUR_SLOTS, PETREL__M_DUR_BOUNDS, PETREL__M_DUR_SHIFT, 1,
              true, c[PETREL__C_DUR_SUM_NS]);
    histogram(o, "petrel_request_arena_bytes",
              "High-water mark of the memory a request took from its arena (its head, body, "
              "response and everything its handler allocated).",
              c + PETREL__C_ARENA, PETREL__M_ARENA_SLOTS, PETREL__M_ARENA_BOUNDS, 8, 2, false,
              c[PETREL__C_ARENA_SUM]);

    family(o, "petrel_h2_streams_total", "counter", "HTTP/2 streams opened by clients.");
    sample(o, "petrel_h2_streams_total", c[PETREL__C_H2_STREAMS]);
    family(o, "petrel_h2_streams_open", "gauge", "HTTP/2 streams open now.");
    sample(o, "petrel_h2_streams_open",
           (uint64_t)(s->g[PETREL__G_H2_STREAMS_OPEN] > 0 ? s->g[PETREL__G_H2_STREAMS_OPEN] : 0));
    family(o, "petrel_websocket_connections_total", "counter", "WebSocket connections opened.");
    sample(o, "petrel_websocket_connections_total", c[PETREL__C_WS_OPENED]);
    family(o, "petrel_websocket_connections_open", "gauge", "WebSocket connections open now.");
    sample(o, "petrel_websocket_connections_open",
           (uint64_t)(s->g[PETREL__G_WS_OPEN] > 0 ? s->g[PETREL__G_WS_OPEN] : 0));
    static const char *const directions[] = {"in", "out"}, *const versions[] = {"1", "2"};
    labelled(o, "petrel_websocket_messages_total", "counter",
             "WebSocket messages, by direction: received (in) and sent (out).", "direction",
             directions, c + PETREL__C_WS_MSG_IN, 2); /* MSG_IN, MSG_OUT */
    labelled(o, "petrel_proxy_headers_total", "counter",
             "PROXY protocol headers accepted (--proxy-protocol), by version.", "version", versions,
             c + PETREL__C_PROXY_V1, 2); /* V1, V2 */
    labelled(o, "petrel_proxy_rejected_total", "counter",
             "Connections closed by the PROXY protocol stage, by reason.", "reason",
             proxy_rej_names, c + PETREL__C_PROXY_REJECTED, PETREL__PROXY_REJ_N);

    static const struct {
        unsigned c;
        const char *name, *help;
    } cache[] = {
        {PETREL__C_CACHE_HITS, "petrel_cache_hits_total",
         "Cache lookups answered from a cache (petrel_cache_get, petrel_cache_lookup)."},
        {PETREL__C_CACHE_MISSES, "petrel_cache_misses_total",
         "Cache lookups that found nothing, or an expired entry."},
        {PETREL__C_CACHE_EVICTIONS, "petrel_cache_evictions_total",
         "Cache entries replaced to make room (CLOCK)."},
        {PETREL__C_CACHE_EXPIRED, "petrel_cache_expired_total",
         "Cache entries dropped because their time to live had passed."},
        {PETREL__C_CACHE_LOADS, "petrel_cache_loads_total",
         "Cache loads started by misses (one per key, however many lookups waited)."},
        {PETREL__C_CACHE_LOAD_FAILURES, "petrel_cache_load_failures_total",
         "Cache loads that failed, or gave a value too big to keep."},
    };
    for (size_t i = 0; i < sizeof(cache) / sizeof(cache[0]); i++) {
        family(o, cache[i].name, "counter", cache[i].help);
        sample(o, cache[i].name, c[cache[i].c]);
    }
    family(o, "petrel_cache_entries", "gauge", "Cache entries holding a value now, in all caches.");
    sample(o, "petrel_cache_entries",
           (uint64_t)(s->g[PETREL__G_CACHE_ENTRIES] > 0 ? s->g[PETREL__G_CACHE_ENTRIES] : 0));

    format_upstreams(o, s);

    const registry_t *r = reg();
    for (uint32_t i = 0; i < nuser; i++) {
        const umetric_t *m = &r->m[i];
        family(o, m->name, m->gauge ? "gauge" : "counter", m->help[0] ? m->help : m->name);
        put(o, "%s %lld\n", m->name, (long long)s->user[i]);
    }
}

char *petrel__metrics_text(petrel_arena_t *a, size_t *len)
{
    petrel__stats_t *s = petrel_arena_alloc(a, sizeof(*s), 0);
    if (s == NULL)
        return NULL;
    uint32_t nuser;
    snapshot(s, &nuser);
    out_t o = {NULL, 0, 0};
    format(&o, s, nuser);
    o.cap = o.len + 1;
    o.p = petrel_arena_alloc(a, o.cap, 1);
    if (o.p == NULL)
        return NULL;
    o.len = 0;
    format(&o, s, nuser);
    *len = o.len < o.cap ? o.len : o.cap - 1;
    return o.p;
}
