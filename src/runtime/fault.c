/*
 * fault.c -- the workers' slots in shared memory, and the fatal signal
 * handler that fills them (see fault.h).
 *
 * The signal handler runs in a process that is about to die: it writes
 * with plain stores and bounded copies, calls no allocator and no stdio,
 * and then lets the signal kill the process as it would have (SA_RESETHAND,
 * the signal raised again), so that the exit status and any core dump are
 * those of the fault.  It runs on a stack of its own, so that a stack
 * overflow is reported too.  dladdr() names the object the faulting
 * instruction belongs to; it takes the loader's lock, which is recursive:
 * a fault inside the loader (a module's constructor) does not deadlock.
 */
#include "runtime/fault.h"

#include "petrel.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

const petrel_req_t *volatile petrel__fault_req;
const petrel__route_info_t *volatile petrel__fault_route;
petrel__wslot_t *petrel__fault_self;

static petrel__wslot_t *slots;
static int nslots; /* the workers'; the trial's is slots[nslots] */

#define MODS_MAX 64
static struct {
    uintptr_t base;
    char name[48];
} mods[MODS_MAX];
static unsigned nmods; /* entries written, the newest at (nmods - 1) % MODS_MAX */

int petrel__fault_init(int n)
{
    if (slots)
        return 0;
    int total = n * 4 + 16 + 1; /* serving, successors of a reload, retiring; the trial */
    void *p = mmap(NULL, (size_t)total * sizeof(petrel__wslot_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return PETREL_ENOMEM;
    slots = p;
    nslots = total - 1;
    return 0;
}

int petrel__fault_take(void)
{
    for (int i = 0; slots && i < nslots; i++)
        if (slots[i].pid == 0) {
            memset(&slots[i], 0, sizeof(slots[i]));
            slots[i].pid = -1;
            return i;
        }
    return -1;
}

void petrel__fault_owner(int idx, pid_t pid)
{
    if (slots && idx >= 0 && idx < nslots)
        slots[idx].pid = pid > 0 ? pid : 0;
}

petrel__wslot_t *petrel__fault_at(int idx)
{
    return slots && idx >= 0 && idx < nslots ? &slots[idx] : NULL;
}

petrel__wslot_t *petrel__fault_slot(pid_t pid)
{
    for (int i = 0; slots && pid > 0 && i < nslots; i++)
        if (slots[i].pid == pid)
            return &slots[i];
    return NULL;
}

void petrel__fault_release(pid_t pid)
{
    petrel__wslot_t *s = petrel__fault_slot(pid);
    if (s)
        s->pid = 0;
}

petrel__wslot_t *petrel__fault_trial_slot(void)
{
    if (slots == NULL)
        return NULL;
    memset(&slots[nslots], 0, sizeof(slots[nslots]));
    return &slots[nslots];
}

void petrel__fault_module(const void *addr_in_it, const char *name)
{
    Dl_info di;
    if (addr_in_it == NULL || dladdr(addr_in_it, &di) == 0 || di.dli_fbase == NULL)
        return;
    unsigned k = nmods % MODS_MAX;
    mods[k].base = (uintptr_t)di.dli_fbase;
    snprintf(mods[k].name, sizeof(mods[k].name), "%s", name);
    nmods++;
}

void petrel__fault_stage(const char *fmt, ...)
{
    petrel__wslot_t *s = petrel__fault_self;
    if (s == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->stage, sizeof(s->stage), fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* The signal handler: async-signal-safe writing                            */

typedef struct out {
    char *p;
    size_t left; /* room, the NUL included */
} out_t;

static void put(out_t *o, const char *s)
{
    while (s && *s && o->left > 1) {
        *o->p++ = *s++;
        o->left--;
    }
    *o->p = '\0';
}

static void put_hex(out_t *o, uintptr_t v)
{
    char b[2 + 2 * sizeof(v) + 1], *e = b + sizeof(b) - 1;
    *e = '\0';
    do {
        *--e = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    *--e = 'x';
    *--e = '0';
    put(o, e);
}

static uintptr_t pc_of(void *ucv)
{
    const ucontext_t *uc = ucv;
    if (uc == NULL)
        return 0;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__i386__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    return 0;
#endif
}

/* Copy `n` bytes of `s` into `to` (room `cap`), "..." when it is cut, a
 * control byte as '?' (the line is the master's log's). */
static void fill_str(char *to, size_t cap, const char *s, size_t n)
{
    if (s == NULL)
        n = 0;
    size_t k = n < cap ? n : cap - 4;
    for (size_t i = 0; i < k; i++)
        to[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (n < cap)
        to[k] = '\0';
    else
        memcpy(to + k, "...", 4);
}

/* From the fatal signal handler: the request a handler runs. */
static void fill_request(petrel__wslot_t *s, const petrel_req_t *req,
                         const petrel__route_info_t *info)
{
    s->req_id = req->id;
    fill_str(s->req_method, sizeof(s->req_method), req->method_name.ptr, req->method_name.len);
    fill_str(s->req_path, sizeof(s->req_path), req->path.ptr, req->path.len);
    if (info && info->pattern)
        fill_str(s->req_route, sizeof(s->req_route), info->pattern, strlen(info->pattern));
    if (info && info->module)
        fill_str(s->req_module, sizeof(s->req_module), info->module, strlen(info->module));
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    petrel__wslot_t *s = petrel__fault_self;
    int saved = errno;
    if (s) {
        /* a kill() (the watchdog's SIGABRT) has no faulting address */
        bool sent = si->si_code == SI_USER || si->si_code == SI_TKILL || si->si_code == SI_QUEUE;
        s->addr = sent ? 0 : (uint64_t)(uintptr_t)si->si_addr;
        s->pc = sent ? 0 : pc_of(uc);
        const petrel_req_t *req = petrel__fault_req;
        if (req)
            fill_request(s, req, petrel__fault_route);
        Dl_info di;
        if (s->pc && dladdr((void *)(uintptr_t)s->pc, &di) && di.dli_fname) {
            out_t o = {s->where, sizeof(s->where)};
            const char *base = strrchr(di.dli_fname, '/');
            put(&o, base ? base + 1 : di.dli_fname);
            /* the offset in the file: addr2line -e FILE OFFSET */
            put(&o, "+");
            put_hex(&o, (uintptr_t)s->pc - (uintptr_t)di.dli_fbase);
            if (di.dli_sname) {
                put(&o, " (");
                put(&o, di.dli_sname);
                put(&o, "+");
                put_hex(&o, (uintptr_t)s->pc - (uintptr_t)di.dli_saddr);
                put(&o, ")");
            }
            for (unsigned i = nmods; i-- > (nmods > MODS_MAX ? nmods - MODS_MAX : 0);)
                if (mods[i % MODS_MAX].base == (uintptr_t)di.dli_fbase) {
                    put(&o, ", module '");
                    put(&o, mods[i % MODS_MAX].name);
                    put(&o, "'");
                    break;
                }
        }
        __atomic_store_n(&s->signo, sig, __ATOMIC_RELEASE);
    }
    errno = saved;
    /* SA_RESETHAND: the default action now.  A fault of the code comes
     * back when the instruction runs again; a signal sent is raised again
     * and delivered when this handler returns. */
    raise(sig);
}

void petrel__fault_enter(petrel__wslot_t *s)
{
    petrel__fault_self = s;
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

/* ------------------------------------------------------------------------ */
/* The master's report                                                      */

const char *petrel__signame(int sig, char *buf, size_t len)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                 {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"}, {SIGTRAP, "SIGTRAP"},
                 {SIGSYS, "SIGSYS"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"},
                 {SIGINT, "SIGINT"}};
    const char *name = NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && name == NULL; i++)
        if (names[i].sig == sig)
            name = names[i].name;
    if (name)
        snprintf(buf, len, "signal %d (%s)", sig, name);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}

void petrel__fault_describe(const petrel__wslot_t *s, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (n < len) {                                                                             \
            int k_ = snprintf(buf + n, len - n, __VA_ARGS__);                                      \
            n += k_ > 0 ? (size_t)k_ : 0;                                                          \
        }                                                                                          \
    } while (0)
    if (s == NULL)
        return;
    if (s->req_id || s->req_method[0])
        ADD(" while running request %llu %s %s (route %s, module '%s')",
            (unsigned long long)s->req_id, s->req_method, s->req_path,
            s->req_route[0] ? s->req_route : "?", s->req_module[0] ? s->req_module : "?");
    else if (s->stage[0])
        ADD(" in %s", s->stage);
    if (s->pc) {
        ADD(", at address 0x%llx", (unsigned long long)s->addr);
        if (s->where[0])
            ADD(", code in %s", s->where);
    }
#undef ADD
}

/* The name between the quotes of "module 'NAME'" in `s`, into buf. */
static bool quoted_module(const char *s, char *buf, size_t len)
{
    const char *p = s ? strstr(s, "module '") : NULL;
    if (p == NULL)
        return false;
    p += strlen("module '");
    const char *e = strchr(p, '\'');
    if (e == NULL)
        return false;
    snprintf(buf, len, "%.*s", (int)(e - p), p);
    return true;
}

void petrel__fault_module_of(const petrel__wslot_t *s, char *buf, size_t len)
{
    buf[0] = '\0';
    if (s == NULL)
        return;
    if (s->req_module[0])
        snprintf(buf, len, "%s", s->req_module);
    else if (!quoted_module(s->stage, buf, len))
        quoted_module(s->where, buf, len);
}
