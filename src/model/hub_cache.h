/*
 * model/hub_cache — the Hugging Face hub cache's names and layout, offline (the public lookup is
 * kronos/hub_cache.h). These helpers are shared with hub/ (the download, a library on top), which
 * reaches them through libkronos.so: hence KR_PRIVATE.
 */
#ifndef KR_MODEL_HUB_CACHE_H
#define KR_MODEL_HUB_CACHE_H

#include <stddef.h>
#include <stdio.h>

#include "kronos/hub_cache.h"

/* snprintf into the char array buf, or return KR_ERR_INVALID_ARG ("path too long") from the
 * calling function, which has a kr_error *err in scope. */
#define KR_HUB_PATH(buf, ...)                                                              \
    do {                                                                                   \
        int len_ = snprintf(buf, sizeof buf, __VA_ARGS__);                                 \
        if (len_ < 0 || (size_t)len_ >= sizeof buf)                                        \
            return kr_error_set(err, KR_ERR_INVALID_ARG, "path too long: %.200s...", buf); \
    } while (0)

/* ASCII letters, digits, '.', '_' and '-': names become paths and URLs, the locale must not
 * widen them. */
KR_PRIVATE int kr_hub_is_name_char(char ch);
/* A single path component made of name characters: what a commit hash or an ETag must be
 * before it is used as a file name (they come from the server). */
KR_PRIVATE int kr_hub_safe_component(const char *s);
/* A branch, tag or commit; '/' allowed between components (refs/pr/1), no "." or "..". */
KR_PRIVATE int kr_hub_valid_revision(const char *r);
/* "~/x" -> "$HOME/x"; other paths unchanged. Then suffix appended. snprintf's result. */
KR_PRIVATE int kr_hub_expand_home(char *out, size_t n, const char *path, const char *suffix);
/* A one-line file of the cache (a token, a ref) into out[n], trailing blanks trimmed; 0 if
 * absent, unreadable, empty, longer than out, or not a regular file (a FIFO in the cache must
 * not hang a pull or a model lookup). */
KR_PRIVATE int kr_hub_read_small_file(const char *path, char *out, size_t n);
/* "<cache>/models--org--name" into out[n]; repo a valid id. */
KR_PRIVATE kr_status kr_hub_repo_folder(const char *cache, const char *repo, char *out, size_t n,
                                        kr_error *err);
KR_PRIVATE int kr_hub_is_regular(const char *path);
/* Reads refs/<revision> into commit[n] (trimmed); 0 if absent or unreadable. */
KR_PRIVATE int kr_hub_read_ref(const char *repo_dir, const char *revision, char *commit, size_t n);

/* The files of a Kronos checkpoint directory (kr_model_load reads config.json and
 * model.safetensors), and its model card when there is one. */
typedef struct kr_hub_file {
    const char *name;
    int optional; /* a 404 is fine */
} kr_hub_file;
#define KR_HUB_CHECKPOINT_FILES 3
extern KR_PRIVATE const kr_hub_file kr_hub_checkpoint_files[KR_HUB_CHECKPOINT_FILES];

#endif
