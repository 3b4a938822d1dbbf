/*
 * The hub layer and `kronos pull` against a local stand-in for the Hugging Face hub: a
 * libmicrohttpd server on 127.0.0.1 (ephemeral port) serving the bundled demo model in the
 * hub's URL layout, with its headers (X-Repo-Commit, ETag, X-Linked-Etag/-Size, a redirect to
 * a "CDN" path for the LFS file) and Range support, plus failure modes: a connection dropped
 * half-way, a corrupted body, a short body, a Range ignored, a private repository.
 * Checks the exact cache layout, byte-identical files, the no-op second pull (counted
 * requests), resume, verification, error messages, and a forecast run from the cache.
 * Nothing leaves 127.0.0.1.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kronos/hub.h"
#include "hub/sha256.h"
#include "test_support.h"

/* ---------------------------------------------------------------- the stand-in hub */

enum { F_CONFIG = 0, F_MODEL = 1, F_README = 2, N_FILES = 3 };
static const char *const k_names[N_FILES] = { "config.json", "model.safetensors", "README.md" };

typedef struct served_file {
    uint8_t *data; /* NULL: the repo has no such file */
    size_t len;
    char sha[65];
} served_file;

typedef struct served_repo {
    const char *id;
    const char *commit;
    int needs_token; /* answer 401 without "Authorization: Bearer secret-token" */
    served_file files[N_FILES];
} served_repo;

static served_repo g_repos[] = {
    { "NeoQuasar/Kronos-demo", "0123456789abcdef0123456789abcdef01234567", 0, { { 0 } } },
    { "NeoQuasar/Kronos-Tokenizer-demo", "89abcdef0123456789abcdef0123456789abcdef", 0, { { 0 } } },
    { "private/Kronos-demo", "fedcba9876543210fedcba9876543210fedcba98", 1, { { 0 } } },
};
enum { N_REPOS = sizeof g_repos / sizeof g_repos[0] };

typedef enum serve_mode {
    MODE_NORMAL,
    MODE_DROP_ONCE, /* the first CDN GET sends half the body, then closes the connection */
    MODE_CORRUPT, /* one byte of the LFS file flipped (sha256 no longer matches) */
    MODE_SHORT, /* the LFS file cut in half, as a complete 200 response */
    MODE_IGNORE_RANGE, /* Range headers ignored: always 200 with the whole file */
    MODE_HEAD_503_ONCE, /* the first HEAD is answered 503 (a busy hub), then normally */
    MODE_HEAD_503, /* every HEAD is answered 503 */
    MODE_206_NO_RANGE, /* a Range answered 206 without a Content-Range header */
    MODE_NO_SIZE /* config.json sent chunked: no Content-Length, so no size to check */
} serve_mode;

static struct {
    struct MHD_Daemon *daemon;
    unsigned port;
    pthread_mutex_t mu;
    serve_mode mode;
    int dropped; /* MODE_DROP_ONCE has dropped its connection */
    int model_gets; /* GET .../resolve/<rev>/model.safetensors */
    int cdn_gets; /* GET /cdn/... (the big file's bytes) */
    int range_gets; /* of those, with a Range header */
    long last_range; /* start of the last Range asked, -1 none */
    int head_503s; /* HEADs answered 503 */
    int home_auth; /* requests to 127.0.0.1 that carried an Authorization header */
    int foreign_requests; /* requests addressed to "localhost" (another origin) */
    int foreign_auth; /* of those, with an Authorization header: a leaked token */
    uint8_t *corrupt; /* MODE_CORRUPT body */
} g_srv;

static const char *g_tmp; /* kr_test_dir() */

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void load_file(served_file *f, const char *path) {
    f->data = read_all(path, &f->len);
    assert_non_null(f->data);
    kr_sha256 s;
    uint8_t d[32];
    kr_sha256_init(&s);
    kr_sha256_update(&s, f->data, f->len);
    kr_sha256_final(&s, d);
    kr_sha256_hex(d, f->sha);
}

static void add_header(struct MHD_Response *r, const char *name, const char *value) {
    MHD_add_response_header(r, name, value);
}

static enum MHD_Result send_simple(struct MHD_Connection *c, unsigned status,
                                   const char *error_code) {
    static const char body[] = "{\"error\":\"stand-in hub error\"}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (error_code) add_header(r, "X-Error-Code", error_code);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

typedef struct drop_reader {
    const uint8_t *data;
    size_t start, stop; /* serve data[start..stop), then break the connection */
} drop_reader;

static ssize_t drop_read(void *cls, uint64_t pos, char *buf, size_t max) {
    drop_reader *d = cls;
    size_t at = d->start + (size_t)pos;
    if (at >= d->stop) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = d->stop - at < max ? d->stop - at : max;
    memcpy(buf, d->data + at, n);
    return (ssize_t)n;
}

/* The LFS bytes, as a CDN would serve them (Range aware). */
static enum MHD_Result serve_cdn(struct MHD_Connection *c, const served_file *f) {
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    pthread_mutex_lock(&g_srv.mu);
    serve_mode mode = g_srv.mode;
    g_srv.cdn_gets++;
    long start = 0;
    if (range) {
        g_srv.range_gets++;
        if (sscanf(range, "bytes=%ld-", &start) != 1) start = -1;
        g_srv.last_range = start;
    }
    int drop = mode == MODE_DROP_ONCE && !g_srv.dropped;
    if (drop) g_srv.dropped = 1;
    pthread_mutex_unlock(&g_srv.mu);

    const uint8_t *data = mode == MODE_CORRUPT ? g_srv.corrupt : f->data;
    size_t len = mode == MODE_SHORT ? f->len / 2 : f->len;
    if (mode == MODE_IGNORE_RANGE || !range) start = 0;
    if (start < 0) return send_simple(c, 400, NULL);
    if ((size_t)start >= len) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        char cr[64];
        snprintf(cr, sizeof cr, "bytes */%zu", len);
        add_header(r, "Content-Range", cr);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
        MHD_destroy_response(r);
        return ret;
    }
    struct MHD_Response *r;
    if (drop) {
        drop_reader *d = malloc(sizeof *d);
        d->data = data;
        d->start = (size_t)start;
        d->stop = (size_t)start + (len - (size_t)start) / 2;
        r = MHD_create_response_from_callback(len - (size_t)start, 32 * 1024, drop_read, d, free);
    } else {
        r = MHD_create_response_from_buffer(len - (size_t)start, (void *)(data + start),
                                            MHD_RESPMEM_PERSISTENT);
    }
    unsigned status = MHD_HTTP_OK;
    if (range && mode != MODE_IGNORE_RANGE) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %ld-%zu/%zu", start, len - 1, len);
        if (mode != MODE_206_NO_RANGE) add_header(r, "Content-Range", cr);
        status = MHD_HTTP_PARTIAL_CONTENT;
    }
    add_header(r, "Accept-Ranges", "bytes");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A small file sent chunked (MODE_NO_SIZE): the size is known only once it has arrived. */
typedef struct no_size_reader {
    const served_file *f;
} no_size_reader;

static ssize_t no_size_read(void *cls, uint64_t pos, char *buf, size_t max) {
    const served_file *f = ((no_size_reader *)cls)->f;
    if (pos >= f->len) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = f->len - (size_t)pos < max ? f->len - (size_t)pos : max;
    memcpy(buf, f->data + pos, n);
    return (ssize_t)n;
}

/* /{org}/{name}/resolve/{rev}/{file}, answered like the hub: small files directly with a
 * git-style ETag, the LFS file with a 302 to the CDN carrying X-Linked-Etag/-Size. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)cls, (void)version, (void)upload, (void)upload_size, (void)con_cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) return send_simple(c, 405, NULL);
    int is_get = !strcmp(method, "GET");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    const char *auth_seen = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    int foreign = host && !strncmp(host, "localhost:", 10);
    pthread_mutex_lock(&g_srv.mu);
    g_srv.foreign_requests += foreign;
    g_srv.foreign_auth += foreign && auth_seen;
    g_srv.home_auth += !foreign && auth_seen;
    int head_503 = !is_get && (g_srv.mode == MODE_HEAD_503 ||
                               (g_srv.mode == MODE_HEAD_503_ONCE && g_srv.head_503s == 0));
    g_srv.head_503s += head_503;
    pthread_mutex_unlock(&g_srv.mu);
    if (head_503) return send_simple(c, 503, NULL);
    unsigned idx;
    char sha[80];
    if (sscanf(url, "/cdn/%u/%79s", &idx, sha) == 2) {
        if (idx >= N_REPOS) return send_simple(c, 404, NULL);
        return serve_cdn(c, &g_repos[idx].files[F_MODEL]);
    }
    char org[64], name[64], rev[128], file[128];
    if (sscanf(url, "/%63[^/]/%63[^/]/resolve/%127[^/]/%127s", org, name, rev, file) != 4)
        return send_simple(c, 404, NULL);
    char id[140], v[256];
    /* "moved/...": a renamed repository, a redirect without hub metadata to another origin
     * (the same server as "localhost"), where the token must not follow. */
    if (!strcmp(org, "moved")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        snprintf(v, sizeof v, "http://localhost:%u/NeoQuasar/%s/resolve/%s/%s", g_srv.port, name,
                 rev, file);
        add_header(r, "Location", v);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_FOUND, r);
        MHD_destroy_response(r);
        return ret;
    }
    /* "plain/...": a git mirror that does not resolve LFS: model.safetensors is the pointer
     * file, served as an ordinary file with a git ETag (so only its size can be checked). */
    if (!strcmp(org, "plain") && !strcmp(file, "model.safetensors")) {
        const served_file *lfs = &g_repos[0].files[F_MODEL];
        static char pointer[256];
        int plen = snprintf(pointer, sizeof pointer,
                            "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize "
                            "%zu\n",
                            lfs->sha, lfs->len);
        struct MHD_Response *r =
            MHD_create_response_from_buffer((size_t)plen, pointer, MHD_RESPMEM_PERSISTENT);
        add_header(r, "ETag", "\"0123456789012345678901234567890123456789\"");
        add_header(r, "X-Repo-Commit", g_repos[0].commit);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    snprintf(id, sizeof id, "%s/%s", !strcmp(org, "plain") ? "NeoQuasar" : org, name);
    served_repo *repo = NULL;
    for (int i = 0; i < N_REPOS; i++)
        if (!strcmp(g_repos[i].id, id)) {
            repo = &g_repos[i];
            idx = (unsigned)i;
        }
    if (!repo) return send_simple(c, 404, "RepoNotFound");
    if (repo->needs_token) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (!auth || strcmp(auth, "Bearer secret-token") != 0) return send_simple(c, 401, NULL);
    }
    if (strcmp(rev, "main") != 0 && strcmp(rev, repo->commit) != 0)
        return send_simple(c, 404, "RevisionNotFound");
    int fi = -1;
    for (int i = 0; i < N_FILES; i++)
        if (!strcmp(file, k_names[i]) && repo->files[i].data) fi = i;
    if (fi < 0) return send_simple(c, 404, "EntryNotFound");
    const served_file *f = &repo->files[fi];
    struct MHD_Response *r;
    unsigned status;
    if (fi == F_MODEL) {
        if (is_get) {
            pthread_mutex_lock(&g_srv.mu);
            g_srv.model_gets++;
            pthread_mutex_unlock(&g_srv.mu);
        }
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        snprintf(v, sizeof v, "http://127.0.0.1:%u/cdn/%u/%s", g_srv.port, idx, f->sha);
        add_header(r, "Location", v);
        snprintf(v, sizeof v, "\"%s\"", f->sha);
        add_header(r, "X-Linked-Etag", v);
        snprintf(v, sizeof v, "%zu", f->len);
        add_header(r, "X-Linked-Size", v);
        status = MHD_HTTP_FOUND;
    } else if (g_srv.mode == MODE_NO_SIZE) {
        no_size_reader *nr = malloc(sizeof *nr);
        nr->f = f;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, no_size_read, nr, free);
        snprintf(v, sizeof v, "\"%.40s\"", f->sha);
        add_header(r, "ETag", v);
        status = MHD_HTTP_OK;
    } else {
        r = MHD_create_response_from_buffer(f->len, f->data, MHD_RESPMEM_PERSISTENT);
        /* A git blob id stand-in: 40 hex, like the hub's ETag for non-LFS files. */
        snprintf(v, sizeof v, "\"%.40s\"", f->sha);
        add_header(r, "ETag", v);
        status = MHD_HTTP_OK;
    }
    add_header(r, "X-Repo-Commit", repo->commit);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static void reset_server(serve_mode mode) {
    pthread_mutex_lock(&g_srv.mu);
    g_srv.mode = mode;
    g_srv.dropped = 0;
    g_srv.model_gets = g_srv.cdn_gets = g_srv.range_gets = 0;
    g_srv.last_range = -1;
    g_srv.head_503s = g_srv.home_auth = g_srv.foreign_requests = g_srv.foreign_auth = 0;
    pthread_mutex_unlock(&g_srv.mu);
}

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    if (!g_tmp) return -1;
    const char *pred = KR_SOURCE_DIR "/models/kronos-demo/predictor",
               *tok = KR_SOURCE_DIR "/models/kronos-demo/tokenizer";
    const char *dirs[N_REPOS] = { pred, tok, pred };
    char path[PATH_MAX];
    for (int i = 0; i < N_REPOS; i++) {
        for (int f = F_CONFIG; f <= F_MODEL; f++) {
            snprintf(path, sizeof path, "%s/%s", dirs[i], k_names[f]);
            load_file(&g_repos[i].files[f], path);
        }
    }
    /* The tokenizer repo has a model card, the others not (README.md is optional). */
    load_file(&g_repos[1].files[F_README], KR_SOURCE_DIR "/models/kronos-demo/README.md");
    served_file *m = &g_repos[0].files[F_MODEL];
    g_srv.corrupt = malloc(m->len);
    memcpy(g_srv.corrupt, m->data, m->len);
    g_srv.corrupt[m->len / 3] ^= 0x5a;
    pthread_mutex_init(&g_srv.mu, NULL);
    reset_server(MODE_NORMAL);

    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_srv.daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, NULL,
                                    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
    if (!g_srv.daemon) return -1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_srv.daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (!di || !di->port) return -1;
    g_srv.port = di->port;

    /* Only the stand-in is reachable: no proxy may carry these requests elsewhere, and no
     * token or cache location of the machine may leak in. */
    static const char *const unset[] = { "HF_TOKEN",     "HUGGING_FACE_HUB_TOKEN",
                                         "HF_HUB_CACHE", "XDG_CACHE_HOME",
                                         "http_proxy",   "https_proxy",
                                         "HTTP_PROXY",   "HTTPS_PROXY",
                                         "all_proxy",    "ALL_PROXY" };
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++) unsetenv(unset[i]);
    setenv("NO_PROXY", "127.0.0.1", 1);
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%u", g_srv.port);
    setenv("HF_ENDPOINT", ep, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_srv.daemon) MHD_stop_daemon(g_srv.daemon);
    /* Several copies of the demo model were written: do not leave them in /tmp. */
    for (int i = 0; i < N_REPOS; i++)
        for (int f = 0; f < N_FILES; f++) free(g_repos[i].files[f].data);
    free(g_srv.corrupt);
    return 0;
}

/* ---------------------------------------------------------------- helpers */

/* A fresh HF_HOME under the test's temp dir; returns the hub cache dir ($HF_HOME/hub). */
static const char *fresh_home(const char *name) {
    static char hub[PATH_MAX];
    char home[PATH_MAX];
    snprintf(home, sizeof home, "%s/%s", g_tmp, name);
    assert_int_equal(mkdir(home, 0755), 0);
    setenv("HF_HOME", home, 1);
    snprintf(hub, sizeof hub, "%s/hub", home);
    return hub;
}

typedef struct events {
    int n[8]; /* per kr_hub_event */
    int64_t model_start; /* done at model.safetensors' START: the bytes resumed from */
    int64_t config_total; /* total at config.json's DONE */
} events;

static int record(const kr_hub_progress *p, void *user) {
    events *e = user;
    if (p->event == KR_HUB_FILE_START && !strcmp(p->file, "model.safetensors"))
        e->model_start = p->done;
    if (p->event == KR_HUB_FILE_DONE && !strcmp(p->file, "config.json")) e->config_total = p->total;
    e->n[p->event]++;
    assert_non_null(p->repo);
    assert_non_null(p->file);
    if (p->total >= 0) assert_true(p->done <= p->total);
    return 0;
}

static kr_status pull(const char *repo, events *ev, char *snap, kr_error *err) {
    kr_hub_params p = kr_hub_default_params();
    p.progress = record;
    p.progress_user = ev;
    memset(ev, 0, sizeof *ev);
    memset(err, 0, sizeof *err);
    return kr_hub_pull(&p, repo, NULL, snap, PATH_MAX, err);
}

static void assert_same_bytes(const char *path, const served_file *f) {
    size_t len;
    uint8_t *got = read_all(path, &len);
    if (!got) fail_msg("cannot read %s", path);
    assert_int_equal(len, f->len);
    assert_memory_equal(got, f->data, len);
    free(got);
}

static int count_entries(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' &&
            (!suffix || (strlen(e->d_name) >= strlen(suffix) &&
                         !strcmp(e->d_name + strlen(e->d_name) - strlen(suffix), suffix))))
            n++;
    closedir(d);
    return n;
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* ---------------------------------------------------------------- tests */

static void test_sha256_vectors(void **state) {
    (void)state;
    static const struct {
        const char *msg, *hex;
    } v[] = {
        { "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
        { "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
        { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
    };
    char hex[65];
    uint8_t d[32];
    kr_sha256 s;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        kr_sha256_init(&s);
        kr_sha256_update(&s, v[i].msg, strlen(v[i].msg));
        kr_sha256_final(&s, d);
        kr_sha256_hex(d, hex);
        assert_string_equal(hex, v[i].hex);
    }
    /* A million 'a' in odd-sized pieces: the partial-block path. */
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    kr_sha256_init(&s);
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof chunk ? left : sizeof chunk;
        kr_sha256_update(&s, chunk, n);
        left -= n;
    }
    kr_sha256_final(&s, d);
    kr_sha256_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* The file helper agrees with the streaming one on the model the server hands out. */
    kr_error err = { 0 };
    assert_int_equal(
        kr_sha256_file(KR_SOURCE_DIR "/models/kronos-demo/predictor/model.safetensors", hex, &err),
        KR_OK);
    assert_string_equal(hex, g_repos[0].files[F_MODEL].sha);
    assert_int_equal(kr_sha256_file("/nonexistent/file", hex, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/file"));
}

static void test_repo_id_shape(void **state) {
    (void)state;
    assert_true(kr_hub_is_repo_id("NeoQuasar/Kronos-small"));
    assert_true(kr_hub_is_repo_id("NeoQuasar/Kronos-Tokenizer-base"));
    assert_true(kr_hub_is_repo_id("a_b/c.d"));
    assert_false(kr_hub_is_repo_id("Kronos-small"));
    assert_false(kr_hub_is_repo_id("a/b/c"));
    assert_false(kr_hub_is_repo_id("../etc"));
    assert_false(kr_hub_is_repo_id("./x"));
    assert_false(kr_hub_is_repo_id("/abs/path"));
    assert_false(kr_hub_is_repo_id("a/b..c"));
    assert_false(kr_hub_is_repo_id("a/b--c"));
    assert_false(kr_hub_is_repo_id("a/"));
    assert_false(kr_hub_is_repo_id(NULL));
}

static void test_pull_layout_and_noop(void **state) {
    (void)state;
    const char *hub = fresh_home("layout");
    reset_server(MODE_NORMAL);
    const served_repo *r = &g_repos[0];
    char snap[PATH_MAX], want[PATH_MAX], path[PATH_MAX], link[PATH_MAX];
    events ev;
    kr_error err;
    kr_status st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull: %s", err.message);

    char repo_dir[PATH_MAX];
    snprintf(repo_dir, sizeof repo_dir, "%s/models--NeoQuasar--Kronos-demo", hub);
    snprintf(want, sizeof want, "%s/snapshots/%s", repo_dir, r->commit);
    assert_string_equal(snap, want);
    /* refs/main holds the bare commit hash. */
    snprintf(path, sizeof path, "%s/refs/main", repo_dir);
    size_t len;
    char *ref = (char *)read_all(path, &len);
    assert_non_null(ref);
    ref[len] = '\0';
    assert_string_equal(ref, r->commit);
    free(ref);
    /* blobs: exactly the two contents, named by ETag (git id) and by sha256, no leftovers. */
    snprintf(path, sizeof path, "%s/blobs", repo_dir);
    assert_int_equal(count_entries(path, NULL), 2);
    char config_etag[41];
    snprintf(config_etag, sizeof config_etag, "%.40s", r->files[F_CONFIG].sha);
    snprintf(path, sizeof path, "%s/blobs/%s", repo_dir, config_etag);
    assert_same_bytes(path, &r->files[F_CONFIG]);
    snprintf(path, sizeof path, "%s/blobs/%s", repo_dir, r->files[F_MODEL].sha);
    assert_same_bytes(path, &r->files[F_MODEL]);
    /* snapshots: relative symlinks into blobs, which read as the served files. */
    snprintf(path, sizeof path, "%s/config.json", snap);
    ssize_t n = readlink(path, link, sizeof link - 1);
    assert_true(n > 0);
    link[n] = '\0';
    snprintf(want, sizeof want, "../../blobs/%s", config_etag);
    assert_string_equal(link, want);
    assert_same_bytes(path, &r->files[F_CONFIG]);
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    n = readlink(path, link, sizeof link - 1);
    assert_true(n > 0);
    link[n] = '\0';
    snprintf(want, sizeof want, "../../blobs/%s", r->files[F_MODEL].sha);
    assert_string_equal(link, want);
    assert_same_bytes(path, &r->files[F_MODEL]);
    snprintf(path, sizeof path, "%s/README.md", snap);
    assert_false(exists(path));
    assert_int_equal(count_entries(snap, NULL), 2);
    /* Lock files live outside the repo folder, as huggingface_hub keeps them. */
    snprintf(path, sizeof path, "%s/.locks/models--NeoQuasar--Kronos-demo", hub);
    assert_true(exists(path));
    assert_int_equal(ev.n[KR_HUB_FILE_DONE], 2);
    assert_int_equal(ev.n[KR_HUB_FILE_ABSENT], 1);
    assert_true(ev.n[KR_HUB_FILE_PROGRESS] > 0);
    assert_int_equal(g_srv.model_gets, 1);
    assert_int_equal(g_srv.cdn_gets, 1);
    assert_int_equal(g_srv.range_gets, 0);

    /* Second pull: nothing downloaded, same snapshot. */
    char snap2[PATH_MAX];
    st = pull("NeoQuasar/Kronos-demo", &ev, snap2, &err);
    if (st != KR_OK) fail_msg("second pull: %s", err.message);
    assert_string_equal(snap2, snap);
    assert_int_equal(g_srv.model_gets, 1);
    assert_int_equal(g_srv.cdn_gets, 1);
    assert_int_equal(ev.n[KR_HUB_FILE_CACHED], 2);
    assert_int_equal(ev.n[KR_HUB_FILE_DONE], 0);
    assert_int_equal(ev.n[KR_HUB_FILE_START], 0);

    /* Offline lookup: by branch, by commit; a repo never pulled is absent. */
    char found[PATH_MAX];
    assert_int_equal(
        kr_hub_resolve_cached("NeoQuasar/Kronos-demo", NULL, found, sizeof found, &err), KR_OK);
    assert_string_equal(found, snap);
    assert_int_equal(
        kr_hub_resolve_cached("NeoQuasar/Kronos-demo", r->commit, found, sizeof found, &err),
        KR_OK);
    assert_string_equal(found, snap);
    assert_int_equal(
        kr_hub_resolve_cached("NeoQuasar/Kronos-demo", "v2", found, sizeof found, &err), KR_ERR_IO);
    assert_int_equal(
        kr_hub_resolve_cached("NeoQuasar/Kronos-Tokenizer-demo", NULL, found, sizeof found, &err),
        KR_ERR_IO);
    assert_non_null(strstr(err.message, "NeoQuasar/Kronos-Tokenizer-demo"));
    assert_non_null(strstr(err.message, "not in the hub cache"));

    /* A present README.md is fetched too; an explicit cache dir overrides the environment. */
    char explicit_dir[PATH_MAX];
    snprintf(explicit_dir, sizeof explicit_dir, "%s/explicit-cache", g_tmp);
    kr_hub_params p = kr_hub_default_params();
    p.cache_dir = explicit_dir;
    st = kr_hub_pull(&p, "NeoQuasar/Kronos-Tokenizer-demo", "main", snap, sizeof snap, &err);
    if (st != KR_OK) fail_msg("tokenizer pull: %s", err.message);
    snprintf(want, sizeof want, "%s/models--NeoQuasar--Kronos-Tokenizer-demo/snapshots/%s",
             explicit_dir, g_repos[1].commit);
    assert_string_equal(snap, want);
    snprintf(path, sizeof path, "%s/README.md", snap);
    assert_same_bytes(path, &g_repos[1].files[F_README]);
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    assert_same_bytes(path, &g_repos[1].files[F_MODEL]);
    assert_int_equal(kr_hub_resolve_cached_in(explicit_dir, "NeoQuasar/Kronos-Tokenizer-demo",
                                              "main", found, sizeof found, &err),
                     KR_OK);
    assert_string_equal(found, snap);

    /* A FIFO in the cache (a ref, a blob) is refused, never waited on: the lookup of a model
     * by hub name must not hang. alarm() turns a hang into a failure. */
    alarm(30);
    snprintf(path, sizeof path, "%s/models--NeoQuasar--Kronos-Tokenizer-demo/refs/fifo",
             explicit_dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(kr_hub_resolve_cached_in(explicit_dir, "NeoQuasar/Kronos-Tokenizer-demo",
                                              "fifo", found, sizeof found, &err),
                     KR_ERR_IO);
    assert_non_null(strstr(err.message, "not in the hub cache"));
    snprintf(path, sizeof path, "%s/fifo.blob", g_tmp);
    assert_int_equal(mkfifo(path, 0600), 0);
    char hex[65];
    assert_int_equal(kr_sha256_file(path, hex, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "not a regular file (a FIFO)"));
    alarm(0);
}

static void test_resume_after_dropped_connection(void **state) {
    (void)state;
    fresh_home("drop");
    reset_server(MODE_DROP_ONCE);
    const served_file *m = &g_repos[0].files[F_MODEL];
    char snap[PATH_MAX], path[PATH_MAX];
    events ev;
    kr_error err;
    kr_status st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull: %s", err.message);
    /* The first GET broke half-way; the retry asked for the rest only. */
    assert_int_equal(g_srv.cdn_gets, 2);
    assert_int_equal(g_srv.range_gets, 1);
    assert_true(g_srv.last_range > 0 && g_srv.last_range <= (long)m->len / 2);
    assert_int_equal(ev.n[KR_HUB_FILE_RETRY], 1);
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    assert_same_bytes(path, m);
    reset_server(MODE_NORMAL);
}

static void test_resume_from_incomplete_file(void **state) {
    (void)state;
    const served_file *m = &g_repos[0].files[F_MODEL];
    char snap[PATH_MAX], path[PATH_MAX], blobs[PATH_MAX];
    events ev;
    kr_error err;

    /* An earlier run left the first third: the server sees a Range from there. */
    const char *hub = fresh_home("partial");
    reset_server(MODE_NORMAL);
    snprintf(blobs, sizeof blobs, "%s/models--NeoQuasar--Kronos-demo/blobs", hub);
    snprintf(path, sizeof path, "%s/models--NeoQuasar--Kronos-demo", hub);
    assert_int_equal(mkdir(hub, 0755), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mkdir(blobs, 0755), 0);
    char part[PATH_MAX];
    snprintf(part, sizeof part, "%s/%s.incomplete", blobs, m->sha);
    size_t third = m->len / 3;
    assert_int_equal(kr_test_write_file(part, m->data, third), 0);
    kr_status st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull: %s", err.message);
    assert_int_equal(g_srv.cdn_gets, 1);
    assert_int_equal(g_srv.range_gets, 1);
    assert_int_equal(g_srv.last_range, (long)third);
    assert_int_equal(ev.model_start, (int64_t)third);
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    assert_same_bytes(path, m);
    assert_false(exists(part));
    assert_int_equal(count_entries(blobs, ".incomplete"), 0);

    /* A server that ignores Range answers 200 with the whole file: the partial (garbage here)
     * is replaced, not appended to. */
    hub = fresh_home("partial-200");
    reset_server(MODE_IGNORE_RANGE);
    snprintf(path, sizeof path, "%s/models--NeoQuasar--Kronos-demo", hub);
    snprintf(blobs, sizeof blobs, "%s/blobs", path);
    assert_int_equal(mkdir(hub, 0755), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mkdir(blobs, 0755), 0);
    snprintf(part, sizeof part, "%s/%s.incomplete", blobs, m->sha);
    uint8_t *junk = calloc(1, third);
    assert_int_equal(kr_test_write_file(part, junk, third), 0);
    st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull (Range ignored): %s", err.message);
    assert_int_equal(g_srv.range_gets, 1);
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    assert_same_bytes(path, m);

    /* A partial that is no prefix of the file, resumed by a Range-honouring server: the sha256
     * check catches it, deletes it, and the next pull starts clean. */
    hub = fresh_home("partial-bad");
    reset_server(MODE_NORMAL);
    snprintf(path, sizeof path, "%s/models--NeoQuasar--Kronos-demo", hub);
    snprintf(blobs, sizeof blobs, "%s/blobs", path);
    assert_int_equal(mkdir(hub, 0755), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mkdir(blobs, 0755), 0);
    snprintf(part, sizeof part, "%s/%s.incomplete", blobs, m->sha);
    assert_int_equal(kr_test_write_file(part, junk, third), 0);
    /* A partial download that is a symlink to a file elsewhere (planted in a shared cache) is
     * refused: it used to be truncated and overwritten through the link. */
    char victim[PATH_MAX];
    snprintf(victim, sizeof victim, "%s/victim", g_tmp);
    assert_int_equal(kr_test_write_file(victim, junk, third), 0);
    assert_int_equal(unlink(part), 0);
    assert_int_equal(symlink(victim, part), 0);
    st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_non_null(strstr(err.message, part));
    size_t victim_len;
    uint8_t *victim_now = read_all(victim, &victim_len);
    assert_non_null(victim_now);
    assert_int_equal(victim_len, third);
    assert_memory_equal(victim_now, junk, third);
    free(victim_now);
    assert_int_equal(unlink(part), 0);
    assert_int_equal(kr_test_write_file(part, junk, third), 0);
    free(junk);
    st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "sha256 mismatch"));
    assert_false(exists(part));
    snprintf(path, sizeof path, "%s/%s", blobs, m->sha);
    assert_false(exists(path));
    st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull after a bad partial: %s", err.message);
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    assert_same_bytes(path, m);
}

static void test_corrupt_and_short_responses(void **state) {
    (void)state;
    const served_file *m = &g_repos[0].files[F_MODEL];
    char snap[PATH_MAX], path[PATH_MAX], blobs[PATH_MAX];
    events ev;
    kr_error err;

    const char *hub = fresh_home("corrupt");
    reset_server(MODE_CORRUPT);
    kr_status st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "sha256 mismatch"));
    assert_non_null(strstr(err.message, "model.safetensors"));
    snprintf(blobs, sizeof blobs, "%s/models--NeoQuasar--Kronos-demo/blobs", hub);
    snprintf(path, sizeof path, "%s/%s", blobs, m->sha);
    assert_false(exists(path));
    assert_int_equal(count_entries(blobs, ".incomplete"), 0);
    assert_int_equal(count_entries(blobs, NULL), 1); /* config.json only */
    /* No ref: the snapshot is not complete, so nothing may resolve to it. */
    snprintf(path, sizeof path, "%s/models--NeoQuasar--Kronos-demo/refs/main", hub);
    assert_false(exists(path));
    char found[PATH_MAX];
    assert_int_equal(
        kr_hub_resolve_cached("NeoQuasar/Kronos-demo", NULL, found, sizeof found, &err), KR_ERR_IO);
    /* A healthy server afterwards: the pull completes. */
    reset_server(MODE_NORMAL);
    st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull after corruption: %s", err.message);

    hub = fresh_home("short");
    reset_server(MODE_SHORT);
    st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "bytes"));
    assert_non_null(strstr(err.message, "model.safetensors"));
    snprintf(blobs, sizeof blobs, "%s/models--NeoQuasar--Kronos-demo/blobs", hub);
    snprintf(path, sizeof path, "%s/%s", blobs, m->sha);
    assert_false(exists(path));
    assert_int_equal(count_entries(blobs, ".incomplete"), 0);
    reset_server(MODE_NORMAL);
}

static void test_errors(void **state) {
    (void)state;
    fresh_home("errors");
    reset_server(MODE_NORMAL);
    char snap[PATH_MAX];
    events ev;
    kr_error err;

    kr_status st = pull("NeoQuasar/Kronos-nope", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "repository or file not found"));
    assert_non_null(strstr(err.message, "/NeoQuasar/Kronos-nope/resolve/main/config.json"));

    kr_hub_params p = kr_hub_default_params();
    st = kr_hub_pull(&p, "NeoQuasar/Kronos-demo", "no-such-branch", snap, sizeof snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "repository or file not found"));
    assert_non_null(strstr(err.message, "/resolve/no-such-branch/"));

    /* A private repository: 401 without a token, fine with the right one. */
    st = pull("private/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "needs HF_TOKEN"));
    assert_non_null(strstr(err.message, "/private/Kronos-demo/resolve/main/config.json"));
    setenv("HF_TOKEN", "wrong-token", 1);
    st = pull("private/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "was refused"));
    setenv("HF_TOKEN", "secret-token", 1);
    st = pull("private/Kronos-demo", &ev, snap, &err);
    unsetenv("HF_TOKEN");
    if (st != KR_OK) fail_msg("pull with token: %s", err.message);
    p.token = "secret-token";
    assert_int_equal(kr_hub_pull(&p, "private/Kronos-demo", NULL, snap, sizeof snap, &err), KR_OK);
    p.token = NULL;
    /* The token a `huggingface-cli login` saved in $HF_HOME/token counts too. */
    const char *hub = fresh_home("errors-login");
    char token_path[PATH_MAX];
    snprintf(token_path, sizeof token_path, "%.*s/token", (int)(strlen(hub) - 4), hub);
    assert_int_equal(kr_test_write_file(token_path, "secret-token\n", 13), 0);
    st = kr_hub_pull(&p, "private/Kronos-demo", NULL, snap, sizeof snap, &err);
    if (st != KR_OK) fail_msg("pull with a saved token: %s", err.message);

    /* Nothing listens on port 1: curl's message, with the URL. */
    p.endpoint = "http://127.0.0.1:1/";
    st = kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(
        strstr(err.message, "http://127.0.0.1:1/NeoQuasar/Kronos-demo/resolve/main/config.json"));
    p.endpoint = NULL;

    /* Malformed names never reach the network or the disk. */
    assert_int_equal(kr_hub_pull(&p, "../etc", NULL, snap, sizeof snap, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_hub_pull(&p, "a/b/c", NULL, snap, sizeof snap, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_hub_pull(&p, "NeoQuasar/Kronos-demo", "../../x", snap, sizeof snap, &err),
                     KR_ERR_INVALID_ARG);

    /* A cache that cannot be created: a disk error naming the place. */
    p.cache_dir = "/dev/null/cache";
    st = kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "/dev/null"));
}

/* The token goes to the endpoint's origin only. A redirect without hub metadata (a renamed
 * repository) is followed by the HEAD itself, not by curl: it used to send the token to
 * whatever host the Location named. */
static void test_token_stays_on_the_endpoint(void **state) {
    (void)state;
    fresh_home("token-origin");
    reset_server(MODE_NORMAL);
    char snap[PATH_MAX];
    kr_error err = { 0 };
    kr_hub_params p = kr_hub_default_params();
    p.token = "secret-token";
    kr_status st = kr_hub_pull(&p, "moved/Kronos-demo", NULL, snap, sizeof snap, &err);
    if (st != KR_OK) fail_msg("pull through a redirect: %s", err.message);
    assert_true(g_srv.foreign_requests > 0); /* the redirects were followed */
    assert_true(g_srv.home_auth > 0); /* the endpoint itself got the token */
    assert_int_equal(g_srv.foreign_auth, 0);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/model.safetensors", snap);
    assert_same_bytes(path, &g_repos[0].files[F_MODEL]);

    /* A token that would end the header line is refused, and not shown. */
    p.token = "secret-token\r\nX-Injected: 1";
    st = kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err);
    assert_int_equal(st, KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "control character"));
    assert_null(strstr(err.message, "secret"));
}

/* user:password@ in HF_ENDPOINT (a private mirror) is sent, but never shown in a message. */
static void test_endpoint_credentials_not_in_messages(void **state) {
    (void)state;
    fresh_home("endpoint-credentials");
    char ep[128], snap[PATH_MAX];
    snprintf(ep, sizeof ep, "http://mirror-user:hunter2@127.0.0.1:%u/", g_srv.port);
    kr_hub_params p = kr_hub_default_params();
    p.endpoint = ep;
    kr_error err = { 0 };
    reset_server(MODE_NORMAL);
    assert_int_equal(kr_hub_pull(&p, "NeoQuasar/Kronos-nope", NULL, snap, sizeof snap, &err),
                     KR_ERR_IO);
    assert_non_null(strstr(err.message, "repository or file not found: http://127.0.0.1:"));
    assert_null(strstr(err.message, "hunter2"));
    reset_server(MODE_SHORT);
    assert_int_equal(kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err),
                     KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "GET http://127.0.0.1:"));
    assert_null(strstr(err.message, "hunter2"));
    reset_server(MODE_CORRUPT);
    assert_int_equal(kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err),
                     KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "sha256 mismatch"));
    assert_null(strstr(err.message, "hunter2"));
    reset_server(MODE_NORMAL);
}

typedef struct thread_pull {
    const char *cache;
    kr_status st;
    kr_error err;
    char snap[PATH_MAX];
} thread_pull;

static void *pull_thread(void *arg) {
    thread_pull *t = arg;
    kr_hub_params p = kr_hub_default_params();
    p.cache_dir = t->cache;
    t->st = kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, t->snap, sizeof t->snap, &t->err);
    return NULL;
}

/* Several threads of one process pulling one repository into one cache (hub.h allows it):
 * the temporary names of the snapshot links and the ref were unique per process only, so the
 * threads renamed each other's links away ("cannot rename ...: No such file or directory"). */
static void test_threads_pull_one_repo(void **state) {
    (void)state;
    reset_server(MODE_NORMAL);
    enum { N_THREADS = 8, ROUNDS = 4 };
    for (int round = 0; round < ROUNDS; round++) {
        char cache[PATH_MAX];
        snprintf(cache, sizeof cache, "%s/threads-%d", g_tmp, round);
        thread_pull t[N_THREADS];
        pthread_t th[N_THREADS];
        for (int i = 0; i < N_THREADS; i++) {
            memset(&t[i], 0, sizeof t[i]);
            t[i].cache = cache;
            assert_int_equal(pthread_create(&th[i], NULL, pull_thread, &t[i]), 0);
        }
        for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < N_THREADS; i++) {
            if (t[i].st != KR_OK) fail_msg("thread %d of round %d: %s", i, round, t[i].err.message);
            assert_string_equal(t[i].snap, t[0].snap);
        }
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/model.safetensors", t[0].snap);
        assert_same_bytes(path, &g_repos[0].files[F_MODEL]);
        assert_int_equal(count_entries(t[0].snap, NULL), 2); /* no temporary links left */
    }
}

static int cancel_when_waiting(const kr_hub_progress *p, void *user) {
    events *e = user;
    e->n[p->event]++;
    return p->event == KR_HUB_FILE_WAITING; /* stop instead of blocking the test */
}

/* A file another pull holds the lock of is announced (KR_HUB_FILE_WAITING: `kronos pull`
 * says "another kronos pull is downloading it") before the pull blocks, and the callback can
 * cancel the wait; without the other pull no event of the kind is sent. */
static void test_waiting_for_another_pull(void **state) {
    (void)state;
    reset_server(MODE_NORMAL);
    const char *hub = fresh_home("waiting");
    char dir[PATH_MAX], lock[PATH_MAX + 80];
    snprintf(dir, sizeof dir, "%s/.locks/models--NeoQuasar--Kronos-demo", hub);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(lock, sizeof lock, "%s/%s.lock", dir, g_repos[0].files[F_MODEL].sha);
    int fd = open(lock, O_CREAT | O_RDWR, 0644);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0); /* the other pull, fetching model.safetensors */
    events ev = { 0 };
    kr_hub_params p = kr_hub_default_params();
    p.progress = cancel_when_waiting;
    p.progress_user = &ev;
    char snap[PATH_MAX];
    kr_error err = { 0 };
    assert_int_equal(kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err),
                     KR_ERR_CANCELLED);
    assert_int_equal(ev.n[KR_HUB_FILE_WAITING], 1);
    assert_non_null(strstr(err.message, "model.safetensors: cancelled while waiting"));
    close(fd); /* the other pull ends */
    memset(&ev, 0, sizeof ev);
    assert_int_equal(kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err),
                     KR_OK);
    assert_int_equal(ev.n[KR_HUB_FILE_WAITING], 0);
    assert_int_equal(ev.n[KR_HUB_FILE_DONE], 1); /* the weights; config.json came first time */
    assert_int_equal(ev.n[KR_HUB_FILE_CACHED], 1);
}

/* A 503 on a HEAD is retried as a GET's is; one that persists ends the pull naming it. */
static void test_head_retried_when_the_hub_is_busy(void **state) {
    (void)state;
    fresh_home("head-503");
    char snap[PATH_MAX];
    events ev;
    kr_error err;
    reset_server(MODE_HEAD_503_ONCE);
    kr_status st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    if (st != KR_OK) fail_msg("pull after one 503: %s", err.message);
    assert_int_equal(g_srv.head_503s, 1);

    fresh_home("head-503-always");
    reset_server(MODE_HEAD_503);
    kr_hub_params p = kr_hub_default_params();
    p.max_attempts = 2;
    st = kr_hub_pull(&p, "NeoQuasar/Kronos-demo", NULL, snap, sizeof snap, &err);
    assert_int_equal(st, KR_ERR_IO);
    assert_non_null(strstr(err.message, "HTTP 503 from"));
    assert_non_null(strstr(err.message, "/resolve/main/config.json"));
    assert_int_equal(g_srv.head_503s, 2);
    reset_server(MODE_NORMAL);
}

/* A 206 without a Content-Range cannot be placed in the file: refused with a message that says
 * so (it said "the server sent from -1"). */
static void test_206_without_content_range(void **state) {
    (void)state;
    const served_file *m = &g_repos[0].files[F_MODEL];
    const char *hub = fresh_home("206-no-range");
    char path[PATH_MAX], blobs[PATH_MAX], part[PATH_MAX], snap[PATH_MAX];
    snprintf(path, sizeof path, "%s/models--NeoQuasar--Kronos-demo", hub);
    snprintf(blobs, sizeof blobs, "%s/blobs", path);
    assert_int_equal(mkdir(hub, 0755), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mkdir(blobs, 0755), 0);
    snprintf(part, sizeof part, "%s/%s.incomplete", blobs, m->sha);
    assert_int_equal(kr_test_write_file(part, m->data, m->len / 3), 0);
    reset_server(MODE_206_NO_RANGE);
    events ev;
    kr_error err;
    kr_status st = pull("NeoQuasar/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "no usable Content-Range"));
    assert_null(strstr(err.message, "-1"));
    snprintf(path, sizeof path, "%s/%s", blobs, m->sha);
    assert_false(exists(path));
    reset_server(MODE_NORMAL);
}

/* A mirror that serves the Git LFS pointer instead of the weights: its size matches what the
 * mirror announced, so it used to become model.safetensors ("size ok"); refused now. */
static void test_lfs_pointer_refused(void **state) {
    (void)state;
    const char *hub = fresh_home("lfs-pointer");
    reset_server(MODE_NORMAL);
    char snap[PATH_MAX], path[PATH_MAX];
    events ev;
    kr_error err;
    kr_status st = pull("plain/Kronos-demo", &ev, snap, &err);
    assert_int_equal(st, KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "Git LFS pointer"));
    assert_non_null(strstr(err.message, "/plain/Kronos-demo/resolve/"));
    snprintf(path, sizeof path, "%s/models--plain--Kronos-demo/blobs", hub);
    assert_int_equal(count_entries(path, NULL), 1); /* config.json's blob only */
    snprintf(path, sizeof path, "%s/models--plain--Kronos-demo/refs/main", hub);
    assert_false(exists(path));
}

/* ---------------------------------------------------------------- the CLI */

typedef kr_test_run run_result;

/* Runs `kronos ARGS` (environment inherited: HF_HOME, HF_ENDPOINT) with output captured. */
static const run_result *kronos(const char *args) { return kr_test_kronos(g_tmp, "", args); }

static void test_cli_pull_and_forecast_from_cache(void **state) {
    (void)state;
    const char *hub = fresh_home("cli");
    reset_server(MODE_NORMAL);
    const run_result *r = kronos("pull NeoQuasar/Kronos-demo");
    if (r->code != 0) fail_msg("pull: exit %d: %s", r->code, r->err);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/models--NeoQuasar--Kronos-demo/snapshots/%s\n", hub,
             g_repos[0].commit);
    assert_string_equal(r->out, want);
    assert_non_null(strstr(r->err, "model.safetensors: downloading 5.2 MB"));
    assert_non_null(strstr(r->err, "sha256 ok"));
    assert_non_null(strstr(r->err, "README.md: not in the repository"));

    r = kronos("pull --quiet NeoQuasar/Kronos-Tokenizer-demo");
    if (r->code != 0) fail_msg("pull tokenizer: exit %d: %s", r->code, r->err);
    assert_string_equal(r->err, "");

    r = kronos("pull NeoQuasar/Kronos-demo");
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->err, "model.safetensors: already in the cache"));

    /* The forecast from hub names equals the one from the bundled directories. */
    char args[4096], direct[1 << 16];
    snprintf(args, sizeof args,
             "forecast --model %s/models/kronos-demo/predictor --tokenizer "
             "%s/models/kronos-demo/tokenizer "
             "--input %s/data/XSHG_5min_600977.csv --pred-len 2",
             KR_SOURCE_DIR, KR_SOURCE_DIR, KR_SOURCE_DIR);
    r = kronos(args);
    if (r->code != 0) fail_msg("forecast (directories): exit %d: %s", r->code, r->err);
    snprintf(direct, sizeof direct, "%s", r->out);
    snprintf(args, sizeof args,
             "forecast --model NeoQuasar/Kronos-demo --tokenizer NeoQuasar/Kronos-Tokenizer-demo "
             "--input %s/data/XSHG_5min_600977.csv --pred-len 2",
             KR_SOURCE_DIR);
    r = kronos(args);
    if (r->code != 0) fail_msg("forecast (hub names): exit %d: %s", r->code, r->err);
    assert_true(!strncmp(r->out, "timestamps,open,high,low,close,volume,amount,", 45));
    int lines = 0;
    for (const char *ch = r->out; *ch; ch++) lines += *ch == '\n';
    assert_int_equal(lines, 3);
    assert_string_equal(r->out, direct);

    /* A hub name that was never pulled says how to get it. */
    snprintf(args, sizeof args,
             "forecast --model NeoQuasar/Kronos-small --tokenizer NeoQuasar/Kronos-Tokenizer-demo "
             "--input %s/data/XSHG_5min_600977.csv --pred-len 2",
             KR_SOURCE_DIR);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    if (!strstr(
            r->err,
            "NeoQuasar/Kronos-small is not downloaded; run: kronos pull NeoQuasar/Kronos-small"))
        fail_msg("stderr: %s", r->err);

    /* Errors: exit 1 naming the URL; usage errors exit 2. */
    r = kronos("pull NeoQuasar/Kronos-nope");
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "repository or file not found"));
    assert_non_null(strstr(r->err, "/NeoQuasar/Kronos-nope/resolve/main/config.json"));
    r = kronos("pull private/Kronos-demo --quiet");
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "needs HF_TOKEN"));
    assert_int_equal(kronos("pull")->code, 2);
    assert_int_equal(kronos("pull not-a-repo-id")->code, 2);
    assert_int_equal(kronos("pull NeoQuasar/Kronos-demo --bogus")->code, 2);
    r = kronos("pull NeoQuasar/Kronos-demo --revision a/../b");
    assert_int_equal(r->code, 2); /* refused before any request, as a malformed REPO is */
    assert_non_null(strstr(r->err, "not a valid revision"));
    r = kronos("pull --help");
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "--revision"));

    /* A file the server announced no size for is reported unchecked, not "size ok". */
    char no_size_dir[PATH_MAX];
    snprintf(no_size_dir, sizeof no_size_dir, "%s/cli-no-size", g_tmp);
    reset_server(MODE_NO_SIZE);
    snprintf(args, sizeof args, "pull --cache-dir %s NeoQuasar/Kronos-demo", no_size_dir);
    r = kronos(args);
    reset_server(MODE_NORMAL);
    if (r->code != 0) fail_msg("pull (no size): exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->err, "config.json: downloading (size unknown)"));
    if (!strstr(r->err, "unchecked: the server announced no size or sha256"))
        fail_msg("stderr: %s", r->err);
    assert_null(strstr(r->err, "size ok"));

    /* --cache-dir puts the snapshot there. */
    snprintf(args, sizeof args,
             "pull --quiet --cache-dir %s/cli-cache --revision %s NeoQuasar/Kronos-demo", g_tmp,
             g_repos[0].commit);
    r = kronos(args);
    if (r->code != 0) fail_msg("pull --cache-dir: exit %d: %s", r->code, r->err);
    snprintf(want, sizeof want, "%s/cli-cache/models--NeoQuasar--Kronos-demo/snapshots/%s\n", g_tmp,
             g_repos[0].commit);
    assert_string_equal(r->out, want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_repo_id_shape),
        cmocka_unit_test(test_pull_layout_and_noop),
        cmocka_unit_test(test_resume_after_dropped_connection),
        cmocka_unit_test(test_resume_from_incomplete_file),
        cmocka_unit_test(test_corrupt_and_short_responses),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_token_stays_on_the_endpoint),
        cmocka_unit_test(test_endpoint_credentials_not_in_messages),
        cmocka_unit_test(test_threads_pull_one_repo),
        cmocka_unit_test(test_waiting_for_another_pull),
        cmocka_unit_test(test_head_retried_when_the_hub_is_busy),
        cmocka_unit_test(test_206_without_content_range),
        cmocka_unit_test(test_lfs_pointer_refused),
        cmocka_unit_test(test_cli_pull_and_forecast_from_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
