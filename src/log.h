/*
 * log.h -- the byte sinks (log.c): the error log on stderr, with levels
 * (petrel_log() is public), and the access log's buffered file.  What goes
 * into an access log line is the framework's business (accesslog.c).
 */
#ifndef PETREL_LOG_H
#define PETREL_LOG_H

#include <stdbool.h>
#include <stddef.h>

extern int petrel__log_level;

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
