/*
 * fault.h -- what every worker is doing, in memory its master reads
 * (fault.c): for the watchdog (a worker whose loop does not turn) and for
 * the reports of workers that crash, and of the trial process that runs a
 * new generation's init before the master does.
 *
 * The master maps one block of slots, shared with every process it forks,
 * at start-up: one slot per worker process alive, and one for the trial.
 * A worker writes only its own slot: once per loop turn the time the turn
 * began (busy_ms, 0 while it waits for events), and when a fatal signal
 * arrives the signal, the faulting address, the module the code at fault
 * belongs to and the request it was running.  Nothing on the request path
 * but two pointer stores around a handler's call (petrel__fault_req,
 * petrel__fault_route).
 */
#ifndef PETREL_FAULT_H
#define PETREL_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct petrel__wslot {
    int32_t pid;         /* the owner; 0: free, -1: taken, its fork to come */
    int32_t signo;       /* the fatal signal it caught, 0 if none */
    uint64_t busy_ms;    /* CLOCK_MONOTONIC ms when its loop turn began; 0: waiting */
    uint64_t addr;       /* si_addr of the fatal signal */
    uint64_t pc;         /* the instruction at fault, 0 if unknown */
    uint64_t req_id;     /* the request of req_*, 0 if none */
    char stage[64];      /* what runs outside requests ("module 'x' worker_init") */
    char req_method[16]; /* the request its handler was running */
    char req_path[128];  /* (truncated with "...") */
    char req_route[96];  /* its route's pattern */
    char req_module[48]; /* the module that registered the route */
    char where[160];     /* the code at fault: "ver.so (boom+0x1a)", module 'ver' */
    char err[512];       /* the trial: why the new generation failed */
} __attribute__((aligned(64))) petrel__wslot_t;

/* The request being served by a handler, as the framework knows it: set
 * around a handler's call (request.c).  The signal handler copies its
 * fields (petrel.h's public ones) into the slot: bounded copies, no lock,
 * no allocation. */
/* Where a route comes from, for crash reports: its pattern and the module
 * that added it (NULL: none).  The router keeps one per route. */
typedef struct petrel__route_info {
    char *pattern;
    char *module;
    bool stream; /* (not for reports) the route has PETREL_BODY_STREAM */
} petrel__route_info_t;

extern const struct petrel_req *volatile petrel__fault_req;
extern const petrel__route_info_t *volatile petrel__fault_route;

/* The master: map `n` worker slots and the trial's.  0, or PETREL_ENOMEM. */
int petrel__fault_init(int n);
/* A slot for a process about to be forked: its index, or -1 (none free, or
 * no shared block). */
int petrel__fault_take(void);
/* The fork made process `pid` with slot `idx` (pid 0: it failed; free). */
void petrel__fault_owner(int idx, pid_t pid);
/* Slot `idx` (from petrel__fault_take), or NULL for -1. */
petrel__wslot_t *petrel__fault_at(int idx);
/* The slot of process `pid`, or NULL. */
petrel__wslot_t *petrel__fault_slot(pid_t pid);
/* Process `pid` is gone: its slot is free. */
void petrel__fault_release(pid_t pid);
/* The trial process's slot (cleared), or NULL without a shared block. */
petrel__wslot_t *petrel__fault_trial_slot(void);

/* In a process the master forked: write into slot `s` (NULL: none), and
 * catch the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
 * SIGTRAP, SIGSYS) to record them there before dying of them. */
void petrel__fault_enter(petrel__wslot_t *s);
/* The slot of this process (NULL in the master, or without one). */
extern petrel__wslot_t *petrel__fault_self;
/* What this process runs outside any request, "" when done: the slot's
 * stage (printf-like, truncated). */
void petrel__fault_stage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A module loaded at `addr_in_it` (any address of its code or data) is
 * named `name`: a fault in its code names it. */
void petrel__fault_module(const void *addr_in_it, const char *name);

/* The master: " while running request ID METHOD PATH (route R, module 'M')"
 * or " in module 'x' init" and the fault (", at address 0x0, code in
 * ver.so+0x1139 (boom+0x11), module 'ver'"), from slot `s`, into buf. */
void petrel__fault_describe(const petrel__wslot_t *s, char *buf, size_t len);
/* The module at fault according to slot `s`: the request's, or the one
 * whose function ran (stage), or the one the code at fault belongs to; ""
 * when none is known. */
void petrel__fault_module_of(const petrel__wslot_t *s, char *buf, size_t len);
/* "signal 11 (SIGSEGV)", or "signal N" for one without a name here; in buf. */
const char *petrel__signame(int sig, char *buf, size_t len);

#endif /* PETREL_FAULT_H */
