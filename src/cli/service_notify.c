/*
 * cli/service_notify — sd_notify without libsystemd (see service_notify.h). The protocol is
 * systemd's documented one: $NOTIFY_SOCKET holds a filesystem path, or an abstract-namespace
 * name written with a leading '@'; each message is one datagram, sent without waiting.
 */
#include "service_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void say(char *why, size_t cap, const char *fmt, const char *a, const char *b) {
    if (why && cap) snprintf(why, cap, fmt, a, b);
}

int kr_service_notify(const char *state, char *why, size_t cap) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path) return 0;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len < 2 || len >= sizeof addr.sun_path) {
        say(why, cap, "NOTIFY_SOCKET '%.200s'%s: not a socket path or @name", path,
            len >= sizeof addr.sun_path ? " (too long)" : "");
        return -1;
    }
    memcpy(addr.sun_path, path, len);
    if (path[0] == '@') addr.sun_path[0] = '\0'; /* the abstract namespace */
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        say(why, cap, "NOTIFY_SOCKET %.200s: socket: %s", path, strerror(errno));
        return -1;
    }
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, alen);
    int e = errno;
    close(fd);
    if (n < 0) {
        say(why, cap, "NOTIFY_SOCKET %.200s: %s", path, strerror(e));
        return -1;
    }
    return 1;
}

uint64_t kr_service_watchdog_usec(char *why, size_t cap) {
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!usec || !*usec) return 0;
    if (pid && *pid) {
        char *end = NULL;
        errno = 0;
        long long p = strtoll(pid, &end, 10);
        if (errno || *end || p <= 0) {
            say(why, cap, "WATCHDOG_PID '%.40s': not a process id%s", pid, "");
            return 0;
        }
        if (p != (long long)getpid()) return 0; /* meant for another process */
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(usec, &end, 10);
    if (errno || *end || usec[0] == '-' || v == 0) {
        say(why, cap, "WATCHDOG_USEC '%.40s': not a positive number of microseconds%s", usec, "");
        return 0;
    }
    return (uint64_t)v;
}
