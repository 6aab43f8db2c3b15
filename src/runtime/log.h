/*
 * log.h -- the byte sinks (log.c): the error log on stderr, with levels
 * (petrel_log() is public), and the access log's buffered file.  What goes
 * into an access log line is the framework's business (accesslog.c).
 */
#ifndef PETREL_LOG_H
#define PETREL_LOG_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern int petrel__log_level;

/* The request being served (its id, 0 for none): petrel_log() lines carry
 * "request ID: " while it is set.  Set around a handler's call and the
 * stream calls (request.c, response.c). */
extern uint64_t petrel__log_req;
/* Write a line of the error log about request `id` (0: none). */
void petrel__vlog(int level, uint64_t id, const char *fmt, va_list ap);

/* --error-log FILE: open it (appending) as the process's standard error,
 * so that what else writes there (a sanitizer's report) goes with it.
 * 0, or PETREL_EIO with errno set. */
int petrel__elog_open(const char *path);
/* SIGUSR1: open the error log and the access log files again, by name
 * (after logrotate moved them).  The old descriptors' numbers are kept.
 * 0, or PETREL_EIO (logged; the old files stay in use). */
int petrel__logs_reopen(void);

/* Open the access log file ("-": standard output).  0, or PETREL_EIO with
 * errno set. */
int petrel__alog_open(const char *path);
/* Whether an access log is open. */
extern bool petrel__alog_on;
/* Append one line (buffered: written when the buffer fills, and by
 * petrel__alog_flush).  Returns true when the buffer was empty before: the
 * caller has it flushed soon. */
bool petrel__alog_write(const char *line, size_t len);
void petrel__alog_flush(void);

#endif /* PETREL_LOG_H */
