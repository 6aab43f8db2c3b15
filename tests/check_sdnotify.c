/*
 * check_sdnotify.c -- unit tests of src/runtime/sdnotify.c's own implementation of
 * systemd's protocols (petrel speaks them itself): LISTEN_PID /
 * LISTEN_FDS / LISTEN_FDNAMES as sd_listen_fds(3) documents them, and one
 * notification datagram to NOTIFY_SOCKET as sd_notify(3) does.  The
 * integration test test_systemd.sh runs the build's own choice against
 * systemd-socket-activate and a notify socket.
 */
#include "runtime/sdnotify.h"

#include "petrel.h"
#include "check_run.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void set_env(const char *pid, const char *fds, const char *names)
{
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (pid)
        setenv("LISTEN_PID", pid, 1);
    if (fds)
        setenv("LISTEN_FDS", fds, 1);
    if (names)
        setenv("LISTEN_FDNAMES", names, 1);
}

static bool env_clear(void)
{
    return !getenv("LISTEN_PID") && !getenv("LISTEN_FDS") && !getenv("LISTEN_FDNAMES");
}

/* Two listening sockets at descriptors 3 and 4: in a child of its own,
 * where they may take the place of Check's descriptors.  The child's
 * checks are its exit status: the line that failed. */
#define CHILD_CHECK(c)                                                                             \
    do {                                                                                           \
        if (!(c))                                                                                  \
            _exit(__LINE__ % 250 + 1);                                                             \
    } while (0)

static void two_listeners(void)
{
    for (int fd = 3; fd <= 4; fd++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        CHILD_CHECK(s >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHILD_CHECK(bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(s, 8) == 0);
        if (s != fd) {
            CHILD_CHECK(dup2(s, fd) == fd);
            close(s);
        }
    }
}

START_TEST(test_listen_fds_ours)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        two_listeners();
        char me[32], err[128];
        snprintf(me, sizeof(me), "%d", (int)getpid());
        set_env(me, "2", "http:admin");
        const char *names[4];
        CHILD_CHECK(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)) == 2);
        CHILD_CHECK(strcmp(names[0], "http") == 0 && strcmp(names[1], "admin") == 0);
        CHILD_CHECK(env_clear()); /* no child sees them */
        CHILD_CHECK(fcntl(3, F_GETFD) & FD_CLOEXEC);
        CHILD_CHECK(petrel__sd_is_listener(3) && petrel__sd_is_listener(4));
        CHILD_CHECK(!petrel__sd_is_listener(0));
        /* without names */
        set_env(me, "1", NULL);
        CHILD_CHECK(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)) == 1);
        CHILD_CHECK(strcmp(names[0], "") == 0);
        /* more sockets than the caller takes, names longer than petrel
         * keeps: refused, not taken without their names (an "admin" socket
         * would serve as a public one) */
        set_env(me, "2", "http:admin");
        CHILD_CHECK(petrel__sd_listen_fds_proto(names, 1, err, sizeof(err)) == PETREL_EINVAL);
        CHILD_CHECK(strstr(err, "at most 1") != NULL);
        static char many[5000];
        memset(many, 'a', sizeof(many) - 1);
        set_env(me, "2", many);
        CHILD_CHECK(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)) == PETREL_EINVAL);
        CHILD_CHECK(strstr(err, "LISTEN_FDNAMES") != NULL);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed at line ~%d",
                  WIFEXITED(st) ? WEXITSTATUS(st) - 1 : -1);
}
END_TEST

/* LISTEN_PID of another process: the descriptors are not ours. */
START_TEST(test_listen_fds_not_ours)
{
    char err[128];
    const char *names[4];
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
    set_env(pid, "2", "a:b");
    ck_assert_int_eq(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)), 0);
    ck_assert(env_clear());
    set_env(NULL, NULL, NULL);
    ck_assert_int_eq(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_listen_fds_bad)
{
    char err[128];
    const char *names[4];
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    set_env("12x", "1", NULL);
    ck_assert_int_eq(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)), PETREL_EINVAL);
    ck_assert(env_clear());
    set_env(pid, "two", NULL);
    ck_assert_int_eq(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)), PETREL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "LISTEN_FDS"));
    close(40);
    set_env(pid, "38", NULL); /* descriptors 3..40: 40 is not open */
    ck_assert_int_eq(petrel__sd_listen_fds_proto(names, 4, err, sizeof(err)), PETREL_EINVAL);
    ck_assert(env_clear());
}
END_TEST

/* One datagram, the message whole, to a path and to an abstract name. */
START_TEST(test_notify_raw)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/petrel-notify-%d", (int)getpid());
    unlink(path);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    const char msg[] = "RELOADING=1\nMONOTONIC_USEC=123\nSTATUS=x";
    ck_assert_int_eq(petrel__sd_notify_raw(path, msg, sizeof(msg) - 1), 0);
    char buf[256];
    ssize_t n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
    ck_assert_int_eq(n, (ssize_t)sizeof(msg) - 1);
    ck_assert(memcmp(buf, msg, (size_t)n) == 0);
    close(s);
    unlink(path);

    char name[64];
    snprintf(name, sizeof(name), "@petrel-notify-%d", (int)getpid());
    s = socket(AF_UNIX, SOCK_DGRAM, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))),
                     0);
    ck_assert_int_eq(petrel__sd_notify_raw(name, "READY=1", 7), 0);
    n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
    ck_assert_int_eq(n, 7);
    close(s);
    /* nobody there, or not a socket path */
    ck_assert_int_eq(petrel__sd_notify_raw(path, "READY=1", 7), PETREL_EIO);
    ck_assert_int_eq(petrel__sd_notify_raw("relative", "READY=1", 7), PETREL_EIO);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sdnotify");
    TCase *tc = tcase_create("protocols");
    tcase_add_test(tc, test_listen_fds_ours);
    tcase_add_test(tc, test_listen_fds_not_ours);
    tcase_add_test(tc, test_listen_fds_bad);
    tcase_add_test(tc, test_notify_raw);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
