/* Tests for the block-paged KV store (transformer.h, kv_pool.h): addressing of rows across
 * blocks on shapes that fit no power of two, write/read round trips of every dtype across
 * block boundaries, sharing of prefix blocks by reference (counts, survival of a shared block
 * past one holder, byte accounting), and attention over block-split keys equal bit for bit to
 * attention over a contiguous copy; large blocks cut from shared huge-page regions stay
 * disjoint, aligned and writable, also when threads allocate, share and free them at once; a
 * block is handed out without its pages touched; every region goes back to the system with
 * its last block; and freed blocks are kept within the reserved KV budgets, never more, and go
 * back after a burst (by age, oldest first, down to the floor) or when a budget is released. */
#include "test_support.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "kernels/kernels.h"
#include "model/attention_plan.h"
#include "model/kv_cache.h"
#include "model/transformer.h"

enum { BR = KR_KV_BLOCK_ROWS };

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float *rnd_buf(size_t n) {
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = rnd() * 3.0f;
    return p;
}

static long long blocks_used(void) {
    kr_kv_pool_stats st;
    kr_kv_pool_get_stats(&st);
    return st.blocks_used;
}

/* Value of element j of row r of layer l, K (t = 0) or V (t = 1): unique per position. */
static float tag(int t, int l, int r, int j) {
    return (float)(t * 1000000 + l * 10000 + r * 100) + (float)j * 0.25f;
}

/* Virtual memory of this process in kB (VmSize of /proc/self/status), or -1 off Linux. */
static long vm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (kb < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) kb = strtol(line + 7, NULL, 10);
    fclose(f);
    return kb;
}

static void test_large_blocks_in_regions(void **state) {
    (void)state;
    enum { N = 70 };
    /* 1 MB + a line: 15 per 16 MB region, so 70 blocks span 5 regions and a partial one. */
    const size_t bytes = ((size_t)1 << 20) + 64;
    kr_kv_pool_trim();
    long vm0 = vm_kb();
    kr_kv_block *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = kr_kv_block_alloc(bytes);
        assert_non_null(b[i]);
        assert_int_equal((uintptr_t)b[i]->data % 64, 0);
        memset(b[i]->data, i + 1, bytes);
    }
    for (int i = 0; i < N; i++) /* no block overlaps another: each kept its own bytes */
        for (size_t o = 0; o < bytes; o += 4093)
            assert_int_equal(b[i]->data[o], (unsigned char)(i + 1));
    assert_int_equal(b[N - 1]->data[bytes - 1], (unsigned char)N);
    /* Out of order, and some held twice: a region outlives all but its last block. */
    for (int i = 0; i < N; i += 3) kr_kv_block_ref(b[i]);
    for (int i = N - 1; i >= 0; i -= 2) kr_kv_block_unref(b[i]);
    for (int i = N - 2; i >= 0; i -= 2) kr_kv_block_unref(b[i]);
    for (int i = 0; i < N; i += 3) assert_int_equal(b[i]->data[bytes / 2], (unsigned char)(i + 1));
    for (int i = 0; i < N; i += 3) kr_kv_block_unref(b[i]);
    kr_kv_pool_stats st;
    kr_kv_pool_get_stats(&st);
    assert_int_equal(st.blocks_used, 0);
    kr_kv_pool_trim();
    kr_kv_pool_get_stats(&st);
    assert_int_equal(st.blocks_free, 0);
    /* The 5-6 regions (80+ MB of address space) are unmapped; malloc may keep a little.
     * Sanitizer builds allocate each block with malloc (kv_pool.c), whose quarantine holds
     * freed memory, so only the regions' own builds can check this. */
#if !KR_TEST_ASAN
    if (vm0 >= 0) assert_true(vm_kb() < vm0 + 8 * 1024);
#else
    (void)vm0;
#endif
}

#if !KR_TEST_ASAN
/* Resident memory of this process in kB (VmRSS), or -1 off Linux. */
static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (kb < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}
#endif

/* Blocks given back while their region lives (every other one here, the rest held) release
 * their pages at once: the region must not keep them resident. */
static void test_region_block_freed_early_drops_pages(void **state) {
    (void)state;
#if KR_TEST_ASAN
    skip(); /* sanitizer builds use one malloc per block, no regions */
#else
    enum { N = 60 };
    const size_t bytes = ((size_t)1 << 20) + 64;
    kr_kv_pool_trim();
    kr_kv_block *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = kr_kv_block_alloc(bytes);
        assert_non_null(b[i]);
        memset(b[i]->data, 0x5a, bytes);
    }
    long before = rss_kb();
    if (before < 0) skip();
    for (int i = 1; i < N; i += 2) kr_kv_block_unref(b[i]);
    kr_kv_pool_trim(); /* the free list's blocks go back too */
    long after = rss_kb();
    /* 30 blocks of 1 MB returned: at least 24 MB of it must leave the resident set. */
    assert_true(before - after > 24 * 1024);
    for (int i = 0; i < N; i += 2) assert_int_equal(b[i]->data[bytes - 1], 0x5a);
    for (int i = 0; i < N; i += 2) kr_kv_block_unref(b[i]);
    kr_kv_pool_trim();
#endif
}

/* A block cut from a region is handed out without a page of it touched (its header lives
 * apart): the rows written later fault the pages in, on whichever threads write them. */
static void test_region_alloc_touches_no_page(void **state) {
    (void)state;
#if KR_TEST_ASAN
    skip(); /* sanitizer builds use one malloc per block, header in front */
#else
    enum { N = 24 };
    const size_t bytes = ((size_t)1 << 20) + 64;
    kr_kv_pool_trim();
    long before = rss_kb();
    if (before < 0) skip();
    kr_kv_block *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = kr_kv_block_alloc(bytes);
        assert_non_null(b[i]);
        assert_int_equal((uintptr_t)b[i]->data % 64, 0);
    }
    long allocated = rss_kb();
    /* 24 MB of blocks: resident memory grows by the headers and bookkeeping only. */
    assert_true(allocated - before < 4 * 1024);
    for (int i = 0; i < N; i++) memset(b[i]->data, 0x33, bytes);
    assert_true(rss_kb() - before > 20 * 1024);
    for (int i = 0; i < N; i++) {
        assert_int_equal(b[i]->data[0], 0x33);
        assert_int_equal(b[i]->data[bytes - 1], 0x33);
        kr_kv_block_unref(b[i]);
    }
    kr_kv_pool_trim();
#endif
}

/* Several threads at once allocate region blocks, fill them with their own pattern, hand
 * every other one to the next thread (which drops it), and check and free the rest: blocks
 * whose headers live apart from their payload must still never overlap, and a block freed on
 * another thread than the one that made it must give back exactly its own memory. */
enum { STRESS_THREADS = 4, STRESS_ROUNDS = 12, STRESS_BLOCKS = 10 };
typedef struct stress_arg {
    int id;
    int bad;
    kr_kv_block *handoff[STRESS_ROUNDS][STRESS_BLOCKS]; /* filled by thread id - 1 */
    pthread_mutex_t lock;
} stress_arg;
static stress_arg g_stress[STRESS_THREADS];

static void *stress_thread(void *p) {
    stress_arg *a = p;
    stress_arg *next = &g_stress[(a->id + 1) % STRESS_THREADS];
    const size_t bytes = ((size_t)1 << 20) + 64 * (size_t)(a->id + 1); /* four size classes */
    for (int r = 0; r < STRESS_ROUNDS; r++) {
        kr_kv_block *b[STRESS_BLOCKS];
        unsigned char v = (unsigned char)(1 + a->id * STRESS_ROUNDS + r);
        for (int i = 0; i < STRESS_BLOCKS; i++) {
            if (!(b[i] = kr_kv_block_alloc(bytes))) {
                a->bad++;
                return NULL;
            }
            memset(b[i]->data, v, bytes);
        }
        pthread_mutex_lock(&next->lock);
        for (int i = 0; i < STRESS_BLOCKS; i += 2) {
            kr_kv_block_ref(b[i]);
            next->handoff[r][i] = b[i];
        }
        pthread_mutex_unlock(&next->lock);
        for (int i = 0; i < STRESS_BLOCKS; i++) {
            for (size_t o = 0; o < bytes; o += 4099) a->bad += b[i]->data[o] != v;
            a->bad += b[i]->data[bytes - 1] != v;
            kr_kv_block_unref(b[i]);
        }
        pthread_mutex_lock(&a->lock); /* drop what the previous thread handed over so far */
        for (int rr = 0; rr <= r; rr++)
            for (int i = 0; i < STRESS_BLOCKS; i++) {
                kr_kv_block_unref(a->handoff[rr][i]);
                a->handoff[rr][i] = NULL;
            }
        pthread_mutex_unlock(&a->lock);
    }
    return NULL;
}

static void test_region_blocks_across_threads(void **state) {
    (void)state;
    kr_kv_pool_trim();
    long long used0 = blocks_used();
    pthread_t t[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++) {
        memset(&g_stress[i], 0, sizeof g_stress[i]);
        g_stress[i].id = i;
        pthread_mutex_init(&g_stress[i].lock, NULL);
    }
    for (int i = 0; i < STRESS_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stress_thread, &g_stress[i]), 0);
    for (int i = 0; i < STRESS_THREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < STRESS_THREADS; i++) { /* hand-offs that arrived after their taker ended */
        assert_int_equal(g_stress[i].bad, 0);
        for (int r = 0; r < STRESS_ROUNDS; r++)
            for (int j = 0; j < STRESS_BLOCKS; j++) kr_kv_block_unref(g_stress[i].handoff[r][j]);
        pthread_mutex_destroy(&g_stress[i].lock);
    }
    assert_int_equal(blocks_used(), used0);
    kr_kv_pool_trim();
    kr_kv_pool_stats st;
    kr_kv_pool_get_stats(&st);
    assert_int_equal(st.blocks_free, 0);
}

#if !KR_TEST_ASAN
enum { BURST = 100 };
static const size_t k_burst_block = ((size_t)1 << 20) + 64;

static size_t kept_bytes(void) {
    kr_kv_pool_stats st;
    kr_kv_pool_get_stats(&st);
    return (size_t)st.bytes_free;
}

/* The pool's invariant after any release: kept bytes within the floor, or everything it holds
 * (in use + kept) within the reservations. */
static void expect_keep_bound(size_t reserved) {
    kr_kv_pool_stats st;
    kr_kv_pool_get_stats(&st);
    if ((size_t)st.bytes_free > KR_KV_POOL_KEEP_FLOOR)
        assert_true((size_t)(st.bytes_used + st.bytes_free) <= reserved);
}

/* Allocates BURST blocks of ~1 MB, writes them, frees them one by one checking the bound. */
static void burst(size_t reserved) {
    kr_kv_block *b[BURST];
    for (int i = 0; i < BURST; i++) {
        b[i] = kr_kv_block_alloc(k_burst_block);
        assert_non_null(b[i]);
        memset(b[i]->data, 0x77, k_burst_block);
    }
    for (int i = 0; i < BURST; i++) {
        kr_kv_block_unref(b[i]);
        expect_keep_bound(reserved);
    }
}
#endif

/* With no engine's budget reserved, a burst of 100 MB keeps at most the floor; with a 256 MB
 * reservation it keeps all of it, and a second burst reuses those blocks instead of mapping
 * new ones; releasing the reservation gives back at once what no longer fits. */
static void test_keep_follows_reserved_budget(void **state) {
    (void)state;
#if KR_TEST_ASAN
    skip(); /* sanitizer builds keep no freed block */
#else
    kr_kv_pool_trim();
    burst(0);
    assert_true(kept_bytes() <= KR_KV_POOL_KEEP_FLOOR);
    assert_true(kept_bytes() + 2 * k_burst_block > KR_KV_POOL_KEEP_FLOOR);
    kr_kv_pool_trim();

    const size_t reserve = (size_t)256 << 20;
    kr_kv_pool_keep_reserve(reserve);
    burst(reserve);
    assert_int_equal(kept_bytes(), BURST * k_burst_block);
    long vm0 = vm_kb();
    burst(reserve); /* served from the free lists: no new region mapped */
    assert_int_equal(kept_bytes(), BURST * k_burst_block);
    if (vm0 >= 0) assert_true(vm_kb() <= vm0 + 1024);

    kr_kv_pool_keep_release(reserve);
    assert_true(kept_bytes() <= KR_KV_POOL_KEEP_FLOOR);
    assert_true(kept_bytes() + k_burst_block > KR_KV_POOL_KEEP_FLOOR);
    kr_kv_pool_trim();
#endif
}

/* A reservation smaller than the burst: blocks in use count against it, so while most of the
 * burst is still held little beyond the floor is kept, and the bound holds after every
 * release. Two reservations add up, and releasing one sheds down to the other. */
static void test_keep_counts_blocks_in_use(void **state) {
    (void)state;
#if KR_TEST_ASAN
    skip();
#else
    kr_kv_pool_trim();
    const size_t small = (size_t)80 << 20, other = (size_t)40 << 20;
    kr_kv_pool_keep_reserve(small);
    burst(small);
    assert_true(kept_bytes() <= small);
    kr_kv_pool_keep_reserve(other);
    burst(small + other);
    assert_true(kept_bytes() > small); /* the two budgets together let it keep the burst */
    kr_kv_pool_keep_release(other);
    assert_true(kept_bytes() <= small);
    kr_kv_pool_keep_release(small);
    assert_true(kept_bytes() <= KR_KV_POOL_KEEP_FLOOR);
    kr_kv_pool_trim();
#endif
}

/* After a burst the blocks kept beyond the floor go back once they have been free for the
 * decay time, oldest first: a decay at a time when only the first half is old enough takes
 * from that half only, leaves the floor, and a second one finds nothing to do. */
static void test_decay_returns_a_burst(void **state) {
    (void)state;
#if KR_TEST_ASAN
    skip();
#else
    kr_kv_pool_trim();
    const size_t reserve = (size_t)1 << 30;
    kr_kv_pool_keep_reserve(reserve);
    kr_kv_block *b[BURST];
    for (int i = 0; i < BURST; i++) {
        b[i] = kr_kv_block_alloc(k_burst_block);
        assert_non_null(b[i]);
        memset(b[i]->data, 0x21, k_burst_block);
    }
    double t0 = kr_now_seconds();
    for (int i = 0; i < BURST / 2; i++) kr_kv_block_unref(b[i]);
    double t_mid = kr_now_seconds();
    for (int i = BURST / 2; i < BURST; i++) kr_kv_block_unref(b[i]);
    const size_t all = BURST * k_burst_block;
    assert_int_equal(kept_bytes(), all);

    /* Not yet old enough: nothing is due, nothing goes. */
    assert_false(kr_kv_pool_decay_due(t0 - 1e-3 + KR_KV_POOL_DECAY_S, KR_KV_POOL_DECAY_S));
    assert_int_equal(kr_kv_pool_decay(t0 - 1e-3 + KR_KV_POOL_DECAY_S, KR_KV_POOL_DECAY_S), 0);
    assert_int_equal(kept_bytes(), all);

    /* Only the first half is old enough: 50 MB, of which the excess over the floor goes. */
    double when = t_mid + KR_KV_POOL_DECAY_S;
    assert_true(kr_kv_pool_decay_due(when, KR_KV_POOL_DECAY_S));
    size_t excess = all - KR_KV_POOL_KEEP_FLOOR;
    size_t half = (BURST / 2) * k_burst_block;
    size_t gone = kr_kv_pool_decay(when, KR_KV_POOL_DECAY_S);
    assert_int_equal(
        gone, excess < half ? (excess + k_burst_block - 1) / k_burst_block * k_burst_block : half);
    assert_true(kept_bytes() <= KR_KV_POOL_KEEP_FLOOR);
    assert_false(kr_kv_pool_decay_due(when + 100, KR_KV_POOL_DECAY_S));
    assert_int_equal(kr_kv_pool_decay(when + 100, KR_KV_POOL_DECAY_S), 0);
    /* The newest blocks are the ones kept: the last freed comes back first. */
    kr_kv_block *again = kr_kv_block_alloc(k_burst_block);
    assert_ptr_equal(again, b[BURST - 1]);
    kr_kv_block_unref(again);
    kr_kv_pool_keep_release(reserve);
    kr_kv_pool_trim();
#endif
}

static void test_addressing(void **state) {
    (void)state;
    enum { LAYERS = 3, D = 52 * 2, CAP = 37 };
    kr_kv_store s;
    kr_error err = { 0 };
    long long used0 = blocks_used();
    assert_int_equal(kr_kv_store_init(&s, LAYERS, D, CAP, &err), KR_OK);
    assert_int_equal(s.n_blocks, 3);
    assert_int_equal(blocks_used(), used0 + 3);
    assert_true(s.block_bytes >= 2u * LAYERS * BR * D * sizeof(float));
    /* F32 rows (read in place by attention) are an odd number of 64-byte lines apart, so a
     * head's rows spread over every L1 set. */
    assert_true(s.stride >= D);
    assert_int_equal(s.stride % 16, 0);
    assert_int_equal(s.stride / 16 % 2, 1);
    assert_int_equal(kr_kv_f32_stride(512), 528);
    assert_int_equal(kr_kv_f32_stride(52), 80);
    assert_int_equal(kr_kv_store_bytes(&s), 3 * s.block_bytes);
    float k[CAP * D], v[CAP * D];
    for (int l = 0; l < LAYERS; l++) {
        for (int r = 0; r < CAP; r++)
            for (int j = 0; j < D; j++) {
                k[r * D + j] = tag(0, l, r, j);
                v[r * D + j] = tag(1, l, r, j);
            }
        kr_kv_store_write(&s, l, 0, k, v, CAP); /* one call over three blocks */
    }
    for (int l = 0; l < LAYERS; l++)
        for (int r = 0; r < CAP; r++) {
            const float *kr = kr_kv_k(&s, l, r), *vr = kr_kv_v(&s, l, r);
            for (int j = 0; j < D; j++) {
                assert_true(kr[j] == tag(0, l, r, j));
                assert_true(vr[j] == tag(1, l, r, j));
            }
            /* Rows are a stride apart within a block, and a block boundary moves to another
             * one. */
            const float *next = kr + s.stride;
            if (r + 1 < CAP && (r + 1) % BR != 0) assert_ptr_equal(kr_kv_k(&s, l, r + 1), next);
            if (r + 1 < CAP && (r + 1) % BR == 0) assert_ptr_not_equal(kr_kv_k(&s, l, r + 1), next);
        }
    /* Layers of one block do not overlap: rows at the same offset of layers 0 and 1. */
    assert_true(kr_kv_k(&s, 1, 17) - kr_kv_k(&s, 0, 17) >= (ptrdiff_t)BR * s.stride);
    kr_kv_store_release(&s);
    assert_int_equal(kr_kv_store_bytes(&s), 0);
    assert_int_equal(blocks_used(), used0);
}

/* A store written in one call spanning blocks reads back the same bits as one written row by
 * row, whatever the cut of the read; f32 reads back its input, bf16 its rounding. */
static void test_round_trip_dtypes(void **state) {
    (void)state;
    enum { LAYERS = 2, D = 52 * 3, G = 52, CAP = 53, R0 = 5 };
    const kr_kv_dtype dts[3] = { KR_KV_F32, KR_KV_BF16, KR_KV_INT8 };
    int n = CAP - R0;
    float *k = rnd_buf((size_t)n * D), *v = rnd_buf((size_t)n * D);
    float *ka = malloc((size_t)n * D * sizeof(float)), *va = malloc((size_t)n * D * sizeof(float));
    float *kb = malloc((size_t)n * D * sizeof(float)), *vb = malloc((size_t)n * D * sizeof(float));
    assert_true(ka && va && kb && vb);
    for (int t = 0; t < 3; t++) {
        kr_kv_store a, b;
        kr_error err = { 0 };
        assert_int_equal(kr_kv_store_init_dtype(&a, LAYERS, D, CAP, dts[t], G, &err), KR_OK);
        assert_int_equal(kr_kv_store_init_dtype(&b, LAYERS, D, CAP, dts[t], G, &err), KR_OK);
        assert_int_equal(a.n_blocks, 4);
        assert_int_equal(kr_kv_store_bytes(&a), 4 * a.block_bytes);
        kr_kv_store_write(&a, 1, R0, k, v, n);
        for (int r = 0; r < n; r++)
            kr_kv_store_write(&b, 1, R0 + r, k + (size_t)r * D, v + (size_t)r * D, 1);
        kr_kv_store_read(&a, 1, R0, n, ka, va);
        /* Read in pieces cut across block boundaries (11, then 15 = through row 31, ...). */
        for (int r = 0, c = 11; r < n; r += c, c += 4) {
            int m = c < n - r ? c : n - r;
            kr_kv_store_read(&b, 1, R0 + r, m, kb + (size_t)r * D, vb + (size_t)r * D);
        }
        assert_memory_equal(ka, kb, (size_t)n * D * sizeof(float));
        assert_memory_equal(va, vb, (size_t)n * D * sizeof(float));
        for (size_t i = 0; i < (size_t)n * D; i++) {
            if (dts[t] == KR_KV_F32) {
                assert_true(ka[i] == k[i] && va[i] == v[i]);
            } else if (dts[t] == KR_KV_BF16) {
                assert_true(ka[i] == kr_bf16_to_f32(kr_f32_to_bf16(k[i])));
                assert_true(va[i] == kr_bf16_to_f32(kr_f32_to_bf16(v[i])));
            } else {
                assert_true(fabsf(ka[i] - k[i]) <= 3.0f / 127.0f);
                assert_true(fabsf(va[i] - v[i]) <= 3.0f / 127.0f);
            }
        }
        kr_kv_store_release(&a);
        kr_kv_store_release(&b);
    }
    free(k);
    free(v);
    free(ka);
    free(va);
    free(kb);
    free(vb);
}

static void fill(kr_kv_store *s, int rows) {
    float *k = rnd_buf((size_t)rows * s->d), *v = rnd_buf((size_t)rows * s->d);
    for (int l = 0; l < s->n_layers; l++) kr_kv_store_write(s, l, 0, k, v, rows);
    free(k);
    free(v);
}

static void expect_same_rows(const kr_kv_store *a, const kr_kv_store *b, int rows) {
    size_t n = (size_t)rows * a->d;
    float *buf = malloc(4 * n * sizeof(float));
    assert_non_null(buf);
    for (int l = 0; l < a->n_layers; l++) {
        kr_kv_store_read(a, l, 0, rows, buf, buf + n);
        kr_kv_store_read(b, l, 0, rows, buf + 2 * n, buf + 3 * n);
        assert_memory_equal(buf, buf + 2 * n, 2 * n * sizeof(float));
    }
    free(buf);
}

static void test_share_prefix(void **state) {
    (void)state;
    enum { LAYERS = 2, D = 52, CAP_SRC = 40, CAP_DST = 50, SHARED = 35 };
    const kr_kv_dtype dts[3] = { KR_KV_F32, KR_KV_BF16, KR_KV_INT8 };
    for (int t = 0; t < 3; t++) {
        kr_kv_store src, dst, copy;
        kr_error err = { 0 };
        long long used0 = blocks_used();
        assert_int_equal(kr_kv_store_init_dtype(&src, LAYERS, D, CAP_SRC, dts[t], 26, &err), KR_OK);
        assert_int_equal(kr_kv_store_init_dtype(&dst, LAYERS, D, CAP_DST, dts[t], 26, &err), KR_OK);
        assert_int_equal(kr_kv_store_init_dtype(&copy, LAYERS, D, CAP_SRC, dts[t], 26, &err),
                         KR_OK);
        assert_int_equal(blocks_used(), used0 + 3 + 4 + 3);
        fill(&src, CAP_SRC);
        /* A reference copy of src's rows, to check them after src is gone. */
        assert_int_equal(kr_kv_store_share_prefix(&copy, &src, 0, &err), KR_OK);
        for (int l = 0; l < LAYERS; l++) {
            float *k = malloc((size_t)CAP_SRC * D * sizeof(float)),
                  *v = malloc((size_t)CAP_SRC * D * sizeof(float));
            kr_kv_store_read(&src, l, 0, CAP_SRC, k, v);
            kr_kv_store_write(&copy, l, 0, k, v, CAP_SRC);
            free(k);
            free(v);
        }
        /* Two whole blocks by reference, the 3 rows of the third by copy. */
        assert_int_equal(kr_kv_store_share_prefix(&dst, &src, SHARED, &err), KR_OK);
        assert_int_equal(kr_kv_store_row_refs(&src, 0), 2);
        assert_int_equal(kr_kv_store_row_refs(&dst, BR + 3), 2);
        assert_ptr_equal(dst.blocks[0], src.blocks[0]);
        assert_ptr_equal(dst.blocks[1], src.blocks[1]);
        assert_ptr_not_equal(dst.blocks[2], src.blocks[2]);
        assert_int_equal(kr_kv_store_row_refs(&dst, 2 * BR), 1);
        assert_int_equal(kr_kv_store_row_refs(&src, 2 * BR), 1);
        assert_int_equal(blocks_used(), used0 + 3 + 2 + 3); /* dst dropped its first two */
        /* Each holder is charged the blocks it holds, shared ones included. */
        assert_int_equal(kr_kv_store_bytes(&dst), 4 * dst.block_bytes);
        assert_int_equal(kr_kv_store_bytes(&src), 3 * src.block_bytes);
        expect_same_rows(&dst, &src, SHARED);
        /* Sharing again is a no-op on the counts. */
        assert_int_equal(kr_kv_store_share_prefix(&dst, &src, SHARED, &err), KR_OK);
        assert_int_equal(kr_kv_store_row_refs(&src, 0), 2);
        /* Rows past the shared prefix are dst's own: writing them leaves src alone. */
        float *row = rnd_buf(2 * D);
        kr_kv_store_write(&dst, 0, SHARED, row, row + D, 1);
        free(row);
        expect_same_rows(&src, &copy, CAP_SRC);
        /* The first holder goes: its unshared block is freed, the shared ones live on. */
        kr_kv_store_release(&src);
        assert_int_equal(blocks_used(), used0 + 4 + 3);
        assert_int_equal(kr_kv_store_row_refs(&dst, 0), 1);
        assert_int_equal(kr_kv_store_row_refs(&dst, BR), 1);
        expect_same_rows(&dst, &copy, SHARED);
        /* The last holder frees them. */
        kr_kv_store_release(&dst);
        assert_int_equal(blocks_used(), used0 + 3);
        kr_kv_store_release(&copy);
        assert_int_equal(blocks_used(), used0);
    }
    /* Mismatched shapes are refused. */
    kr_kv_store a, b;
    kr_error err = { 0 };
    assert_int_equal(kr_kv_store_init(&a, 2, 52, 20, &err), KR_OK);
    assert_int_equal(kr_kv_store_init(&b, 2, 104, 20, &err), KR_OK);
    assert_int_equal(kr_kv_store_share_prefix(&a, &b, 16, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_kv_store_share_prefix(&a, &a, 21, &err), KR_ERR_INVALID_ARG);
    kr_kv_store_release(&a);
    kr_kv_store_release(&b);
}

/* A partial shared block is copied into a block dst does not share with anyone else. */
static void test_share_partial_copy_on_shared_block(void **state) {
    (void)state;
    kr_kv_store a, b, c;
    kr_error err = { 0 };
    assert_int_equal(kr_kv_store_init(&a, 1, 52, 32, &err), KR_OK);
    assert_int_equal(kr_kv_store_init(&b, 1, 52, 32, &err), KR_OK);
    assert_int_equal(kr_kv_store_init(&c, 1, 52, 32, &err), KR_OK);
    fill(&a, 32);
    fill(&c, 32);
    assert_int_equal(kr_kv_store_share_prefix(&b, &a, 32, &err), KR_OK); /* b is all a's */
    assert_int_equal(kr_kv_store_share_prefix(&b, &c, 20, &err), KR_OK);
    assert_int_equal(kr_kv_store_row_refs(&a, 0), 1); /* b's block 0 now c's */
    assert_int_equal(kr_kv_store_row_refs(&a, BR), 1); /* b took its own for the copy */
    assert_int_equal(kr_kv_store_row_refs(&c, 0), 2);
    expect_same_rows(&b, &c, 20);
    kr_kv_store_release(&a);
    kr_kv_store_release(&b);
    kr_kv_store_release(&c);
}

/* kr_attention_rows over stores (keys split per block, several refs, rows grouped over a
 * shared first ref, a causal group) equals kr_attend_f32 over one contiguous copy of each
 * row's keys, bit for bit. */
static void test_attention_blocks_vs_contiguous(void **state) {
    (void)state;
    enum { LAYERS = 2, HD = 52, H = 2, D = HD * H, CAP = 75, NQ = 9 };
    kr_kv_store ctx, own;
    kr_error err = { 0 };
    assert_int_equal(kr_kv_store_init(&ctx, LAYERS, D, CAP, &err), KR_OK);
    assert_int_equal(kr_kv_store_init(&own, LAYERS, D, CAP, &err), KR_OK);
    fill(&ctx, CAP);
    fill(&own, CAP);
    kr_attn_keys keys[NQ];
    /* Rows 0..3: same context rows [3, 61), then own rows of their own (grouped rows). */
    for (int r = 0; r < 4; r++) {
        keys[r].n = 2;
        keys[r].ref[0] = (kr_kv_ref){ &ctx, 3, 58 };
        keys[r].ref[1] = (kr_kv_ref){ &own, 10 * r + 1, 5 + 3 * r };
    }
    /* Rows 4..7: a causal chunk over context [0, 40) and own rows 30 .. 30 + i. */
    for (int i = 0; i < 4; i++) {
        keys[4 + i].n = 2;
        keys[4 + i].ref[0] = (kr_kv_ref){ &ctx, 0, 40 };
        keys[4 + i].ref[1] = (kr_kv_ref){ &own, 30, 14 + i };
    }
    /* Row 8: alone, three refs. */
    keys[8].n = 3;
    keys[8].ref[0] = (kr_kv_ref){ &ctx, 17, 1 };
    keys[8].ref[1] = (kr_kv_ref){ &own, 0, 33 };
    keys[8].ref[2] = (kr_kv_ref){ &ctx, 47, CAP - 47 };
    float *q = rnd_buf((size_t)NQ * D), out[NQ * D], want[NQ * D];
    float *kc = malloc((size_t)3 * CAP * D * sizeof(float)),
          *vc = malloc((size_t)3 * CAP * D * sizeof(float));
    float *scratch = malloc((size_t)3 * CAP * sizeof(float));
    assert_true(kc && vc && scratch);
    kr_exec *ex = NULL;
    assert_int_equal(kr_exec_create(1, 0, &ex, &err), KR_OK);
    for (int layer = 0; layer < LAYERS; layer++) {
        assert_int_equal(kr_attention_rows(ex, NQ, keys, layer, H, HD, D, q, out, &err), KR_OK);
        for (int r = 0; r < NQ; r++) {
            int n = 0;
            for (int i = 0; i < keys[r].n; i++) {
                const kr_kv_ref *ref = &keys[r].ref[i];
                kr_kv_store_read(ref->store, layer, ref->start, ref->n, kc + (size_t)n * D,
                                 vc + (size_t)n * D);
                n += ref->n;
            }
            for (int h = 0; h < H; h++) {
                kr_kv_span sp = { kc + h * HD, vc + h * HD, n, D };
                kr_attend_f32(q + (size_t)r * D + h * HD, HD, 1.0f / sqrtf((float)HD), &sp, 1,
                              scratch, want + (size_t)r * D + h * HD);
            }
        }
        assert_memory_equal(out, want, sizeof out);
    }
    free(q);
    free(kc);
    free(vc);
    kr_exec_free(ex);
    free(scratch);
    kr_kv_store_release(&ctx);
    kr_kv_store_release(&own);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addressing),
        cmocka_unit_test(test_large_blocks_in_regions),
        cmocka_unit_test(test_region_block_freed_early_drops_pages),
        cmocka_unit_test(test_region_alloc_touches_no_page),
        cmocka_unit_test(test_region_blocks_across_threads),
        cmocka_unit_test(test_keep_follows_reserved_budget),
        cmocka_unit_test(test_keep_counts_blocks_in_use),
        cmocka_unit_test(test_decay_returns_a_burst),
        cmocka_unit_test(test_round_trip_dtypes),
        cmocka_unit_test(test_share_prefix),
        cmocka_unit_test(test_share_partial_copy_on_shared_block),
        cmocka_unit_test(test_attention_blocks_vs_contiguous),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
