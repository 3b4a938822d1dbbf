/*
 * engine/prefix_cache — prefilled context windows kept for reuse across requests.
 *
 * A window is keyed by a hash chain over blocks of KR_PREFIX_BLOCK tokens, each token being
 * (s1, s2, time stamp): h_k = H(h_{k−1}, block k). A later window that starts with the same
 * k blocks reuses those rows (same tokens at the same RoPE positions give the same K/V); an
 * identical window reuses everything, including its last row's logits, and skips prefill.
 * Tokens are compared byte for byte after a hash match, so a collision can never return a
 * wrong prefix. LRU eviction keeps the cache inside a byte budget. It also remembers the last
 * tokenizer encodings (keyed by the normalised history itself), so a repeated request skips
 * the encoder as well, and the tokenizer decoder's K/V of a history (keyed by its tokens), so
 * decoding a repeated window's forecast runs only the generated rows. Single-threaded: owned
 * by the scheduler thread.
 */
#ifndef KR_ENGINE_PREFIX_CACHE_H
#define KR_ENGINE_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "model/kv_cache.h"

#define KR_PREFIX_BLOCK 16

/* A prefilled context window that later groups with the same window may reuse
 * (engine/prefix_cache.c). Immutable once published; shared by reference count. */
typedef struct kr_prefix {
    kr_kv_store kv; /* rows [0, n) of the window, all predictor layers + dep layer */
    int n; /* rows */
    float *logits; /* [V1] s1 logits of the last row */
    float *ctx; /* [d] context row of the last row */
    int refs; /* owners (cache + groups); free at 0 */
} kr_prefix;

/* Looks up / offers prefilled windows. lookup returns a prefix whose first *rows rows equal
 * the group's window (tokens, stamps; *rows a multiple of the block size or the whole
 * window) with a reference taken, or NULL; publish offers a freshly prefilled window. */
typedef struct kr_prefix_hooks {
    kr_prefix *(*lookup)(void *user, const int32_t *s1, const int32_t *s2, const float *stamps,
                         int n, int *rows);
    void (*publish)(void *user, kr_prefix *p, const int32_t *s1, const int32_t *s2,
                    const float *stamps);
    /* The tokenizer's encoding of an identical normalised history (x_norm [L][6]) can be
     * reused too: returns 1 and fills s1/s2 [L] on a hit. May be NULL. */
    int (*encode_lookup)(void *user, const float *x_norm, int L, int32_t *s1, int32_t *s2);
    void (*encode_publish)(void *user, const float *x_norm, int L, const int32_t *s1,
                           const int32_t *s2);
    /* The tokenizer decoder's K/V of a window's history tokens [n] (whole matches only; the
     * kr_prefix's kv has the tokenizer's layers, logits and ctx unused). May be NULL. */
    kr_prefix *(*dec_lookup)(void *user, const int32_t *s1, const int32_t *s2, int n);
    void (*dec_publish)(void *user, kr_prefix *p, const int32_t *s1, const int32_t *s2);
    void *user;
} kr_prefix_hooks;

void kr_prefix_release(kr_prefix *p);

/* A predictor window of `rows` rows in the engine's KV precision (its logits and context row
 * unset) with one reference, or NULL with err set. */
kr_prefix *kr_prefix_new(const kr_engine *eng, int rows, kr_error *err);
/* A tokenizer-decoder context: K/V of a window's history rows in the decoder's layers (logits
 * and ctx unused), or NULL with err set. */
kr_prefix *kr_prefix_new_decoder(const kr_tokenizer_weights *tw, int rows, kr_error *err);
/* A predictor KV store of cap rows in the engine's KV precision (the int8 scale group divides
 * the head_dim of both the self-attention and the dep layer, so no scale spans two heads). */
kr_status kr_predictor_store_init(const kr_engine *eng, kr_kv_store *s, int cap, kr_error *err);
/* The int8 scale group of the engine's predictor stores (see kr_predictor_store_init). */
int kr_predictor_store_group(const kr_engine *eng);

typedef struct kr_prefix_cache kr_prefix_cache;

typedef struct kr_prefix_cache_stats {
    int entries;
    /* bytes: of the distinct KV blocks the entries hold (blocks windows share counted once) */
    size_t bytes, budget;
    int decoder_entries; /* of which tokenizer-decoder history contexts */
    size_t decoder_bytes;
    int64_t queried_tokens, hit_tokens, evictions;
    int entry_blocks; /* a window entry keeps at most this many leading blocks (0: all) */
    int64_t rewarms; /* kr_prefix_cache_rewarm calls */
} kr_prefix_cache_stats;

kr_status kr_prefix_cache_create(size_t budget_bytes, kr_prefix_cache **out, kr_error *err);
void kr_prefix_cache_free(kr_prefix_cache *c);
/* Hooks for kr_generate_step. */
kr_prefix_hooks kr_prefix_cache_hooks(kr_prefix_cache *c);
/* Changes the budget, evicting least recently used entries to fit. */
void kr_prefix_cache_set_budget(kr_prefix_cache *c, size_t budget_bytes);
/* Evicts LRU entries until at least `bytes` are freed or the cache is empty; returns bytes freed. */
size_t kr_prefix_cache_evict(kr_prefix_cache *c, size_t bytes);
void kr_prefix_cache_get_stats(const kr_prefix_cache *c, kr_prefix_cache_stats *st);

/* Low hit rate remedies (the tuner's cache_shorten and cache_rewarm rules):
 *
 * A shorter context per entry: windows published from now on keep only their first `blocks`
 * blocks (0: whole windows), so more windows fit the budget. The head is what a later window
 * can reuse: a row's K/V depend on every row before it, so a window's last blocks are worth
 * nothing without its first ones (a brief's "last K blocks of long windows" cannot be reused
 * at a shifted position: RoPE positions and the attended past both differ). A kept head has no
 * last-row logits and serves partial hits only.
 *
 * Clear and re-warm: drops every window entry but those of the `keep` most frequent recent
 * fingerprints (a window's first block, counted at every lookup with a decay, so the count
 * follows what clients ask now); the kept entries are the re-warmed pool, the dropped ones
 * come back as their windows are asked again. Returns the entries dropped. */
void kr_prefix_cache_set_entry_blocks(kr_prefix_cache *c, int blocks);
int kr_prefix_cache_rewarm(kr_prefix_cache *c, int keep);

#endif
