/* engine/prefix_cache — see prefix_cache.h. */
#include "engine/prefix_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/assert.h"
#include "base/error.h"
#include "model/predictor.h"
#include "model/tokenizer.h"

/* Entry kinds: a predictor window (tokens + stamps, partial reuse by blocks) or the tokenizer
 * decoder's history context (tokens only: the decoder has no time embedding; whole matches). */
enum { KIND_WINDOW = 0, KIND_DECODER = 1 };

typedef struct entry {
    int kind;
    kr_prefix *p; /* one reference held by the cache */
    int n; /* rows */
    uint64_t *chain; /* [n / BLOCK + 1]: chain[k] = hash of the first k blocks */
    uint64_t full; /* hash of all n rows (incl. a partial last block) */
    int32_t *s1, *s2; /* [n] tokens, to confirm a hash match */
    float *stamps; /* [n][5]; NULL for KIND_DECODER */
    uint64_t last_used;
    size_t bytes;
    int head_only; /* kept only the window's first blocks: no last-row logits */
} entry;

/* A fingerprint (a window's first block) and how often it was asked lately. */
typedef struct fingerprint {
    uint64_t key;
    double count;
} fingerprint;

#define FINGERPRINTS 512
#define FINGERPRINT_DECAY_LOOKUPS 1024

/* A tokenizer encoding: identical normalised histories give identical ids. */
typedef struct enc_entry {
    uint64_t hash;
    int L;
    float *x; /* [L][6] x_norm, to confirm a hash match */
    int32_t *s1, *s2; /* [L] */
    uint64_t last_used;
} enc_entry;

#define ENC_ENTRIES 64

/* ---------------------------------------------------------------- prefixes */

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int kr_predictor_store_group(const kr_engine *eng) {
    const kr_predictor_weights *w = eng->model->pred;
    return w->cfg.n_layers > 0 ? gcd(w->blocks[0].attn.head_dim, w->dep.head_dim) : w->dep.head_dim;
}

kr_status kr_predictor_store_init(const kr_engine *eng, kr_kv_store *s, int cap, kr_error *err) {
    const kr_predictor_weights *w = eng->model->pred;
    return kr_kv_store_init_dtype(s, kr_predictor_store_layers(w), w->cfg.d_model, cap,
                                  eng->kv_dtype, kr_predictor_store_group(eng), err);
}

void kr_prefix_release(kr_prefix *p) {
    if (!p) return;
    KR_ASSERT(p->refs >= 1); /* one release per owner */
    if (--p->refs > 0) return;
    kr_kv_store_release(&p->kv);
    free(p->logits);
    free(p->ctx);
    free(p);
}

kr_prefix *kr_prefix_new(const kr_engine *eng, int rows, kr_error *err) {
    const kr_predictor_weights *w = eng->model->pred;
    kr_prefix *p = calloc(1, sizeof *p);
    if (p) {
        p->logits = malloc(((size_t)1 << w->cfg.s1_bits) * sizeof(float));
        p->ctx = malloc((size_t)w->cfg.d_model * sizeof(float));
        p->refs = 1;
        p->n = rows;
    }
    if (!p || !p->logits || !p->ctx ||
        kr_predictor_store_init(eng, &p->kv, rows > 0 ? rows : 1, err) != KR_OK) {
        kr_prefix_release(p);
        kr_error_set(err, KR_ERR_NOMEM, "prefix: out of memory for a window");
        return NULL;
    }
    return p;
}

/* Kept in a kr_prefix so the prefix cache can hold it like a predictor window. */
kr_prefix *kr_prefix_new_decoder(const kr_tokenizer_weights *tw, int rows, kr_error *err) {
    kr_prefix *p = calloc(1, sizeof *p);
    if (!p) {
        kr_error_set(err, KR_ERR_NOMEM, "prefix: out of memory for a decoder context");
        return NULL;
    }
    p->refs = 1;
    p->n = rows;
    if (kr_kv_store_init(&p->kv, kr_tokenizer_store_layers(tw), tw->cfg.d_model, rows, err) !=
        KR_OK) {
        kr_prefix_release(p);
        return NULL;
    }
    return p;
}

/* ---------------------------------------------------------------- the cache */

struct kr_prefix_cache {
    entry *e;
    int n, cap;
    enc_entry enc[ENC_ENTRIES];
    int n_enc;
    size_t bytes, budget;
    uint64_t tick;
    int64_t queried, hits, evictions;
    int entry_blocks; /* 0: whole windows */
    int64_t rewarms, lookups;
    fingerprint fp[FINGERPRINTS]; /* direct-mapped by key */
};

/* Counts a window's first block; halves every count every FINGERPRINT_DECAY_LOOKUPS lookups. */
static void count_fingerprint(kr_prefix_cache *c, uint64_t key) {
    if (++c->lookups % FINGERPRINT_DECAY_LOOKUPS == 0)
        for (int i = 0; i < FINGERPRINTS; i++) c->fp[i].count *= 0.5;
    fingerprint *f = &c->fp[key % FINGERPRINTS];
    if (f->key != key) {
        if (f->count >= 1.0) { /* a collision: the newcomer must earn the slot */
            f->count -= 1.0;
            return;
        }
        f->key = key;
        f->count = 0;
    }
    f->count += 1.0;
}

static size_t prefix_bytes(const kr_prefix *p) { return kr_kv_store_bytes(&p->kv); }

typedef struct held_block {
    uintptr_t block;
    size_t bytes;
} held_block;

static int by_block(const void *a, const void *b) {
    uintptr_t x = ((const held_block *)a)->block, y = ((const held_block *)b)->block;
    return (x > y) - (x < y);
}

/* The bytes of the distinct KV blocks the entries hold. A window that took a cached window's
 * blocks by reference and was published in turn holds them too: counted once, and when either
 * window goes the other keeps them counted. Each entry whole (an upper bound) if out of
 * memory. Runs when entries come and go, not per lookup. */
static size_t held_bytes(const kr_prefix_cache *c) {
    size_t n = 0, upper = 0;
    for (int i = 0; i < c->n; i++) {
        n += (size_t)c->e[i].p->kv.n_blocks;
        upper += c->e[i].bytes;
    }
    held_block *v = n ? malloc(n * sizeof *v) : NULL;
    if (!v) return upper;
    size_t k = 0;
    for (int i = 0; i < c->n; i++) {
        const kr_kv_store *s = &c->e[i].p->kv;
        for (int b = 0; s->blocks && b < s->n_blocks; b++)
            if (s->blocks[b]) v[k++] = (held_block){ (uintptr_t)s->blocks[b], s->block_bytes };
    }
    qsort(v, k, sizeof *v, by_block);
    size_t total = 0;
    for (size_t i = 0; i < k; i++)
        if (i == 0 || v[i].block != v[i - 1].block) total += v[i].bytes;
    free(v);
    return total;
}

/* Hash of rows [a, b) chained on h. */
static uint64_t hash_rows(uint64_t h, const int32_t *s1, const int32_t *s2, const float *stamps,
                          int a, int b) {
    h = XXH3_64bits_withSeed(s1 + a, (size_t)(b - a) * sizeof(int32_t), h);
    h = XXH3_64bits_withSeed(s2 + a, (size_t)(b - a) * sizeof(int32_t), h);
    if (!stamps) return h;
    return XXH3_64bits_withSeed(stamps + (size_t)a * 5, (size_t)(b - a) * 5 * sizeof(float), h);
}

/* chain[0..n/BLOCK] and the full-window hash. */
static uint64_t chain_of(const int32_t *s1, const int32_t *s2, const float *stamps, int n,
                         uint64_t *chain) {
    uint64_t h = 0x6b726f6e6f73ull; /* "kronos" */
    chain[0] = h;
    int k = 0;
    for (; (k + 1) * KR_PREFIX_BLOCK <= n; k++) {
        h = hash_rows(h, s1, s2, stamps, k * KR_PREFIX_BLOCK, (k + 1) * KR_PREFIX_BLOCK);
        chain[k + 1] = h;
    }
    uint64_t full = hash_rows(h, s1, s2, stamps, k * KR_PREFIX_BLOCK, n);
    return full ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
}

static int same_rows(const entry *e, const int32_t *s1, const int32_t *s2, const float *stamps,
                     int rows) {
    return !memcmp(e->s1, s1, (size_t)rows * sizeof(int32_t)) &&
           !memcmp(e->s2, s2, (size_t)rows * sizeof(int32_t)) &&
           (!stamps || !memcmp(e->stamps, stamps, (size_t)rows * 5 * sizeof(float)));
}

static int same_row(const entry *e, const int32_t *s1, const int32_t *s2, const float *stamps,
                    int r) {
    return e->s1[r] == s1[r] && e->s2[r] == s2[r] &&
           (!stamps ||
            !memcmp(e->stamps + (size_t)r * 5, stamps + (size_t)r * 5, 5 * sizeof(float)));
}

static void entry_drop(kr_prefix_cache *c, int i) {
    entry *e = &c->e[i];
    kr_prefix_release(e->p);
    free(e->chain);
    free(e->s1);
    free(e->s2);
    free(e->stamps);
    c->e[i] = c->e[--c->n];
    c->bytes = held_bytes(c);
}

size_t kr_prefix_cache_evict(kr_prefix_cache *c, size_t bytes) {
    size_t freed = 0;
    while (c->n > 0 && freed < bytes) {
        int lru = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].last_used < c->e[lru].last_used) lru = i;
        size_t before = c->bytes;
        entry_drop(c, lru);
        freed += before - c->bytes;
        c->evictions++;
    }
    return freed;
}

void kr_prefix_cache_set_budget(kr_prefix_cache *c, size_t budget) {
    c->budget = budget;
    if (c->bytes > budget) kr_prefix_cache_evict(c, c->bytes - budget);
}

static kr_prefix *lookup(void *user, const int32_t *s1, const int32_t *s2, const float *stamps,
                         int n, int *rows) {
    kr_prefix_cache *c = user;
    c->queried += n;
    *rows = 0;
    if (c->n == 0 || n <= 0) return NULL;
    uint64_t *chain = malloc(((size_t)n / KR_PREFIX_BLOCK + 1) * sizeof(uint64_t));
    if (!chain) return NULL;
    uint64_t full = chain_of(s1, s2, stamps, n, chain);
    if (n >= KR_PREFIX_BLOCK) count_fingerprint(c, chain[1]);
    int best = -1, best_rows = 0;
    for (int i = 0; i < c->n; i++) {
        entry *e = &c->e[i];
        if (e->kind != KIND_WINDOW) continue;
        if (!e->head_only && e->n == n && e->full == full && same_rows(e, s1, s2, stamps, n)) {
            best = i;
            best_rows = n;
            break;
        }
        /* Longest common run of whole blocks (never the whole window: its last row's logits
         * would be missing), confirmed token by token, then extended token by token into the
         * next block: a window grown by a bar whose earlier tokens did not change (anchored
         * normalisation, or exact statistics that moved too little to flip a bit) reuses all
         * of them, not only whole blocks. K/V rows depend on the tokens before them only, so
         * equal tokens give equal rows. */
        int limit = e->n < n - 1 ? e->n : n - 1;
        int kmax = limit / KR_PREFIX_BLOCK;
        for (int k = kmax; k > 0; k--)
            if (e->chain[k] == chain[k] && same_rows(e, s1, s2, stamps, k * KR_PREFIX_BLOCK)) {
                int r = k * KR_PREFIX_BLOCK;
                while (r < limit && same_row(e, s1, s2, stamps, r)) r++;
                if (r > best_rows) {
                    best = i;
                    best_rows = r;
                }
                break;
            }
    }
    free(chain);
    if (best < 0) return NULL;
    c->e[best].last_used = ++c->tick;
    c->hits += best_rows;
    c->e[best].p->refs++;
    *rows = best_rows;
    return c->e[best].p;
}

static void publish_kind(kr_prefix_cache *c, int kind, kr_prefix *p, const int32_t *s1,
                         const int32_t *s2, const float *stamps) {
    size_t bytes = prefix_bytes(p);
    if (p->n <= 0 || bytes > c->budget) return;
    uint64_t *chain = malloc(((size_t)p->n / KR_PREFIX_BLOCK + 1) * sizeof(uint64_t));
    if (!chain) return;
    uint64_t full = chain_of(s1, s2, stamps, p->n, chain);
    for (int i = 0; i < c->n; i++)
        if (c->e[i].kind == kind && c->e[i].n == p->n && c->e[i].full == full &&
            same_rows(&c->e[i], s1, s2, stamps, p->n)) {
            c->e[i].last_used = ++c->tick;
            free(chain);
            return;
        }
    if (c->bytes + bytes > c->budget) kr_prefix_cache_evict(c, c->bytes + bytes - c->budget);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        entry *e = realloc(c->e, (size_t)cap * sizeof *e);
        if (!e) {
            free(chain);
            return;
        }
        c->e = e;
        c->cap = cap;
    }
    entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    e->s1 = malloc((size_t)p->n * sizeof(int32_t));
    e->s2 = malloc((size_t)p->n * sizeof(int32_t));
    e->stamps = stamps ? malloc((size_t)p->n * 5 * sizeof(float)) : NULL;
    if (!e->s1 || !e->s2 || (stamps && !e->stamps)) {
        free(e->s1);
        free(e->s2);
        free(e->stamps);
        free(chain);
        return;
    }
    memcpy(e->s1, s1, (size_t)p->n * sizeof(int32_t));
    memcpy(e->s2, s2, (size_t)p->n * sizeof(int32_t));
    if (stamps) memcpy(e->stamps, stamps, (size_t)p->n * 5 * sizeof(float));
    e->kind = kind;
    e->p = p;
    p->refs++;
    e->n = p->n;
    e->chain = chain;
    e->full = full;
    e->bytes = bytes;
    e->last_used = ++c->tick;
    c->n++;
    c->bytes = held_bytes(c);
}

static void publish(void *user, kr_prefix *p, const int32_t *s1, const int32_t *s2,
                    const float *stamps) {
    kr_prefix_cache *c = user;
    const int head = c->entry_blocks * KR_PREFIX_BLOCK;
    if (c->entry_blocks <= 0 || p->n <= head) {
        publish_kind(c, KIND_WINDOW, p, s1, s2, stamps);
        return;
    }
    /* Only the window's head: a view of its first blocks, no last-row logits. */
    kr_prefix *h = calloc(1, sizeof *h);
    if (!h) return;
    h->refs = 1;
    h->n = head;
    if (kr_kv_store_view_head(&h->kv, &p->kv, head, NULL) != KR_OK) {
        free(h);
        return;
    }
    int before = c->n;
    publish_kind(c, KIND_WINDOW, h, s1, s2, stamps);
    if (c->n > before) c->e[c->n - 1].head_only = 1;
    kr_prefix_release(h); /* the cache holds its own reference (or none: not kept) */
}

void kr_prefix_cache_set_entry_blocks(kr_prefix_cache *c, int blocks) {
    c->entry_blocks = blocks > 0 ? blocks : 0;
}

int kr_prefix_cache_rewarm(kr_prefix_cache *c, int keep) {
    /* The `keep` hottest fingerprints (a selection over a small fixed table). */
    uint64_t hot[64];
    int n_hot = 0;
    if (keep > 64) keep = 64;
    char taken[FINGERPRINTS] = { 0 };
    for (; n_hot < keep; n_hot++) {
        int best = -1;
        for (int i = 0; i < FINGERPRINTS; i++)
            if (!taken[i] && c->fp[i].count >= 1.0 &&
                (best < 0 || c->fp[i].count > c->fp[best].count))
                best = i;
        if (best < 0) break;
        taken[best] = 1;
        hot[n_hot] = c->fp[best].key;
    }
    int dropped = 0;
    for (int i = 0; i < c->n;) {
        entry *e = &c->e[i];
        int keep_it = e->kind != KIND_WINDOW || e->n < KR_PREFIX_BLOCK;
        for (int k = 0; !keep_it && k < n_hot; k++) keep_it = e->chain[1] == hot[k];
        if (keep_it) {
            i++;
            continue;
        }
        entry_drop(c, i); /* moves the last entry to i */
        dropped++;
    }
    c->rewarms++;
    return dropped;
}

static kr_prefix *dec_lookup(void *user, const int32_t *s1, const int32_t *s2, int n) {
    kr_prefix_cache *c = user;
    if (c->n == 0 || n <= 0) return NULL;
    uint64_t *chain = malloc(((size_t)n / KR_PREFIX_BLOCK + 1) * sizeof(uint64_t));
    if (!chain) return NULL;
    uint64_t full = chain_of(s1, s2, NULL, n, chain);
    free(chain);
    for (int i = 0; i < c->n; i++) {
        entry *e = &c->e[i];
        if (e->kind == KIND_DECODER && e->n == n && e->full == full &&
            same_rows(e, s1, s2, NULL, n)) {
            e->last_used = ++c->tick;
            e->p->refs++;
            return e->p;
        }
    }
    return NULL;
}

static void dec_publish(void *user, kr_prefix *p, const int32_t *s1, const int32_t *s2) {
    publish_kind(user, KIND_DECODER, p, s1, s2, NULL);
}

static int enc_lookup(void *user, const float *x, int L, int32_t *s1, int32_t *s2) {
    kr_prefix_cache *c = user;
    uint64_t h = XXH3_64bits(x, (size_t)L * 6 * sizeof(float));
    for (int i = 0; i < c->n_enc; i++) {
        enc_entry *e = &c->enc[i];
        if (e->hash == h && e->L == L && !memcmp(e->x, x, (size_t)L * 6 * sizeof(float))) {
            memcpy(s1, e->s1, (size_t)L * sizeof(int32_t));
            memcpy(s2, e->s2, (size_t)L * sizeof(int32_t));
            e->last_used = ++c->tick;
            return 1;
        }
    }
    return 0;
}

static void enc_free(enc_entry *e) {
    free(e->x);
    free(e->s1);
    free(e->s2);
    memset(e, 0, sizeof *e);
}

static void enc_publish(void *user, const float *x, int L, const int32_t *s1, const int32_t *s2) {
    kr_prefix_cache *c = user;
    int slot = c->n_enc;
    if (slot == ENC_ENTRIES) { /* replace the least recently used */
        slot = 0;
        for (int i = 1; i < ENC_ENTRIES; i++)
            if (c->enc[i].last_used < c->enc[slot].last_used) slot = i;
        enc_free(&c->enc[slot]);
    } else {
        c->n_enc++;
    }
    enc_entry *e = &c->enc[slot];
    e->x = malloc((size_t)L * 6 * sizeof(float));
    e->s1 = malloc((size_t)L * sizeof(int32_t));
    e->s2 = malloc((size_t)L * sizeof(int32_t));
    if (!e->x || !e->s1 || !e->s2) { /* caching is optional: drop the entry */
        enc_free(e);
        c->enc[slot] = c->enc[--c->n_enc];
        return;
    }
    memcpy(e->x, x, (size_t)L * 6 * sizeof(float));
    memcpy(e->s1, s1, (size_t)L * sizeof(int32_t));
    memcpy(e->s2, s2, (size_t)L * sizeof(int32_t));
    e->hash = XXH3_64bits(x, (size_t)L * 6 * sizeof(float));
    e->L = L;
    e->last_used = ++c->tick;
}

kr_status kr_prefix_cache_create(size_t budget_bytes, kr_prefix_cache **out, kr_error *err) {
    kr_prefix_cache *c = calloc(1, sizeof *c);
    if (!c) return kr_error_set(err, KR_ERR_NOMEM, "prefix cache: out of memory");
    c->budget = budget_bytes;
    *out = c;
    return KR_OK;
}

void kr_prefix_cache_free(kr_prefix_cache *c) {
    if (!c) return;
    while (c->n > 0) entry_drop(c, c->n - 1);
    for (int i = 0; i < c->n_enc; i++) enc_free(&c->enc[i]);
    free(c->e);
    free(c);
}

kr_prefix_hooks kr_prefix_cache_hooks(kr_prefix_cache *c) {
    kr_prefix_hooks h = { .lookup = lookup,
                          .publish = publish,
                          .encode_lookup = enc_lookup,
                          .encode_publish = enc_publish,
                          .dec_lookup = dec_lookup,
                          .dec_publish = dec_publish,
                          .user = c };
    return h;
}

void kr_prefix_cache_get_stats(const kr_prefix_cache *c, kr_prefix_cache_stats *st) {
    st->entries = c->n;
    st->bytes = c->bytes;
    st->decoder_entries = 0;
    st->decoder_bytes = 0;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].kind == KIND_DECODER) {
            st->decoder_entries++;
            st->decoder_bytes += c->e[i].bytes;
        }
    st->budget = c->budget;
    st->queried_tokens = c->queried;
    st->hit_tokens = c->hits;
    st->evictions = c->evictions;
    st->entry_blocks = c->entry_blocks;
    st->rewarms = c->rewarms;
}
