/*
 * kronos/hub_cache.h — finding a Kronos checkpoint that is already in the Hugging Face hub cache,
 * without the network. Part of the core library (libkronos), so a model named by its hub id
 * loads in every build; downloading it there is kronos/hub.h (libkronos-tools). The cache
 * layout and its place are described in kronos/hub.h.
 */
#ifndef KRONOS_HUB_CACHE_H
#define KRONOS_HUB_CACHE_H

#include <stddef.h>

#include "kronos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Finds an already-pulled snapshot without touching the network: refs/<revision> (or the
 * revision itself when it is a commit hash with a snapshot) must name a snapshot holding
 * config.json and model.safetensors. The cache: the explicit one, $HF_HUB_CACHE, $HF_HOME/hub,
 * ~/.cache/huggingface/hub (huggingface_hub's order).
 * KR_ERR_IO "... is not in the cache ..." when it is absent. */
KR_API kr_status kr_hub_resolve_cached(const char *repo, const char *revision, char *out_dir,
                                       size_t n, kr_error *err);
/* The same in an explicit hub cache directory (NULL: from the environment). */
KR_API kr_status kr_hub_resolve_cached_in(const char *cache_dir, const char *repo,
                                          const char *revision, char *out_dir, size_t n,
                                          kr_error *err);

/* The hub cache directory that kr_hub_pull would use for cache_dir (NULL: environment). */
KR_API kr_status kr_hub_cache_dir(const char *cache_dir, char *out, size_t n, kr_error *err);

/* 1 if s has the shape of a hub model id "org/name" (letters, digits, '.', '_', '-'; no
 * leading '.' or '-', no ".." or "--"), else 0. Says nothing about whether it exists. */
KR_API int kr_hub_is_repo_id(const char *s);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_HUB_CACHE_H */
