/* base/fsutil — see fsutil.h. */
#include "base/fsutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* mkdir -p: creates every missing component of path. */
kr_status kr_mkdir_p(const char *path, kr_error *err) {
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            kr_status rc =
                kr_error_set(err, KR_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
            free(p);
            return rc;
        }
        p[i] = c;
    }
    struct stat sb;
    int ok = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    free(p);
    return ok ? KR_OK : kr_error_set(err, KR_ERR_IO, "%s: not a directory", path);
}

int kr_open_regular(const char *path, size_t *size, kr_error *err) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        kr_error_set(err, KR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        kr_error_set(err, KR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        kr_error_set(err, KR_ERR_IO, "%s: not a regular file (%s)", path,
                     S_ISDIR(sb.st_mode)    ? "a directory"
                     : S_ISFIFO(sb.st_mode) ? "a FIFO"
                     : S_ISSOCK(sb.st_mode) ? "a socket"
                                            : "a device");
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    if (size) *size = (size_t)sb.st_size;
    return fd;
}

kr_status kr_read_file(const char *path, size_t max_bytes, const char *what, char **out,
                       size_t *len, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "read_file: out is NULL");
    *out = NULL;
    if (len) *len = 0;
    if (!path) return kr_error_set(err, KR_ERR_INVALID_ARG, "read_file: path is NULL");
    size_t size = 0;
    int fd = kr_open_regular(path, &size, err);
    if (fd < 0) return err ? err->status : KR_ERR_IO;
    if (size > max_bytes) {
        close(fd);
        return kr_error_set(err, KR_ERR_FORMAT, "%s: %zu bytes, larger than a %s can be (%zu)",
                            path, size, what ? what : "file", max_bytes);
    }
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            kr_status st =
                kr_error_set(err, KR_ERR_IO, "%s: read error: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return st;
        }
        if (n == 0) break; /* shrank while reading: take what is there */
        got += (size_t)n;
    }
    close(fd);
    buf[got] = 0;
    *out = buf;
    if (len) *len = got;
    return KR_OK;
}
