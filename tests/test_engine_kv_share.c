/*
 * A window that starts with the blocks of a cached window takes those KV blocks by reference
 * (kr_kv_store_share_prefix): its forecast is bit-identical to one computed without the
 * cache, its window is published in turn, it stays valid after the window it shared with is
 * evicted, and every block is back in the pool once the groups and the cache are gone. The
 * KV accounts count a shared block once: the cache's over its windows, a group's only for
 * blocks no cached window holds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/generate.h"
#include "engine/prefix_cache.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "test_support.h"

enum { LONG_L = 120, SHORT_L = 100, P = 8, PATHS = 3 };
/* Step budgets: a prefill spread over several steps (its first one leaves it unfinished, so
 * unpublished), or all at once. */
enum { FIRST_STEP_ROWS = 8, ALL_ROWS = 1 << 20 };

static char g_tiny_dir[1024];
static float g_x[LONG_L * 6], g_stamps[(LONG_L + P) * 5];

static int setup(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_error err = { 0 };
    if (!dir || kr_model_write_random(kr_random_shape_find("tiny"), 11, dir, &err) != KR_OK) {
        fprintf(stderr, "gen-random: %s\n", err.message);
        return -1;
    }
    snprintf(g_tiny_dir, sizeof g_tiny_dir, "%s", dir);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < LONG_L * 6; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        g_x[i] = (float)((double)(r >> 11) / 9007199254740992.0) * 4.0f - 2.0f;
    }
    for (int i = 0; i < LONG_L + P; i++) {
        float *t = g_stamps + (size_t)i * 5;
        t[0] = (float)(i % 60);
        t[1] = (float)((i / 60) % 24);
        t[2] = 2.0f;
        t[3] = 14.0f;
        t[4] = 6.0f;
    }
    return 0;
}

static kr_model *load(void) {
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s/predictor", g_tiny_dir);
    snprintf(tok, sizeof tok, "%s/tokenizer", g_tiny_dir);
    kr_model *m = NULL;
    kr_error err = { 0 };
    if (kr_model_load(pred, tok, NULL, &m, &err) != KR_OK) fail_msg("load: %s", err.message);
    return m;
}

typedef struct result {
    int32_t hist_s1[LONG_L], hist_s2[LONG_L], gen_s1[PATHS * P], gen_s2[PATHS * P];
    float pred[PATHS * P * 6];
    kr_seq_output out;
    size_t kv_first_step; /* what the group was charged after its first step */
    size_t kv_after_evict; /* ... and after the cache was emptied then (evict_cache) */
} result;

/* One group of the first L history rows, run to the end with the cache (or none), at most
 * step_rows rows of work a step; evict_cache: the cache is emptied after the first step. */
static void run_group_ex(kr_model *m, int L, kr_prefix_cache *cache, int64_t step_rows,
                         int evict_cache, result *res) {
    static kr_exec *ex;
    if (!ex) {
        kr_error e = { 0 };
        if (kr_exec_create(2, 0, &ex, &e) != KR_OK) fail_msg("exec: %s", e.message);
    }
    kr_engine eng = { m, *ex, KR_KV_F32, NULL };
    memset(res, 0, sizeof *res);
    res->out.hist_s1 = res->hist_s1;
    res->out.hist_s2 = res->hist_s2;
    res->out.gen_s1 = res->gen_s1;
    res->out.gen_s2 = res->gen_s2;
    res->out.pred_norm = res->pred;
    /* The stamps of the future follow the history directly. */
    static float stamps[(LONG_L + P) * 5];
    memcpy(stamps, g_stamps, (size_t)(L + P) * 5 * sizeof(float));
    kr_seq_input in = { .hist_len = L, .x_norm = g_x, .stamps = stamps, .seed = 99 };
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = P;
    p.paths = PATHS;
    p.max_context = 256;
    kr_seq *g = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_seq_create(&eng, &in, &res->out, &p, NULL, &g, &err), KR_OK);
    kr_prefix_hooks hooks;
    if (cache) {
        hooks = kr_prefix_cache_hooks(cache);
        /* Only the predictor's blocks are counted here: no decoder contexts. */
        hooks.dec_lookup = NULL;
        hooks.dec_publish = NULL;
    }
    for (int steps = 0; !kr_seq_done(g); steps++) {
        if (kr_generate_step(&eng, &g, &step_rows, 1, cache ? &hooks : NULL, &err) != KR_OK)
            fail_msg("step: %s", err.message);
        if (steps == 0) res->kv_first_step = kr_seq_kv_bytes(g);
        if (steps == 0 && evict_cache) {
            kr_prefix_cache_evict(cache, SIZE_MAX);
            res->kv_after_evict = kr_seq_kv_bytes(g);
        }
    }
    kr_seq_free(g);
}

static void run_group(kr_model *m, int L, kr_prefix_cache *cache, int64_t step_rows, result *res) {
    run_group_ex(m, L, cache, step_rows, 0, res);
}

static void expect_same(const result *a, const result *b, const char *what) {
    if (memcmp(a->gen_s1, b->gen_s1, sizeof a->gen_s1) ||
        memcmp(a->gen_s2, b->gen_s2, sizeof a->gen_s2))
        fail_msg("%s: generated tokens differ", what);
    if (memcmp(a->pred, b->pred, sizeof a->pred)) fail_msg("%s: decoded paths differ", what);
}

static long long blocks_used(void) {
    kr_kv_pool_stats st;
    kr_kv_pool_get_stats(&st);
    return st.blocks_used;
}

static void test_partial_hit_shares_blocks(void **state) {
    (void)state;
    kr_model *m = load();
    long long used0 = blocks_used();
    static result alone, first, hit, again;
    run_group(m, LONG_L, NULL, FIRST_STEP_ROWS, &alone);
    assert_int_equal(blocks_used(), used0);

    kr_prefix_cache *cache = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_prefix_cache_create((size_t)1 << 30, &cache, &err), KR_OK);
    run_group(m, SHORT_L, cache, ALL_ROWS, &first);
    assert_int_equal(first.out.cached_tokens, 0);
    /* The history is encoded causally, so the longer window starts with the same tokens. */
    assert_memory_equal(first.hist_s1, alone.hist_s1, SHORT_L * sizeof(int32_t));
    kr_prefix_cache_stats cs;
    kr_prefix_cache_get_stats(cache, &cs);
    assert_int_equal(cs.entries, 1);
    long long held_one = blocks_used() - used0;
    assert_int_equal(held_one, (SHORT_L + KR_KV_BLOCK_ROWS - 1) / KR_KV_BLOCK_ROWS);
    size_t block_bytes = cs.bytes / (size_t)held_one;
    assert_int_equal(cs.bytes, (size_t)held_one * block_bytes);

    /* All 100 rows from the cache: 96 (6 whole blocks) by reference, the 4 of the partial
     * block by copy into the group's own block (equal tokens, equal K/V); the rest
     * prefilled. */
    run_group(m, LONG_L, cache, FIRST_STEP_ROWS, &hit);
    assert_int_equal(hit.out.cached_tokens, SHORT_L);
    expect_same(&alone, &hit, "partial prefix hit vs no cache");
    kr_prefix_cache_get_stats(cache, &cs);
    assert_int_equal(cs.entries, 2); /* the longer window was self-contained, so published */
    /* It holds only its own blocks beyond the 6 shared ones. */
    long long held_two = blocks_used() - used0;
    assert_int_equal(held_two, held_one + (LONG_L + KR_KV_BLOCK_ROWS - 1) / KR_KV_BLOCK_ROWS - 6);
    /* The cache's account counts the shared blocks once (it counted them in both windows). */
    assert_int_equal(cs.bytes, (size_t)held_two * block_bytes);
    /* While its prefill ran, the group was charged only the window blocks no cached window
     * held: 6 fewer than the same group without the cache. */
    assert_int_equal(alone.kv_first_step - hit.kv_first_step, 6 * block_bytes);

    /* The first window goes; the shared blocks stay with the second, still correct. */
    kr_prefix_cache_evict(cache, 1);
    kr_prefix_cache_get_stats(cache, &cs);
    assert_int_equal(cs.entries, 1);
    assert_int_equal(blocks_used() - used0, (LONG_L + KR_KV_BLOCK_ROWS - 1) / KR_KV_BLOCK_ROWS);
    /* The blocks the two shared stay counted, with the window that keeps them. */
    assert_int_equal(cs.bytes, (size_t)(blocks_used() - used0) * block_bytes);
    run_group(m, LONG_L, cache, ALL_ROWS, &again);
    assert_int_equal(again.out.cached_tokens, LONG_L);
    expect_same(&alone, &again, "whole-window hit after the shared window's eviction");

    /* A whole-window hit is charged to the cache while the cache holds the window; once the
     * cache lets it go, mid-forecast, the group is its last holder and its account takes the
     * window's blocks (the KV gauge read low by them). */
    static result evicted;
    const long long window_blocks = (LONG_L + KR_KV_BLOCK_ROWS - 1) / KR_KV_BLOCK_ROWS;
    run_group_ex(m, LONG_L, cache, ALL_ROWS, 1, &evicted);
    assert_int_equal(evicted.out.cached_tokens, LONG_L);
    expect_same(&alone, &evicted, "whole-window hit evicted mid-forecast");
    assert_int_equal(evicted.kv_after_evict - evicted.kv_first_step,
                     (size_t)window_blocks * block_bytes);
    kr_prefix_cache_get_stats(cache, &cs);
    assert_int_equal(cs.entries, 0);

    kr_prefix_cache_free(cache);
    assert_int_equal(blocks_used(), used0);
    kr_model_free(m);
}

/* The low-hit-rate remedies at the cache: entries that keep only a window's head (a longer
 * window reuses exactly those rows, with the same results), and a clear that keeps the
 * windows of the most asked fingerprints. */
static void test_head_entries_and_rewarm(void **state) {
    (void)state;
    kr_model *m = load();
    long long used0 = blocks_used();
    static result alone, first, hit;
    run_group(m, LONG_L, NULL, ALL_ROWS, &alone);
    kr_prefix_cache *cache = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_prefix_cache_create((size_t)1 << 30, &cache, &err), KR_OK);
    kr_prefix_cache_set_entry_blocks(cache, 2);
    run_group(m, SHORT_L, cache, ALL_ROWS, &first);
    kr_prefix_cache_stats cs;
    kr_prefix_cache_get_stats(cache, &cs);
    assert_int_equal(cs.entries, 1);
    assert_int_equal(cs.entry_blocks, 2);
    /* Its head only: 2 prefix blocks = 32 rows, in 32 / KR_KV_BLOCK_ROWS KV blocks. */
    assert_int_equal(blocks_used() - used0, (2 * KR_PREFIX_BLOCK) / KR_KV_BLOCK_ROWS);
    run_group(m, SHORT_L, cache, ALL_ROWS, &hit); /* the same window: a partial hit now */
    assert_int_equal(hit.out.cached_tokens, 2 * KR_PREFIX_BLOCK);
    expect_same(&first, &hit, "head entry vs whole prefill");
    run_group(m, LONG_L, cache, ALL_ROWS, &hit);
    assert_int_equal(hit.out.cached_tokens, 2 * KR_PREFIX_BLOCK);
    expect_same(&alone, &hit, "longer window on a head entry");
    /* Rewarm: the windows asked for most stay, the others go. A second series (other first
     * rows), asked once, against the first one, asked three times. */
    static result other;
    float saved[6];
    memcpy(saved, g_x, sizeof saved);
    for (int c = 0; c < 6; c++) g_x[c] += 0.75f;
    run_group(m, SHORT_L, cache, ALL_ROWS, &other);
    memcpy(g_x, saved, sizeof saved);
    kr_prefix_cache_get_stats(cache, &cs);
    if (memcmp(other.hist_s1, first.hist_s1, KR_PREFIX_BLOCK * sizeof(int32_t)) == 0)
        skip(); /* the shift did not change the first block's tokens: nothing to tell apart */
    assert_int_equal(cs.entries, 2);
    assert_int_equal(kr_prefix_cache_rewarm(cache, 1), 1);
    run_group(m, LONG_L, cache, ALL_ROWS, &hit); /* the hot one stayed */
    assert_int_equal(hit.out.cached_tokens, 2 * KR_PREFIX_BLOCK);
    kr_prefix_cache_get_stats(cache, &cs);
    int before = cs.entries;
    assert_int_equal(cs.rewarms, 1);
    /* keep 0: a clear of every window. */
    assert_int_equal(kr_prefix_cache_rewarm(cache, 0), before);
    kr_prefix_cache_get_stats(cache, &cs);
    assert_int_equal(cs.entries, 0);
    kr_prefix_cache_free(cache);
    assert_int_equal(blocks_used(), used0);
    kr_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_hit_shares_blocks),
        cmocka_unit_test(test_head_entries_and_rewarm),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
