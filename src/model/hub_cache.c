/*
 * model/hub_cache — finding a checkpoint in the Hugging Face hub cache, offline (see
 * kronos/hub_cache.h): the names of repositories and revisions, the cache's place and layout,
 * and the lookup of a pulled snapshot. Part of the core library because loading a model by its
 * hub id (`--model NeoQuasar/Kronos-small`, the Python package's from_pretrained) needs it in
 * every build; downloading (hub/, over net/'s libcurl client) is a library on top and uses the
 * helpers of model/hub_cache.h.
 */
#include "model/hub_cache.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/fsutil.h"

/* ---------------------------------------------------------------- names */

/* ASCII only: names become paths and URLs, the locale must not widen them. */
int kr_hub_is_name_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

/* One half of "org/name", by the hub's rules: no leading/trailing '.' or '-', no ".." or "--". */
static int valid_id_part(const char *s, size_t len) {
    if (len == 0 || len > 96) return 0;
    if (s[0] == '.' || s[0] == '-' || s[len - 1] == '.' || s[len - 1] == '-') return 0;
    for (size_t i = 0; i < len; i++) {
        if (!kr_hub_is_name_char(s[i])) return 0;
        if (i > 0 && (s[i] == '.' || s[i] == '-') && s[i - 1] == s[i]) return 0;
    }
    return 1;
}

int kr_hub_is_repo_id(const char *s) {
    if (!s) return 0;
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/')) return 0;
    return valid_id_part(s, (size_t)(slash - s)) && valid_id_part(slash + 1, strlen(slash + 1));
}

/* A single path component made of name characters: what a commit hash or an ETag must be
 * before it is used as a file name (they come from the server). */
int kr_hub_safe_component(const char *s) {
    size_t len = strlen(s);
    if (len == 0 || len > 128 || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    for (size_t i = 0; i < len; i++)
        if (!kr_hub_is_name_char(s[i])) return 0;
    return 1;
}

/* A branch, tag or commit; '/' allowed between components (refs/pr/1), no "." or "..". */
int kr_hub_valid_revision(const char *r) {
    size_t len = strlen(r);
    if (len == 0 || len > 255 || r[0] == '/' || r[len - 1] == '/') return 0;
    const char *part = r;
    for (const char *p = r;; p++) {
        if (*p == '/' || *p == '\0') {
            size_t plen = (size_t)(p - part);
            if (plen == 0 || (plen == 1 && part[0] == '.') ||
                (plen == 2 && !strncmp(part, "..", 2)))
                return 0;
            if (*p == '\0') break;
            part = p + 1;
        } else if (!kr_hub_is_name_char(*p)) {
            return 0;
        }
    }
    return 1;
}

/* "~/x" -> "$HOME/x"; other paths unchanged. Then suffix appended. */
int kr_hub_expand_home(char *out, size_t n, const char *path, const char *suffix) {
    const char *home = getenv("HOME");
    if (path[0] == '~' && (path[1] == '/' || path[1] == '\0') && home && *home)
        return snprintf(out, n, "%s%s%s", home, path + 1, suffix);
    return snprintf(out, n, "%s%s", path, suffix);
}

kr_status kr_hub_cache_dir(const char *cache_dir, char *out, size_t n, kr_error *err) {
    const char *hub = getenv("HF_HUB_CACHE"), *hf_home = getenv("HF_HOME");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    /* The precedence huggingface_hub uses, so both tools share one cache. */
    if (cache_dir && *cache_dir)
        len = kr_hub_expand_home(out, n, cache_dir, "");
    else if (hub && *hub)
        len = kr_hub_expand_home(out, n, hub, "");
    else if (hf_home && *hf_home)
        len = kr_hub_expand_home(out, n, hf_home, "/hub");
    else if (xdg && *xdg)
        len = kr_hub_expand_home(out, n, xdg, "/huggingface/hub");
    else if (home && *home)
        len = snprintf(out, n, "%s/.cache/huggingface/hub", home);
    else
        return kr_error_set(
            err, KR_ERR_INVALID_ARG,
            "no hub cache directory: HOME is not set (set HF_HOME or pass --cache-dir)");
    if (len < 0 || (size_t)len >= n)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "hub cache path too long");
    return KR_OK;
}

/* A one-line file of the cache (a token, a ref) into out[n], trailing blanks trimmed; 0 if
 * absent, unreadable, empty, longer than out, or not a regular file (a FIFO in the cache must
 * not hang a pull or a model lookup). */
int kr_hub_read_small_file(const char *path, char *out, size_t n) {
    char *text = NULL;
    size_t got = 0;
    if (kr_read_file(path, n - 1, "hub cache file", &text, &got, NULL) != KR_OK) return 0;
    while (got && (text[got - 1] == '\n' || text[got - 1] == '\r' || text[got - 1] == ' ')) got--;
    memcpy(out, text, got);
    out[got] = '\0';
    free(text);
    return got > 0;
}

/* "<cache>/models--org--name" */
kr_status kr_hub_repo_folder(const char *cache, const char *repo, char *out, size_t n,
                             kr_error *err) {
    const char *slash = strchr(repo, '/');
    int len = snprintf(out, n, "%s/models--%.*s--%s", cache, (int)(slash - repo), repo, slash + 1);
    if (len < 0 || (size_t)len >= n)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "hub cache path too long");
    return KR_OK;
}

int kr_hub_is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Reads refs/<revision> into commit[n] (trimmed); 0 if absent or unreadable. */
int kr_hub_read_ref(const char *repo_dir, const char *revision, char *commit, size_t n) {
    char path[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s/refs/%s", repo_dir, revision);
    if (len < 0 || (size_t)len >= sizeof path) return 0;
    return kr_hub_read_small_file(path, commit, n);
}

/* What a Kronos checkpoint directory needs (kr_model_load reads config.json and
 * model.safetensors), and its model card when there is one. */
const kr_hub_file kr_hub_checkpoint_files[KR_HUB_CHECKPOINT_FILES] = {
    { "config.json", 0 },
    { "model.safetensors", 0 },
    { "README.md", 1 },
};

/* ---------------------------------------------------------------- offline lookup */

kr_status kr_hub_resolve_cached_in(const char *cache_dir, const char *repo, const char *revision,
                                   char *out_dir, size_t n, kr_error *err) {
    if (!kr_hub_is_repo_id(repo))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "'%s' is not a hub model id of the form org/name",
                            repo ? repo : "(null)");
    if (!revision || !*revision) revision = "main";
    if (!kr_hub_valid_revision(revision))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "'%s' is not a valid revision", revision);
    char cache[PATH_MAX], repo_dir[PATH_MAX], commit[128], snap[PATH_MAX];
    kr_status st = kr_hub_cache_dir(cache_dir, cache, sizeof cache, err);
    if (st == KR_OK) st = kr_hub_repo_folder(cache, repo, repo_dir, sizeof repo_dir, err);
    if (st != KR_OK) return st;
    int found =
        kr_hub_read_ref(repo_dir, revision, commit, sizeof commit) && kr_hub_safe_component(commit);
    if (!found && kr_hub_safe_component(revision)) { /* a commit hash is its own ref */
        snprintf(commit, sizeof commit, "%s", revision);
        found = 1;
    }
    if (found) {
        KR_HUB_PATH(snap, "%s/snapshots/%s", repo_dir, commit);
        for (size_t i = 0; found && i < KR_HUB_CHECKPOINT_FILES; i++) {
            char p[PATH_MAX];
            int len = snprintf(p, sizeof p, "%s/%s", snap, kr_hub_checkpoint_files[i].name);
            if (!kr_hub_checkpoint_files[i].optional &&
                (len < 0 || (size_t)len >= sizeof p || !kr_hub_is_regular(p)))
                found = 0;
        }
    }
    if (!found)
        return kr_error_set(err, KR_ERR_IO, "%s (revision %s) is not in the hub cache %s", repo,
                            revision, cache);
    int len = snprintf(out_dir, n, "%s", snap);
    if (len < 0 || (size_t)len >= n)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "snapshot path does not fit the output buffer");
    return KR_OK;
}

kr_status kr_hub_resolve_cached(const char *repo, const char *revision, char *out_dir, size_t n,
                                kr_error *err) {
    return kr_hub_resolve_cached_in(NULL, repo, revision, out_dir, n, err);
}
