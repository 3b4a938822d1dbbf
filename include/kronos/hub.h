/*
 * kronos/hub.h — downloading Kronos checkpoints from the Hugging Face hub into the standard hub
 * cache (libkronos-tools, over libcurl: KRONOS_WITH_CURL); finding them there again offline is
 * kronos/hub_cache.h, in the core library.
 *
 * The cache layout is the one huggingface_hub writes, so a snapshot pulled here is found by
 * Python tools and vice versa:
 *
 *   <cache>/models--{org}--{name}/blobs/<etag>            file contents, named by the hub's
 *                                                        ETag (sha256 for LFS files)
 *   <cache>/models--{org}--{name}/snapshots/<commit>/<f>  relative symlink ../../blobs/<etag>
 *   <cache>/models--{org}--{name}/refs/<revision>         the commit hash the revision named
 *
 * <cache> is, first that applies: the explicit cache_dir, $HF_HUB_CACHE, $HF_HOME/hub,
 * ~/.cache/huggingface/hub. Files download to blobs/<etag>.incomplete and resume from its size
 * with an HTTP Range request; sizes are checked against the hub's X-Linked-Size /
 * Content-Length and, when the ETag is a sha256, the contents against it, before the blob is
 * renamed into place. The CLI (`kronos pull`) is a thin wrapper over kr_hub_pull.
 *
 * Threads: kr_hub_pull may run in several threads or processes at once on the same cache;
 * concurrent downloads of one blob are serialised by a lock file under <cache>/.locks.
 */
#ifndef KRONOS_HUB_H
#define KRONOS_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/hub_cache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kr_hub_event {
    KR_HUB_FILE_START = 0, /* a download begins (done = bytes resumed from) */
    KR_HUB_FILE_PROGRESS = 1, /* bytes arrived */
    KR_HUB_FILE_DONE = 2, /* downloaded and verified; the blob is in place */
    KR_HUB_FILE_CACHED = 3, /* already in the cache: nothing downloaded */
    KR_HUB_FILE_ABSENT = 4, /* an optional file (README.md) does not exist in the repo */
    KR_HUB_FILE_RETRY = 5, /* the connection broke; resuming from `done` */
    KR_HUB_FILE_VERIFY = 6, /* all bytes arrived; hashing them against the hub's sha256 */
    KR_HUB_FILE_WAITING = 7 /* another pull (another process) is fetching this file: waiting
                               for it to finish, then the file is taken from the cache */
} kr_hub_event;

typedef struct kr_hub_progress {
    kr_hub_event event;
    const char *repo; /* "org/name"; borrowed for the callback's duration */
    const char *file; /* repo-relative file name, e.g. "model.safetensors" */
    int64_t done; /* bytes of the file on disk, a resumed prefix included */
    int64_t total; /* expected size in bytes; -1 when the server does not say */
    int64_t resumed; /* bytes that were already on disk when this file's transfer began */
    double seconds; /* wall time of this file's transfer so far (verification excluded) */
    int sha256_verified; /* DONE: 1 if the contents matched the hub's sha256, 0 if only the size
                            could be checked (non-LFS files have a git id as ETag) */
} kr_hub_progress;

/* Called from the pulling thread, often (every few KB); keep it cheap and throttle output.
 * A non-zero return cancels the pull (KR_ERR_CANCELLED; the partial file is kept). */
typedef int (*kr_hub_progress_fn)(const kr_hub_progress *p, void *user);

typedef struct kr_hub_params {
    const char *endpoint; /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char
        *cache_dir; /* hub cache directory; NULL: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/... */
    const char *token; /* NULL: $HF_TOKEN, else the token file `huggingface-cli login`
                               saved ($HF_TOKEN_PATH, $HF_HOME/token); sent as "Authorization:
                               Bearer" (curl drops it on redirects to another host) */
    kr_hub_progress_fn progress; /* may be NULL */
    void *progress_user;
    long connect_timeout_s; /* TCP + TLS connect timeout (default 30) */
    long
        stall_timeout_s; /* abort (then resume) a transfer that moved no byte for this long (default 60) */
    int max_attempts; /* transfers per file before giving up on a broken connection (default 5) */
} kr_hub_params;

KR_API kr_hub_params kr_hub_default_params(void);

/* Downloads config.json and model.safetensors (required) and README.md (optional) of the
 * model repository `repo` ("org/name") at `revision` (NULL: "main"; a branch, tag or commit
 * hash) into the cache, skipping files already there. On success writes the snapshot
 * directory (a path holding the files) into snapshot_dir_out[n].
 * Errors (KR_ERR_IO unless said) name the URL or file: "repository or file not found: URL"
 * (HTTP 404), "... needs HF_TOKEN" (401/403), curl's message for network failures,
 * KR_ERR_FORMAT for a size or sha256 mismatch or a Git LFS pointer in place of the file (the
 * partial file is deleted), KR_ERR_INVALID_ARG for a malformed repo or revision or a token
 * holding a control character, KR_ERR_CANCELLED when the progress callback asked. No message
 * shows the token or an endpoint's user:password@. */
KR_API kr_status kr_hub_pull(const kr_hub_params *params, const char *repo, const char *revision,
                             char *snapshot_dir_out, size_t n, kr_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_HUB_H */
