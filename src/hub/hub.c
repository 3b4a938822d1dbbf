/*
 * hub/hub — see hub.h. The pull of one repository:
 *
 *   HEAD resolve/<revision>/config.json      -> commit (X-Repo-Commit), ETag, size
 *   for each file, at resolve/<commit>/...   -> (HEAD) skip if the snapshot or blob exists,
 *                                               else GET into blobs/<etag>.incomplete with a
 *                                               Range from its size, verify, rename, link
 *   refs/<revision> <- commit
 *
 * Every file after the first is fetched at the commit, not the branch, so a branch that moves
 * during a pull cannot mix two commits in one snapshot.
 */
#include "kronos/hub.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "model/hub_cache.h"
#include "hub/http.h"
#include "hub/sha256.h"

#define KR_HUB_DEFAULT_ENDPOINT "https://huggingface.co"

kr_hub_params kr_hub_default_params(void) {
    kr_hub_params p;
    memset(&p, 0, sizeof p);
    p.connect_timeout_s = 30;
    p.stall_timeout_s = 60;
    p.max_attempts = 5;
    return p;
}

static int is_sha256_hex(const char *s) {
    if (strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
            return 0;
    }
    return 1;
}

/* ETag as sent -> blob name: weak marker and quotes dropped. */
static void normalize_etag(const char *raw, char *out, size_t n) {
    if (!strncmp(raw, "W/", 2)) raw += 2;
    size_t len = strlen(raw);
    if (len >= 2 && raw[0] == '"' && raw[len - 1] == '"') raw++, len -= 2;
    if (len >= n) len = n - 1;
    memcpy(out, raw, len);
    out[len] = '\0';
}

/* Percent-encodes everything but RFC 3986 unreserved characters ('/' too: the hub wants a
 * revision such as refs/pr/1 as one path segment). */
static void url_escape(const char *s, char *out, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (kr_hub_is_name_char((char)ch) || ch == '~') {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = '\0';
}

/* ---------------------------------------------------------------- paths */

/* The token `huggingface-cli login` saved, so a logged-in machine needs no HF_TOKEN:
 * $HF_TOKEN_PATH, else $HF_HOME/token, else ~/.cache/huggingface/token. 1 if one was read. */
static int read_saved_token(char *out, size_t n) {
    const char *tp = getenv("HF_TOKEN_PATH"), *hf_home = getenv("HF_HOME");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char path[PATH_MAX];
    int len;
    if (tp && *tp)
        len = kr_hub_expand_home(path, sizeof path, tp, "");
    else if (hf_home && *hf_home)
        len = kr_hub_expand_home(path, sizeof path, hf_home, "/token");
    else if (xdg && *xdg)
        len = kr_hub_expand_home(path, sizeof path, xdg, "/huggingface/token");
    else if (home && *home)
        len = snprintf(path, sizeof path, "%s/.cache/huggingface/token", home);
    else
        return 0;
    if (len < 0 || (size_t)len >= sizeof path) return 0;
    return kr_hub_read_small_file(path, out, n);
}

/* mkdir -p. */
static kr_status make_dirs(const char *path, kr_error *err) {
    char tmp[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof tmp)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "path too long: %.200s", path);
    memcpy(tmp, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0') continue;
        char saved = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return kr_error_set(err, KR_ERR_IO, "cannot create directory %s: %s", tmp,
                                strerror(errno));
        tmp[i] = saved;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return kr_error_set(err, KR_ERR_IO, "%s: not a directory", path);
    return KR_OK;
}

/* make_dirs of the directory part of a file path. */
static kr_status make_parent(const char *file_path, kr_error *err) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file_path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return KR_OK;
    *slash = '\0';
    return make_dirs(dir, err);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- pull */

typedef struct pull_ctx {
    const kr_hub_params *p;
    const char *repo;
    char repo_dir[PATH_MAX]; /* <cache>/models--org--name */
    char lock_dir[PATH_MAX]; /* <cache>/.locks/models--org--name */
    char endpoint[1024]; /* without a trailing '/' */
    int have_token;
    kr_hub_http http;
    /* the file being transferred, for progress reports */
    const char *file;
    int64_t total, resumed;
    double t0, t_end; /* transfer start and end (0: still running), monotonic s */
    int sha256_verified;
    /* the snapshot being filled: learnt from the first HEAD */
    char commit[128];
    int commit_from_server; /* 0: the server sent no X-Repo-Commit, the revision names it */
} pull_ctx;

/* Reports an event of the file being transferred; non-zero when the caller wants to cancel. */
static int emit(pull_ctx *c, kr_hub_event ev, const char *file, int64_t done) {
    if (!c->p->progress) return 0;
    kr_hub_progress pr = {
        .event = ev,
        .repo = c->repo,
        .file = file,
        .done = done,
        .total = c->total,
        .resumed = c->resumed,
        .seconds = c->t0 > 0 ? (c->t_end > 0 ? c->t_end : now_seconds()) - c->t0 : 0,
        .sha256_verified = c->sha256_verified,
    };
    return c->p->progress(&pr, c->p->progress_user);
}

/* Reports a file that needs no transfer (cached, absent). */
static void emit_untransferred(pull_ctx *c, kr_hub_event ev, const char *file, int64_t size) {
    c->total = size;
    c->resumed = 0;
    c->t0 = c->t_end = 0;
    c->sha256_verified = 0;
    emit(c, ev, file, size < 0 ? 0 : size);
}

static int on_bytes(void *user, int64_t on_disk) {
    pull_ctx *c = user;
    return emit(c, KR_HUB_FILE_PROGRESS, c->file, on_disk);
}

/* An HTTP status that ends the pull, as a message naming the URL. */
static kr_status status_error(const pull_ctx *c, const kr_hub_meta *m, const char *full_url,
                              kr_error *err) {
    const char *code = m->error_code, *msg = m->error_message;
    char url[4096];
    kr_http_redact_url(full_url, url, sizeof url); /* an endpoint's user:password@ stays out */
    if (m->status == 404)
        return kr_error_set(err, KR_ERR_IO, "repository or file not found: %s%s%s%s", url,
                            code[0] ? " (" : "", code, code[0] ? ")" : "");
    if (m->status == 401 || m->status == 403) {
        if (c->have_token)
            return kr_error_set(
                err, KR_ERR_IO,
                "access denied (HTTP %ld) for %s: the token sent (HF_TOKEN, or the one "
                "'huggingface-cli login' saved) was refused or has no access to this repository "
                "(a gated one needs its terms accepted on the hub)%s%s",
                m->status, url, msg[0] ? ": " : "", msg);
        /* The hub answers 401 for a repository that does not exist too, so as not to reveal
         * private ones: say both. */
        return kr_error_set(
            err, KR_ERR_IO,
            "access denied (HTTP %ld) for %s: the repository is private, gated or does not "
            "exist; a private or gated one needs HF_TOKEN set to an access token",
            m->status, url);
    }
    return kr_error_set(err, KR_ERR_IO, "HTTP %ld from %s%s%s", m->status, url, msg[0] ? ": " : "",
                        msg);
}

static void backoff(int attempt) {
    struct timespec ts = { 0, 250000000L * (attempt < 4 ? attempt : 4) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* 1 if the size bytes of fd are a Git LFS pointer file ("version https://git-lfs...", a few
 * hundred bytes) rather than contents: what a git mirror that does not resolve LFS serves,
 * and a non-LFS ETag leaves only the size to check, which the pointer matches. */
static int is_lfs_pointer(int fd, int64_t size) {
    static const char magic[] = "version https://git-lfs.github.com/spec/";
    char head[sizeof magic - 1];
    if (size < (int64_t)sizeof head || size > 1024) return 0;
    return pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
           !memcmp(head, magic, sizeof head);
}

/* url as messages show it: without an endpoint's user:password@. Returns out. */
static const char *shown_url(const char *url, char *out, size_t n) {
    kr_http_redact_url(url, out, n);
    return out;
}

/* HEAD url, tried again (as a GET is) while the connection drops or stalls or the hub answers
 * 429/5xx: a busy moment of the hub must not end a pull. The last answer is returned as it
 * came (an HTTP status is the caller's to judge). */
static kr_status head_with_retries(pull_ctx *c, const char *url, kr_hub_meta *m, kr_error *err) {
    int max_attempts = c->p->max_attempts > 0 ? c->p->max_attempts : 1;
    for (int attempt = 1;; attempt++) {
        int transient = 0;
        kr_status st = kr_hub_http_head(&c->http, url, m, &transient, err);
        if (st == KR_OK) transient = m->status == 429 || m->status >= 500;
        if (!transient || attempt >= max_attempts) return st;
        backoff(attempt);
    }
}

/* Transfers url into blobs/<etag> (etag "" when the server gave none: the blob is then named
 * by the sha256 of its contents and nothing can be resumed). Writes the blob name into
 * blob[n]. The partial file is kept on transport errors (the next pull resumes it) and
 * deleted when the bytes contradict the hub's size or sha256. */
static kr_status download_blob(pull_ctx *c, const char *file, const char *url, const char *etag,
                               int64_t expected, char *blob, size_t n, kr_error *err) {
    char part[PATH_MAX], lock[PATH_MAX], final_path[PATH_MAX], tmp_name[192], shown[4096];
    kr_http_redact_url(url, shown, sizeof shown); /* for messages: no user:password@ */
    if (etag[0])
        snprintf(tmp_name, sizeof tmp_name, "%s", etag);
    else
        url_escape(file, tmp_name, sizeof tmp_name); /* unique per repo file, no '/' */
    KR_HUB_PATH(part, "%s/blobs/%s.incomplete", c->repo_dir, tmp_name);
    KR_HUB_PATH(lock, "%s/%s.lock", c->lock_dir, tmp_name);

    /* Another pull of the same blob (a second process) waits here, then finds it done. */
    int lock_fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock_fd < 0)
        return kr_error_set(err, KR_ERR_IO, "cannot open lock file %s: %s", lock, strerror(errno));
    /* Say so before blocking: a pull of several GB can hold the lock for minutes. */
    if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK &&
        emit(c, KR_HUB_FILE_WAITING, file, 0)) {
        close(lock_fd);
        return kr_error_set(err, KR_ERR_CANCELLED, "%s: cancelled while waiting for another pull",
                            file);
    }
    while (flock(lock_fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int e = errno;
            close(lock_fd);
            return kr_error_set(err, KR_ERR_IO, "cannot lock %s: %s", lock, strerror(e));
        }
    }
    kr_status st = KR_OK;
    int fd = -1;
    if (etag[0]) {
        int len = snprintf(final_path, sizeof final_path, "%s/blobs/%s", c->repo_dir, etag);
        if (len < 0 || (size_t)len >= sizeof final_path) {
            st = kr_error_set(err, KR_ERR_INVALID_ARG, "path too long: %s/blobs/...", c->repo_dir);
            goto out;
        }
        if (kr_hub_is_regular(final_path)) {
            snprintf(blob, n, "%s", etag);
            emit_untransferred(c, KR_HUB_FILE_CACHED, file, expected);
            goto out;
        }
    }
    /* Not through a symlink: the partial file is truncated and written to, and a link planted
     * in a shared cache would aim that at a file elsewhere. */
    fd = open(part, O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        st = kr_error_set(err, KR_ERR_IO, "cannot open %s: %s", part,
                          errno == ELOOP ? "it is a symbolic link (refused: the partial download "
                                           "must be a file of the cache; delete the link)"
                                         : strerror(errno));
        goto out;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = kr_error_set(err, KR_ERR_IO, "cannot stat %s: %s", part, strerror(errno));
        goto out;
    }
    int64_t have = (int64_t)sb.st_size;
    /* Without an ETag the partial file cannot be known to belong to this version; a partial
     * longer than the file is not a prefix of it. Both start over. */
    if (have > 0 && (!etag[0] || (expected >= 0 && have > expected))) {
        if (ftruncate(fd, 0) != 0) {
            st = kr_error_set(err, KR_ERR_IO, "cannot truncate %s: %s", part, strerror(errno));
            goto out;
        }
        have = 0;
    }
    c->file = file;
    c->total = expected;
    c->resumed = have;
    c->t0 = now_seconds();
    c->t_end = 0;
    c->sha256_verified = 0;
    if (emit(c, KR_HUB_FILE_START, file, have)) {
        st = kr_error_set(err, KR_ERR_CANCELLED, "%s: cancelled", shown);
        goto out;
    }
    kr_hub_sink sink = { .fd = fd,
                         .path = part,
                         .offset = have,
                         .expected = expected,
                         .on_bytes = on_bytes,
                         .user = c };
    int max_attempts = c->p->max_attempts > 0 ? c->p->max_attempts : 1;
    for (int attempt = 1;; attempt++) {
        if (expected >= 0 && sink.offset == expected)
            break; /* all there: an earlier run died before the rename */
        kr_hub_meta m;
        int transient = 0;
        st = kr_hub_http_get(&c->http, url, &sink, &m, &transient, err);
        if (st == KR_OK) {
            if (m.status == 200 || m.status == 206) break;
            if (m.status == 416 && sink.offset > 0) {
                /* The server says our partial file is no prefix of the file: start over. */
                if (ftruncate(fd, 0) != 0) {
                    st = kr_error_set(err, KR_ERR_IO, "cannot truncate %s: %s", part,
                                      strerror(errno));
                    goto out;
                }
                sink.offset = 0;
                st = kr_error_set(err, KR_ERR_IO, "GET %s: HTTP 416 for a resumed download", shown);
                transient = 1;
            } else {
                st = status_error(c, &m, url, err);
                transient = m.status >= 500 ||
                            m.status == 429; /* overloaded or rate-limited: wait, resume */
            }
        }
        if (st == KR_ERR_FORMAT) {
            unlink(part);
            kr_error_prefix(err, "%s: deleted the partial download", file);
            goto out;
        }
        if (!transient || attempt >= max_attempts) goto out;
        if (emit(c, KR_HUB_FILE_RETRY, file, sink.offset)) {
            st = kr_error_set(err, KR_ERR_CANCELLED, "%s: cancelled", shown);
            goto out;
        }
        backoff(attempt);
    }
    st = KR_OK;
    c->t_end = now_seconds();

    /* Verify before the blob becomes visible: size first (cheap), then the content hash. */
    if (fstat(fd, &sb) != 0) {
        st = kr_error_set(err, KR_ERR_IO, "cannot stat %s: %s", part, strerror(errno));
        goto out;
    }
    if (expected >= 0 && (int64_t)sb.st_size != expected) {
        unlink(part);
        st = kr_error_set(err, KR_ERR_FORMAT,
                          "%s: size mismatch: downloaded %" PRId64
                          " bytes, the hub announced %" PRId64 "; deleted the partial download %s",
                          shown, (int64_t)sb.st_size, expected, part);
        goto out;
    }
    if (is_lfs_pointer(fd, (int64_t)sb.st_size)) {
        unlink(part);
        st = kr_error_set(err, KR_ERR_FORMAT,
                          "%s: the server sent a Git LFS pointer (%" PRId64
                          " bytes), not the file: the endpoint does not resolve LFS files (a "
                          "plain git mirror?); deleted the partial download %s",
                          shown, (int64_t)sb.st_size, part);
        goto out;
    }
    char sha[65] = "";
    if (!etag[0] || is_sha256_hex(etag)) {
        if (etag[0]) emit(c, KR_HUB_FILE_VERIFY, file, (int64_t)sb.st_size);
        st = kr_sha256_file(part, sha, err);
        if (st != KR_OK) goto out;
        if (etag[0] && strcasecmp(sha, etag) != 0) {
            unlink(part);
            st = kr_error_set(
                err, KR_ERR_FORMAT,
                "%s: sha256 mismatch: the download hashes to %s, the hub says %s; deleted the "
                "partial download %s",
                shown, sha, etag, part);
            goto out;
        }
        c->sha256_verified = etag[0] != '\0';
        if (!etag[0]) {
            int len = snprintf(final_path, sizeof final_path, "%s/blobs/%s", c->repo_dir, sha);
            if (len < 0 || (size_t)len >= sizeof final_path) {
                st = kr_error_set(err, KR_ERR_INVALID_ARG, "path too long: %s/blobs/...",
                                  c->repo_dir);
                goto out;
            }
        }
    }
    /* Durable before visible: a crash must not leave a complete-looking, short blob. */
    if (fsync(fd) != 0) {
        st = kr_error_set(err, KR_ERR_IO, "cannot write %s: %s", part, strerror(errno));
        goto out;
    }
    if (rename(part, final_path) != 0) {
        st = kr_error_set(err, KR_ERR_IO, "cannot rename %s to %s: %s", part, final_path,
                          strerror(errno));
        goto out;
    }
    snprintf(blob, n, "%s", etag[0] ? etag : sha);
    emit(c, KR_HUB_FILE_DONE, file, (int64_t)sb.st_size);
out:
    if (fd >= 0) close(fd);
    close(lock_fd); /* releases the flock */
    return st;
}

/* With the pid, the suffix of a temporary name no other pull writes at the same time: several
 * threads of one process may pull into one cache (the pid alone made them collide). */
static unsigned long next_tmp_seq(void) {
    static atomic_ulong seq;
    return atomic_fetch_add(&seq, 1);
}

/* snapshots/<commit>/<file> -> ../../blobs/<blob> (one more "../" per directory in file),
 * replaced atomically so a reader never sees a missing link. */
static kr_status link_snapshot(pull_ctx *c, const char *commit, const char *file, const char *blob,
                               kr_error *err) {
    char link_path[PATH_MAX], tmp[PATH_MAX], target[PATH_MAX];
    KR_HUB_PATH(link_path, "%s/snapshots/%s/%s", c->repo_dir, commit, file);
    KR_HUB_PATH(tmp, "%s.tmp%ld.%lu", link_path, (long)getpid(), next_tmp_seq());
    size_t t = 0;
    for (const char *p = file; *p; p++)
        if (*p == '/') t += (size_t)snprintf(target + t, sizeof target - t, "../");
    snprintf(target + t, sizeof target - t, "../../blobs/%s", blob);
    kr_status st = make_parent(link_path, err);
    if (st != KR_OK) return st;
    unlink(tmp);
    if (symlink(target, tmp) != 0)
        return kr_error_set(err, KR_ERR_IO, "cannot create symlink %s: %s", tmp, strerror(errno));
    if (rename(tmp, link_path) != 0) {
        int e = errno;
        unlink(tmp);
        return kr_error_set(err, KR_ERR_IO, "cannot rename %s to %s: %s", tmp, link_path,
                            strerror(e));
    }
    return KR_OK;
}

static kr_status write_ref(pull_ctx *c, const char *revision, const char *commit, kr_error *err) {
    char old[128];
    if (kr_hub_read_ref(c->repo_dir, revision, old, sizeof old) && !strcmp(old, commit))
        return KR_OK;
    char path[PATH_MAX], tmp[PATH_MAX];
    KR_HUB_PATH(path, "%s/refs/%s", c->repo_dir, revision);
    KR_HUB_PATH(tmp, "%s.tmp%ld.%lu", path, (long)getpid(), next_tmp_seq());
    kr_status st = make_parent(path, err);
    if (st != KR_OK) return st;
    FILE *f = fopen(tmp, "wb");
    if (!f) return kr_error_set(err, KR_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    /* No newline: the file huggingface_hub writes holds the bare hash. */
    int bad = fputs(commit, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return kr_error_set(err, KR_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return KR_OK;
}

/* Fetches one file of the repository into the snapshot of c->commit (learnt from this
 * file's HEAD when it is still empty). */
static kr_status pull_file(pull_ctx *c, const kr_hub_file *f, const char *revision,
                           const char *revision_escaped, kr_error *err) {
    char url[4096], shown[4096], snap[PATH_MAX];
    char *commit = c->commit;
    if (commit[0]) {
        KR_HUB_PATH(snap, "%s/snapshots/%s/%s", c->repo_dir, commit, f->name);
        if (kr_hub_is_regular(snap)) { /* a commit's files never change: no request needed */
            emit_untransferred(c, KR_HUB_FILE_CACHED, f->name, -1);
            return KR_OK;
        }
    }
    KR_HUB_PATH(url, "%s/%s/resolve/%s/%s", c->endpoint, c->repo,
                commit[0] ? commit : revision_escaped, f->name);
    kr_hub_meta m;
    kr_status st = head_with_retries(c, url, &m, err);
    if (st != KR_OK) return st;
    int redirect_with_meta = m.status >= 300 && m.status < 400 && (m.commit[0] || m.linked_etag[0]);
    if (m.status == 404 && f->optional) {
        emit_untransferred(c, KR_HUB_FILE_ABSENT, f->name, -1);
        return KR_OK;
    }
    if (m.status != 200 && !redirect_with_meta) return status_error(c, &m, url, err);
    if (!commit[0]) {
        if (m.commit[0]) {
            if (!kr_hub_safe_component(m.commit))
                return kr_error_set(err, KR_ERR_FORMAT, "HEAD %s: malformed X-Repo-Commit '%s'",
                                    shown_url(url, shown, sizeof shown), m.commit);
            snprintf(commit, sizeof c->commit, "%s", m.commit);
            c->commit_from_server = 1;
        } else if (kr_hub_safe_component(revision)) {
            snprintf(commit, sizeof c->commit, "%s", revision); /* a server without commit ids */
        } else {
            return kr_error_set(
                err, KR_ERR_FORMAT,
                "HEAD %s: no X-Repo-Commit header, and revision '%s' cannot name a snapshot",
                shown_url(url, shown, sizeof shown), revision);
        }
        KR_HUB_PATH(snap, "%s/snapshots/%s/%s", c->repo_dir, commit, f->name);
        if (kr_hub_is_regular(snap)) {
            emit_untransferred(c, KR_HUB_FILE_CACHED, f->name, -1);
            return KR_OK;
        }
        KR_HUB_PATH(url, "%s/%s/resolve/%s/%s", c->endpoint, c->repo, commit, f->name);
    }
    char etag[160];
    normalize_etag(m.linked_etag[0] ? m.linked_etag : m.etag, etag, sizeof etag);
    if (!kr_hub_safe_component(etag)) etag[0] = '\0'; /* unusable as a file name: name by content */
    /* X-Linked-Size is the LFS file's size; a redirect's own Content-Length is not. */
    int64_t expected = m.linked_size >= 0 ? m.linked_size : m.status == 200 ? m.content_length : -1;
    char blob[192];
    st = download_blob(c, f->name, url, etag, expected, blob, sizeof blob, err);
    if (st != KR_OK) return st;
    return link_snapshot(c, commit, f->name, blob, err);
}

kr_status kr_hub_pull(const kr_hub_params *params, const char *repo, const char *revision,
                      char *snapshot_dir_out, size_t n, kr_error *err) {
    kr_hub_params defaults = kr_hub_default_params();
    if (!params) params = &defaults;
    if (!kr_hub_is_repo_id(repo))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "'%s' is not a hub model id of the form org/name",
                            repo ? repo : "(null)");
    if (!revision || !*revision) revision = "main";
    if (!kr_hub_valid_revision(revision))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "'%s' is not a valid revision (branch, tag or commit)", revision);
    pull_ctx *c = calloc(1, sizeof *c);
    if (!c) return kr_error_set(err, KR_ERR_NOMEM, "out of memory");
    c->p = params;
    c->repo = repo;
    char cache[PATH_MAX];
    kr_status st = kr_hub_cache_dir(params->cache_dir, cache, sizeof cache, err);
    if (st == KR_OK) st = kr_hub_repo_folder(cache, repo, c->repo_dir, sizeof c->repo_dir, err);
    if (st == KR_OK) {
        char rel[PATH_MAX];
        snprintf(rel, sizeof rel, "%s", c->repo_dir + strlen(cache) + 1);
        int len = snprintf(c->lock_dir, sizeof c->lock_dir, "%s/.locks/%s", cache, rel);
        if (len < 0 || (size_t)len >= sizeof c->lock_dir)
            st = kr_error_set(err, KR_ERR_INVALID_ARG, "hub cache path too long");
    }
    const char *endpoint = params->endpoint;
    if (!endpoint || !*endpoint) endpoint = getenv("HF_ENDPOINT");
    if (!endpoint || !*endpoint) endpoint = KR_HUB_DEFAULT_ENDPOINT;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    for (size_t len = strlen(c->endpoint); len && c->endpoint[len - 1] == '/'; len--)
        c->endpoint[len - 1] = '\0';
    const char *token = params->token;
    if (!token || !*token) token = getenv("HF_TOKEN");
    char saved_token[1024];
    if ((!token || !*token) && read_saved_token(saved_token, sizeof saved_token))
        token = saved_token;
    c->have_token = token && *token;

    char dir[PATH_MAX];
    if (st == KR_OK) {
        int len = snprintf(dir, sizeof dir, "%s/blobs", c->repo_dir);
        st = len < 0 || (size_t)len >= sizeof dir
                 ? kr_error_set(err, KR_ERR_INVALID_ARG, "hub cache path too long")
                 : make_dirs(dir, err);
    }
    if (st == KR_OK) st = make_dirs(c->lock_dir, err);
    int http_open = 0;
    if (st == KR_OK) {
        st = kr_hub_http_open(&c->http, c->have_token ? token : NULL,
                              params->connect_timeout_s > 0 ? params->connect_timeout_s : 30,
                              params->stall_timeout_s > 0 ? params->stall_timeout_s : 60, err);
        http_open = st == KR_OK;
    }
    char rev_esc[800];
    url_escape(revision, rev_esc, sizeof rev_esc);
    for (size_t i = 0; st == KR_OK && i < KR_HUB_CHECKPOINT_FILES; i++)
        st = pull_file(c, &kr_hub_checkpoint_files[i], revision, rev_esc, err);
    /* The ref moves only once the snapshot is whole, so a resolve never finds half a pull. A
     * commit hash given as the revision needs no ref. */
    if (st == KR_OK && (strcmp(revision, c->commit) != 0 || !c->commit_from_server))
        st = write_ref(c, revision, c->commit, err);
    if (st == KR_OK) {
        int len = snprintf(snapshot_dir_out, n, "%s/snapshots/%s", c->repo_dir, c->commit);
        if (len < 0 || (size_t)len >= n)
            st = kr_error_set(err, KR_ERR_INVALID_ARG,
                              "snapshot path does not fit the output buffer");
    }
    if (http_open) kr_hub_http_close(&c->http);
    free(c);
    return st;
}
