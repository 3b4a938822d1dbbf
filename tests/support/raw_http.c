/* Raw-socket helpers for the server tests — see raw_http.h. */
#include "raw_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int kr_raw_connect(const char *src, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (src) {
        struct sockaddr_in a = { .sin_family = AF_INET };
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int kr_raw_post_unread(int port, const char *path, const char *body) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int small = 4096; /* before connecting: the window is agreed at the handshake */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      path, strlen(body));
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0 ||
        kr_raw_send(fd, head, (size_t)hn) != 0 || kr_raw_send(fd, body, strlen(body)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int kr_raw_send(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t kr_raw_read(int fd, char *buf, size_t cap, double timeout_s, int *closed) {
    size_t len = 0;
    *closed = 0;
    double end = now_s() + timeout_s;
    while (len + 1 < cap) {
        double left = end - now_s();
        if (left <= 0) break;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int pr = poll(&p, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            *closed = 1;
            break;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len;
}

int kr_raw_status(const char *buf) {
    int major = 0, minor = 0, code = 0;
    if (sscanf(buf, "HTTP/%d.%d %d", &major, &minor, &code) != 3) return 0;
    return code;
}
