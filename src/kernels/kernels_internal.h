/*
 * kernels/kernels_internal.h — helpers shared by the kernel variants (not part of the API).
 */
#ifndef KR_KERNELS_INTERNAL_H
#define KR_KERNELS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* GEMM threads split N in units of this many columns, for every ISA, so a thread's slice
 * always starts on a register-tile boundary. The split never changes a result (each C
 * element's reduction order is fixed by K alone); it only decides who computes it. */
#define KR_GEMM_NUNIT 16

/* Columns [*n0, *n1) of N that thread ith of nth owns: contiguous whole units, balanced. */
static inline void kr_gemm_split(int N, int ith, int nth, int *n0, int *n1) {
    if (nth < 1) nth = 1;
    int units = (N + KR_GEMM_NUNIT - 1) / KR_GEMM_NUNIT;
    int u0 = (int)((long long)units * ith / nth);
    int u1 = (int)((long long)units * (ith + 1) / nth);
    int a = u0 * KR_GEMM_NUNIT, b = u1 * KR_GEMM_NUNIT;
    *n0 = a < N ? a : N;
    *n1 = b < N ? b : N;
}

/* Rows of C per thread when the NN / TN GEMMs split M: a multiple of every register tile's
 * rows (12 AVX-512, 6 AVX2) and of 16. */
#define KR_GEMM_NN_MUNIT 48

/* The slice of C an NN / TN GEMM thread computes: rows [m0, m1) × columns [n0, n1). The
 * larger of M and N is cut (threads then pack only their part of the larger operand and all
 * of the smaller one), M in units of KR_GEMM_NN_MUNIT rows, N as kr_gemm_split. A result
 * never depends on the split: each C element is computed whole by one thread. */
static inline void kr_gemm_nn_split(int M, int N, int ith, int nth, int *m0, int *m1, int *n0,
                                    int *n1) {
    if (nth < 1) nth = 1;
    *m0 = 0, *m1 = M, *n0 = 0, *n1 = N;
    if (M > N && M >= nth * KR_GEMM_NN_MUNIT) {
        int units = (M + KR_GEMM_NN_MUNIT - 1) / KR_GEMM_NN_MUNIT;
        int a = (int)((long long)units * ith / nth) * KR_GEMM_NN_MUNIT;
        int b = (int)((long long)units * (ith + 1) / nth) * KR_GEMM_NN_MUNIT;
        *m0 = a < M ? a : M;
        *m1 = b < M ? b : M;
    } else {
        kr_gemm_split(N, ith, nth, n0, n1);
    }
}

/* ---- Attention of one head over a sequence (train_kernels.h): the most queries a block
 * holds (the score tile's three vectors, AVX-512) and the most rows a register tile covers; the
 * scratch size counts with both, so it is the same for every variant. */
enum { KR_AH_QB_MAX = 48, KR_AH_ROWS_MAX = 24 };

/* ---- Per-thread scratch (thread_scratch.c). */
typedef enum kr_scratch_slot {
    KR_SCRATCH_GEMM_F32, /* gemm_avx512.c, gemm_avx2.c: packed W block + A row tile */
    KR_SCRATCH_QGEMM_AMX, /* qgemm_int8_avx512_amx.c: B panels, A tail, C tiles */
    KR_SCRATCH_QGEMM_WIDE, /* qgemm_int8_avx2.c: widened W block + A row tile */
    KR_SCRATCH_QGEMM_PANELS, /* qgemm_int8_avx512.c / _avx2.c (AVX-VNNI): one W block as panels */
    KR_SCRATCH_GEMM_NN, /* gemm_nn_body.h: packed B block + A block */
    KR_SCRATCH_SLOTS
} kr_scratch_slot;

/* The calling thread's buffer of this slot, at least `bytes` long and 64-byte aligned; its
 * contents are not kept when it grows. NULL when memory cannot be had (the caller then takes
 * a path without it). Borrowed: valid on this thread until the next call for the same slot. */
void *kr_thread_scratch(kr_scratch_slot slot, size_t bytes);

/* ---- Multi-query attention (kr_attend_multi_f32_*): shared keys are processed in blocks of
 * about 8 KB of K (then V) rows, each block used by every query of a tile of KR_ATTN_TILE
 * queries before the next block is read. Neither size changes a result. */
enum {
    KR_ATTN_TILE = 64, /* queries per pass; bounds the per-query sums kept on the stack */
    KR_ATTN_PACK = 4096, /* floats of the block copy buffer (16 KB, on the stack) */
};

/* Walks the first n_max keys of a span list in blocks of at most bk keys, in key order, never
 * crossing a span: the causal kernels' loop, once for the scores and once for the values. */
typedef struct kr_key_blocks {
    const kr_kv_span *spans;
    int n_spans, n_max, bk;
    int s, base, j0; /* the next block: span s, its key j0; base = keys in spans before s */
} kr_key_blocks;

static inline kr_key_blocks kr_key_blocks_start(const kr_kv_span *spans, int n_spans, int n_max,
                                                int bk) {
    return (kr_key_blocks){ spans, n_spans, n_max, bk, 0, 0, 0 };
}

/* The next block: its span *sp, first key j0 within it, global key index *key0 and count *nk;
 * 0 when the n_max keys are done. */
static inline int kr_key_blocks_next(kr_key_blocks *it, const kr_kv_span **sp, int *j0, int *key0,
                                     int *nk) {
    while (it->s < it->n_spans && it->j0 >= it->spans[it->s].n) {
        it->base += it->spans[it->s++].n;
        it->j0 = 0;
    }
    if (it->s >= it->n_spans || it->base + it->j0 >= it->n_max) return 0;
    const kr_kv_span *cur = &it->spans[it->s];
    int n = cur->n - it->j0 < it->bk ? cur->n - it->j0 : it->bk;
    int left = it->n_max - (it->base + it->j0);
    *sp = cur;
    *j0 = it->j0;
    *key0 = it->base + it->j0;
    *nk = n < left ? n : left;
    it->j0 += it->bk;
    return 1;
}

/* c[i] = how many of keys [key0, key0 + nk) query i takes when it sees its first n_keys[i]. */
static inline void kr_causal_counts(int nq, const int *n_keys, int key0, int nk, int *c) {
    for (int i = 0; i < nq; i++) {
        int r = n_keys[i] - key0;
        c[i] = r < 0 ? 0 : r > nk ? nk : r;
    }
}

/* A causal call one query at a time through a multi-query kernel: query i over the spans cut
 * after its n_keys[i] keys (the whole spans before the cut as shared, the cut one as its own),
 * which is the single-query kernel's result (kernels.h). scratch: one row of n_keys[i]. */
static inline void kr_attend_causal_by_rows(kr_attend_multi_f32_fn multi, int nq,
                                            const float *const *q, int head_dim, float scale,
                                            const kr_kv_span *spans, int n_spans, const int *n_keys,
                                            float *scratch, float *const *out) {
    for (int i = 0; i < nq; i++) {
        int whole = 0, left = n_keys[i];
        while (whole < n_spans && spans[whole].n <= left) left -= spans[whole++].n;
        kr_kv_span cut = { NULL, NULL, 0, 0 };
        const kr_kv_span *own = &cut;
        int n_own = 0;
        if (left > 0 && whole < n_spans) {
            cut = spans[whole];
            cut.n = left;
            n_own = 1;
        }
        multi(1, q + i, head_dim, scale, spans, whole, &own, &n_own, scratch,
              n_keys[i] > 1 ? n_keys[i] : 1, out + i);
    }
}

/* Keys per shared block: a multiple of `group` (the variant's score group, so blocks cut a
 * span where the single-query kernel's groups are cut too) near 2048 floats. */
static inline int kr_attn_block_keys(int head_dim, int group) {
    int b = 2048 / (head_dim > 0 ? head_dim : 1);
    b -= b % group;
    return b < group ? group : b > 256 ? 256 : b;
}

/* L1 sets (of the 64 that 32–48 KB, 64-byte-line L1s have) in which rows `stride` floats
 * apart start. Rows a multiple of 64 bytes apart revisit a set every 64/gcd(lines, 64) rows;
 * other strides drift across all of them. */
static inline int kr_l1_sets(int stride) {
    if (stride <= 0 || stride % 16) return 64;
    int g = stride / 16, sets = 64;
    while (g % 2 == 0 && sets > 1) {
        g /= 2;
        sets /= 2;
    }
    return sets;
}

/* Rows [j0, j0 + nk) of a K or V matrix (rows `stride` floats apart, head_dim used); returns
 * where to read them and their stride. Rows of a [positions][d_model] matrix are often a
 * power of two bytes apart (d_model 512 → 2 KB: 2 sets), so a block's rows would fill a few
 * L1 sets and evict each other before the next query comes back to them; then the rows are
 * copied contiguously into pack (measured 2× on the whole kernel). Otherwise the copy only
 * costs (~5%: it stalls on the first read where the queries' FMAs would hide it), so the rows
 * are read in place. A copy changes no value, hence no result. */
static inline const float *kr_attn_rows(const float *rows, int stride, int j0, int nk, int head_dim,
                                        float *pack, int *out_stride) {
    const float *src = rows + (size_t)j0 * (size_t)stride;
    *out_stride = stride;
    /* > 4 rows per set: over half the ways of an 8-way L1, with q, out and scores to keep */
    if (nk <= 4 * kr_l1_sets(stride) || (size_t)nk * (size_t)head_dim > KR_ATTN_PACK) return src;
    for (int j = 0; j < nk; j++) {
        float *d = pack + (size_t)j * (size_t)head_dim;
        const float *r = src + (size_t)j * (size_t)stride;
        int c = 0;
        /* Fixed 64-byte copies inline as vector moves (a libc call per short row costs as
         * much as the copy). */
        for (; c + 16 <= head_dim; c += 16) memcpy(d + c, r + c, 16 * sizeof *d);
        if (c < head_dim) memcpy(d + c, r + c, (size_t)(head_dim - c) * sizeof *d);
    }
    *out_stride = head_dim;
    return pack;
}

/* Key (or value) rows a kernel prefetches ahead of the ones it reads: the rows it reads next
 * (KR_ATTN_PF_ROWS at a time where it reads keys one by one), KR_ATTN_PF_AHEAD rows later,
 * across spans. In decode a step's KV rows come from memory (the weights streamed since the
 * last step evicted them), one head's few lines a row at a stride of a whole d_model: no
 * pattern the hardware prefetcher follows. Into L2 (T1): an L1 prefetch holds one of the few
 * L1 miss buffers until its line arrives, and read no faster than none. Cold KV, 2 threads,
 * Zen 4, one query and 456 keys a head: 0.10-0.16 → 0.05-0.08 ms a layer. A prefetch is a
 * hint: no value, hence no result, depends on it. */
enum { KR_ATTN_PF_AHEAD = 32, KR_ATTN_PF_ROWS = 16 };

/* Asks for the line holding p in L2. An asm statement on x86: GCC 12 -O2 deletes a loop
 * whose only statements are __builtin_prefetch (as if it did nothing), which the loops below
 * are. */
static inline void kr_prefetch_l2(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht1 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 0, 2);
#endif
}

/* Prefetches the head_dim floats (at k, or at v when values) of the n rows that start
 * KR_ATTN_PF_AHEAD rows after row j of span s (stopping at that span's end). */
static inline void kr_attn_prefetch(const kr_kv_span *spans, int n_spans, int s, int j, int n,
                                    int values, int head_dim) {
    j += KR_ATTN_PF_AHEAD;
    while (s < n_spans && j >= spans[s].n) j -= spans[s++].n;
    if (s >= n_spans) return;
    const kr_kv_span *sp = &spans[s];
    const float *row = (values ? sp->v : sp->k) + (size_t)j * (size_t)sp->stride;
    int end = j + n < sp->n ? j + n : sp->n;
    for (; j < end; j++, row += sp->stride) /* each 64-byte line of the row's head_dim floats */
        for (uintptr_t l = (uintptr_t)row & ~(uintptr_t)63; l <= (uintptr_t)(row + head_dim - 1);
             l += 64)
            kr_prefetch_l2((const void *)l);
}

/* Rows [0, KR_ATTN_PF_AHEAD) of the spans: what a kernel reads first. */
static inline void kr_attn_prefetch_start(const kr_kv_span *spans, int n_spans, int values,
                                          int head_dim) {
    for (int j = 0; j < KR_ATTN_PF_AHEAD; j += KR_ATTN_PF_ROWS)
        kr_attn_prefetch(spans, n_spans, 0, j - KR_ATTN_PF_AHEAD, KR_ATTN_PF_ROWS, values,
                         head_dim);
}

#endif
