/*
 * server/access_log — access log lines and request ids (see access_log.h).
 */
#include "server/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "kronos/server.h"

int kr_request_id_valid(const char *s) {
    if (!s || !*s) return 0;
    size_t n = 0;
    for (; s[n]; n++) {
        char ch = s[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == ':' || ch == '-';
        if (!ok || n >= KR_REQUEST_ID_MAX) return 0;
    }
    return 1;
}

static pthread_once_t g_prefix_once = PTHREAD_ONCE_INIT;
static uint32_t g_prefix;
static atomic_ullong g_counter;

/* A random prefix keeps ids of two runs (or two replicas) apart in merged logs. */
static void init_prefix(void) {
    if (getrandom(&g_prefix, sizeof g_prefix, GRND_NONBLOCK) != (ssize_t)sizeof g_prefix)
        g_prefix = (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
}

void kr_request_id_new(char out[KR_REQUEST_ID_MAX + 1]) {
    pthread_once(&g_prefix_once, init_prefix);
    unsigned long long n = atomic_fetch_add(&g_counter, 1) + 1;
    snprintf(out, KR_REQUEST_ID_MAX + 1, "%08x%08llx", g_prefix, n & 0xffffffffull);
}

static void put_string(kr_sb *sb, const char *key, const char *v) {
    kr_sb_appendf(sb, ",\"%s\":\"", key);
    kr_sb_append_json_escaped(sb, v ? v : "");
    kr_sb_append(sb, "\"");
}

void kr_access_log_format(const kr_access_entry *e, kr_sb *sb) {
    time_t secs = (time_t)e->time;
    int ms = (int)((e->time - (double)secs) * 1000.0);
    if (ms < 0) ms = 0;
    if (ms > 999) ms = 999;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char stamp[40];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    kr_sb_appendf(sb, "{\"time\":\"%s.%03dZ\"", stamp, ms);
    put_string(sb, "request_id", e->request_id);
    put_string(sb, "client", e->client);
    put_string(sb, "method", e->method);
    put_string(sb, "route", e->route);
    kr_sb_appendf(sb, ",\"status\":%d,\"bytes\":%llu,\"duration_s\":%.6f", e->status,
                  (unsigned long long)e->bytes, e->duration_s);
    if (e->queue_wait_s >= 0) kr_sb_appendf(sb, ",\"queue_wait_s\":%.6f", e->queue_wait_s);
    if (e->error && *e->error) put_string(sb, "error", e->error);
    kr_sb_append(sb, "}\n");
}

struct kr_access_log {
    pthread_mutex_t mu;
    FILE *f;
    int own; /* opened here (closed by kr_access_log_close) */
    char *path; /* what kr_access_log_reopen opens again; NULL for stdout */
};

/* What an access log may be: a regular file, or a character device (a terminal, /dev/null).
 * A FIFO or a socket would wedge whoever opens or writes it once its reader stops (at start-up
 * before the signals are handled, in the signal thread on SIGUSR1, in every request thread
 * under the log's lock), so it is refused by name; standard output is "-". */
static kr_status refuse_kind(const char *path, mode_t mode, kr_error *err) {
    if (S_ISREG(mode) || S_ISCHR(mode)) return KR_OK;
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "access_log: '%s' is %s: the access log must be a regular file, a "
                        "character device, or - for standard output (a reader that stops would "
                        "stall every request)",
                        path,
                        S_ISDIR(mode)    ? "a directory"
                        : S_ISFIFO(mode) ? "a FIFO (named pipe)"
                        : S_ISSOCK(mode) ? "a socket"
                                         : "not a regular file");
}

static kr_status open_append(const char *path, FILE **out, kr_error *err) {
    /* O_NONBLOCK: opening a FIFO for writing blocks until a reader comes; nonblocking it
     * either fails (no reader: ENXIO) or opens, and then the kind check refuses it. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0640);
    if (fd < 0 && errno == ENXIO)
        return refuse_kind(path, S_IFIFO, err); /* a FIFO without a reader, or a socket */
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0) {
        kr_status st = refuse_kind(path, sb.st_mode, err);
        if (st != KR_OK) {
            close(fd);
            return st;
        }
    }
    /* Writes block as usual (a terminal, a full disk): the line is whole or not written. */
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return kr_error_set(err, KR_ERR_IO, "access_log: cannot open '%s' for appending: %s", path,
                            strerror(e));
    }
    *out = f;
    return KR_OK;
}

kr_status kr_server_check_access_log(const char *path, kr_error *err) {
    if (!path || !*path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "access_log: empty path (use - for stdout)");
    if (!strcmp(path, "-")) return KR_OK;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        kr_status st = refuse_kind(path, sb.st_mode, err);
        if (st != KR_OK) return st;
        if (access(path, W_OK) != 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "access_log: '%s' cannot be written: %s",
                                path, strerror(errno));
        return KR_OK;
    }
    if (errno != ENOENT)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "access_log: '%s': %s", path, strerror(errno));
    /* Not there yet: its directory must take a new file. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK | X_OK) != 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "access_log: '%s' cannot be created: its directory '%s': %s", path, dir,
                            strerror(errno));
    return KR_OK;
}

kr_status kr_access_log_open(const char *path, kr_access_log **out, kr_error *err) {
    *out = NULL;
    if (!path || !*path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "access_log: empty path (use - for stdout)");
    kr_access_log *log = calloc(1, sizeof *log);
    if (!log) return kr_error_set(err, KR_ERR_NOMEM, "access_log: out of memory");
    if (!strcmp(path, "-")) {
        log->f = stdout;
    } else {
        kr_status st;
        if (!(log->path = strdup(path)))
            st = kr_error_set(err, KR_ERR_NOMEM, "access_log: out of memory");
        else
            st = open_append(path, &log->f, err);
        if (st != KR_OK) {
            free(log->path);
            free(log);
            return st;
        }
        log->own = 1;
    }
    pthread_mutex_init(&log->mu, NULL);
    *out = log;
    return KR_OK;
}

kr_status kr_access_log_reopen(kr_access_log *log, kr_error *err) {
    if (!log || !log->own) return KR_OK;
    /* Opened before taking the lock, so requests never wait on the file system; on failure
     * the lines keep going to the old file rather than nowhere. */
    FILE *f = NULL;
    kr_status st = open_append(log->path, &f, err);
    if (st != KR_OK) return st;
    pthread_mutex_lock(&log->mu);
    FILE *old = log->f;
    log->f = f;
    pthread_mutex_unlock(&log->mu);
    fclose(old);
    return KR_OK;
}

const char *kr_access_log_path(const kr_access_log *log) {
    return log && log->path ? log->path : "-";
}

void kr_access_log_write(kr_access_log *log, const kr_access_entry *e) {
    if (!log) return;
    kr_sb sb = { 0 };
    kr_access_log_format(e, &sb);
    if (sb.oom || !sb.data) {
        kr_sb_free(&sb);
        return;
    }
    pthread_mutex_lock(&log->mu);
    fwrite(sb.data, 1, sb.len, log->f);
    fflush(log->f);
    pthread_mutex_unlock(&log->mu);
    kr_sb_free(&sb);
}

void kr_access_log_close(kr_access_log *log) {
    if (!log) return;
    if (log->own)
        fclose(log->f);
    else
        fflush(log->f);
    pthread_mutex_destroy(&log->mu);
    free(log->path);
    free(log);
}
