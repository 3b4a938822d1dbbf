/*
 * kernels/quant — quantised weight formats of a Linear layer and the GEMMs that run them.
 *
 * A kr_qmat is one Linear weight W[n][k] (n outputs, k inputs) in one of these formats:
 *
 *   BF16  data: uint16 [n][kp], kp = round_up(k, 32), padding 0.  w = bf16 → f32 (exact).
 *   INT8  data: int8 [n][kp], kp = round_up(k, 64), padding 0; symmetric per output row:
 *         w ≈ scale[n] · q, q in [-127, 127]; row_sum[n] = Σ_j q[n][j] (for the activation
 *         zero point). Run as W8A8: activations quantised per row on the fly (below).
 *   FP8   data: uint8 e4m3fn [n][kp], kp = round_up(k, 64), padding 0; w ≈ scale[n] · e4m3(q)
 *         (scale maps the row's max |w| to 448). Run as W8A16: dequantised in the kernel.
 *   Q4    data: uint8 [n][kp/2], kp = round_up(k, group), group 32 or 64. Within each run of
 *         32 consecutive elements starting at j0 (a 64-group is two runs), byte j0/2 + i
 *         (i < 16) holds element j0 + i in its low nibble and element j0 + 16 + i in its high
 *         nibble. Per group g = j / group: w = f16(gscale[n][g]) · (float)(q − gzero[n][g]),
 *         q and gzero in 0..15 (asymmetric, zero point an integer). Padding elements have
 *         q = gzero, i.e. w = 0.
 *
 * in_scale (optional, any format): activations are multiplied by in_scale[j] before the
 * product. Smoothing (SmoothQuant) and activation-aware scaling (AWQ) multiply weight column j
 * by a factor before quantising; in_scale is its inverse, so the product is unchanged in exact
 * arithmetic.
 *
 * Determinism: every variant of a dequantiser produces bit-identical f32 weights; the W8A8
 * integer dot is exact, and its f32 epilogue uses the same operations in every variant. So a
 * quantised GEMM keeps the row-determinism contract of kernels.h (a row's result does not
 * depend on M, its position or the thread split), and for INT8 the result is also identical
 * across ISAs.
 */
#ifndef KR_KERNELS_QUANT_H
#define KR_KERNELS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kronos.h"

typedef enum kr_wfmt {
    KR_WFMT_F32 = 0,
    KR_WFMT_BF16,
    KR_WFMT_INT8,
    KR_WFMT_FP8,
    KR_WFMT_Q4,
    KR_WFMT_COUNT
} kr_wfmt;

const char *kr_wfmt_name(kr_wfmt fmt); /* "f32", "bf16", "int8", "fp8", "q4" */
/* 0 on success; -1 if the name is unknown. */
int kr_wfmt_parse(const char *name, kr_wfmt *out);

#define KR_Q4_GROUP_DEFAULT 32

typedef struct kr_qmat {
    kr_wfmt fmt; /* never F32 for a kr_qmat in use */
    int n, k; /* outputs × inputs */
    int kp; /* padded row length in elements (see the format table) */
    int group; /* Q4 only: 32 or 64 */
    const void *data;
    const float *scale; /* INT8, FP8: [n] */
    const int32_t *row_sum; /* INT8: [n] */
    const uint16_t *gscale; /* Q4: f16 [n][kp / group] */
    const uint8_t *gzero; /* Q4: [n][kp / group] */
    const float *in_scale; /* optional [k] */
} kr_qmat;

/* Row padding of a format (32, 64 or the Q4 group); 1 for F32. */
int kr_wfmt_row_align(kr_wfmt fmt, int group);

/* ---- Scalar conversions (exact definitions; used when quantising and as references). */
uint16_t kr_f32_to_bf16(float x); /* round to nearest even; NaN stays NaN */
float kr_bf16_to_f32(uint16_t h);
uint16_t kr_f32_to_f16(float x); /* IEEE binary16, round to nearest even, subnormals, inf */
float kr_f16_to_f32(uint16_t h);
uint8_t kr_f32_to_e4m3(float x); /* e4m3fn: RNE, saturates to ±448, NaN → 0x7F */
float kr_e4m3_to_f32(uint8_t b); /* 0x7F / 0xFF → NaN */

/* ---- Quantising a weight (offline / at load time; scalar).
 * w: [n][k] f32 row-major. col_scale (optional [k], > 0): weight column j is multiplied by
 * col_scale[j] before quantising and in_scale[j] = 1 / col_scale[j] is stored. group: Q4 only
 * (32 or 64; 0 = KR_Q4_GROUP_DEFAULT). The result owns one allocation (all arrays). */
typedef struct kr_qmat_owned {
    kr_qmat m;
    void *mem;
    size_t bytes; /* bytes of data + scales + zero points + row sums + in_scale */
} kr_qmat_owned;
kr_status kr_qmat_quantize(kr_wfmt fmt, int n, int k, const float *w, const float *col_scale,
                           int group, kr_qmat_owned *out, kr_error *err);
void kr_qmat_owned_free(kr_qmat_owned *q);

/* ---- Building a weight from integer codes chosen elsewhere (GPTQ, model/gptq.h), so that
 * any quantiser produces exactly the arrays the kernels run.
 * codes: [n][k]; INT8: -127..127 with row_scale [n] (w = row_scale[r] · code); Q4: 0..15 with
 * gscale (f16) / gzero [n][ceil(k / group)] (w = f16(gscale) · (code − gzero)). Codes, scales
 * and zero points out of range are refused naming the row. */
kr_status kr_qmat_from_codes(kr_wfmt fmt, int n, int k, int group, const int8_t *codes,
                             const float *row_scale, const uint16_t *gscale, const uint8_t *gzero,
                             kr_qmat_owned *out, kr_error *err);
/* The Q4 group parameters kr_qmat_quantize picks for the values x[0..len): the range [min(0,
 * min x), max(0, max x)] over 15 steps, the scale rounded up to f16, the zero point rounded.
 * Returns -1 (nothing written) if the scale does not fit an f16. */
int kr_q4_group_params(const float *x, int len, uint16_t *gscale, uint8_t *gzero);
/* The Q4 code of x with scale s (= f16 gscale as f32) and zero point zero, as kr_qmat_quantize
 * rounds it: clamp(round(x / s) + zero, 0, 15). */
int kr_q4_code(float x, float s, int zero);
/* Bytes a quantised weight occupies (same formula as kr_qmat_owned.bytes). */
KR_PRIVATE size_t kr_qmat_bytes(const kr_qmat *m);

/* ---- Dequantising rows [r0, r1) of W into out[(r - r0)][0 .. k) (row stride ldo floats).
 * Every variant gives bit-identical values. BF16, INT8, FP8 and Q4. */
typedef void (*kr_dequant_rows_fn)(const kr_qmat *w, int r0, int r1, float *out, int ldo);
void kr_dequant_rows(const kr_qmat *w, int r0, int r1, float *out, int ldo); /* dispatched */
void kr_dequant_rows_scalar(const kr_qmat *w, int r0, int r1, float *out, int ldo);
void kr_dequant_rows_avx2(const kr_qmat *w, int r0, int r1, float *out, int ldo);
void kr_dequant_rows_avx512(const kr_qmat *w, int r0, int r1, float *out, int ldo);

/* ---- Weight-only GEMM (BF16 without AVX512_BF16, FP8, Q4; any format works):
 * C = A·Wᵀ + bias with W dequantised panel by panel into `panel` (panel_floats >= k; more
 * gives larger panels) and multiplied by the dispatched kr_gemm_f32. A is used as given
 * (in_scale must already be applied by the caller). Threads split N like kr_gemm_f32. The
 * result is bit-identical to kr_gemm_f32 on the fully dequantised W. */
void kr_qgemm_wonly(int M, const kr_qmat *w, const float *A, int lda, const float *bias, float *C,
                    int ldc, float *panel, size_t panel_floats, int ith, int nth);

/* ---- W8A8 (INT8).
 * Activation rows quantised asymmetrically to u8: per row m, lo = min(0, min_j x), hi =
 * max(0, max_j x) with x_j = A[m][j] · in_scale[j] (in_scale NULL: A[m][j]); s = (hi − lo) /
 * 255 (s = 1 if hi == lo); inv = 1 / s; z = (int32)nearbyintf(−lo · inv) clamped to [0, 255];
 * q_j = clamp((int32)nearbyintf(x_j · inv) + z, 0, 255). Padding columns j in [k, kp) are 0.
 * scale[m] = s, zero[m] = z. Rows [m0, m1) only (threads split M). Bit-identical across ISAs. */
typedef void (*kr_quant_act_u8_fn)(int m0, int m1, int k, int kp, const float *A, int lda,
                                   const float *in_scale, uint8_t *q, float *scale, int32_t *zero);
void kr_quant_act_u8_scalar(int m0, int m1, int k, int kp, const float *A, int lda,
                            const float *in_scale, uint8_t *q, float *scale, int32_t *zero);
void kr_quant_act_u8_avx2(int m0, int m1, int k, int kp, const float *A, int lda,
                          const float *in_scale, uint8_t *q, float *scale, int32_t *zero);
void kr_quant_act_u8_avx512(int m0, int m1, int k, int kp, const float *A, int lda,
                            const float *in_scale, uint8_t *q, float *scale, int32_t *zero);
/* C[m][n] = (ascale[m] · w->scale[n]) · (float)(Σ_j aq[m][j]·q[n][j] − azero[m]·row_sum[n])
 *           (+ bias[n]), evaluated in exactly that order; aq rows are w->kp bytes apart.
 * Threads split N (kr_gemm_split). Bit-identical across ISAs (the integer sum is exact). The
 * AVX-512 variant uses VPDPBUSD when the CPU has AVX512_VNNI, VPMADDWD otherwise. */
typedef void (*kr_qgemm_int8_fn)(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                                 const int32_t *azero, const float *bias, float *C, int ldc,
                                 int ith, int nth);
void kr_qgemm_int8_scalar(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                          const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                          int nth);
void kr_qgemm_int8_avx2(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                        const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                        int nth);
void kr_qgemm_int8_avx512(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                          const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                          int nth);
/* The AVX2 row's GEMM on a CPU with AVX-VNNI (VEX VPDPBUSD on ymm; no AVX-512 needed). Only
 * call when kr_cpu_has_avx_vnni(); the dispatched AVX2 entry runs it then. */
void kr_qgemm_int8_avxvnni(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                           const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                           int nth);
/* The same on Intel AMX (TDPBUSD on 16×16 tiles; each thread packs its N slice of W into the
 * tile layout per call, in a buffer of its own). Only call when kr_cpu_has_amx_int8(); the
 * dispatched AVX-512 entry runs it for M from a threshold, where the packing has paid off. */
void kr_qgemm_int8_amx(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                       const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                       int nth);

/* ---- BF16 × BF16 dot products (AVX512_BF16, VDPBF16PS).
 * Activation rows [m0, m1) rounded to bf16 (RNE, after in_scale) into out rows of w->kp
 * (padding 0). */
void kr_quant_act_bf16_scalar(int m0, int m1, int k, int kp, const float *A, int lda,
                              const float *in_scale, uint16_t *out);
void kr_quant_act_bf16_avx512(int m0, int m1, int k, int kp, const float *A, int lda,
                              const float *in_scale, uint16_t *out);
/* C = Abf16 · Wbf16ᵀ + bias, f32 accumulation; abf rows are w->kp apart. Reduction order
 * depends on kp only. Only call when kr_cpu_has_avx512_bf16(). */
void kr_qgemm_bf16_avx512bf16(int M, const kr_qmat *w, const uint16_t *abf, const float *bias,
                              float *C, int ldc, int ith, int nth);
/* The same products summed in plain f32 (reference for tests). */
void kr_qgemm_bf16_scalar(int M, const kr_qmat *w, const uint16_t *abf, const float *bias, float *C,
                          int ldc, int ith, int nth);

/* CPU features beyond the kr_isa levels (0 when KRONOS_ISA lowered the level below AVX-512). */
int kr_cpu_has_avx512_vnni(void);
int kr_cpu_has_avx512_bf16(void);
/* AVX-VNNI (the VEX form, on ymm) usable at the active level, AVX2 or above, built in, and
 * KRONOS_AVXVNNI is not "0". The AVX2 row's int8 GEMM uses it. */
int kr_cpu_has_avx_vnni(void);
/* AMX-TILE + AMX-INT8 usable: the CPU has them, the OS saves tile state and granted this
 * process the tile data (Linux arch_prctl), and KRONOS_AMX is not "0". */
int kr_cpu_has_amx_int8(void);

/* ---- The dispatched quantised Linear, in two phases so threads can split both:
 *   1. kr_qgemm_prepare over row slices [m0, m1) of A (activation quantisation / in_scale),
 *   2. kr_qgemm_run over N slices (ith of nth).
 * scratch: kr_qgemm_scratch_bytes(w, M, nth) bytes, 64-byte aligned, shared by both phases. */
size_t kr_qgemm_scratch_bytes(const kr_qmat *w, int M, int nth);
/* 0 when kr_qgemm_prepare has nothing to do for w (weight-only without in_scale), so a
 * caller may skip that phase (and its thread-pool round trip on every decode step). */
int kr_qgemm_needs_prepare(const kr_qmat *w);
void kr_qgemm_prepare(const kr_qmat *w, int M, const float *A, int lda, void *scratch, int m0,
                      int m1);
void kr_qgemm_run(const kr_qmat *w, int M, const float *A, int lda, const float *bias, float *C,
                  int ldc, void *scratch, int ith, int nth);
/* 1 when kr_qgemm_run keeps nothing per slice in scratch (int8 and bf16 products), so a caller
 * may cut N into more slices than it has threads (ith of any nth, scratch sized for M alone);
 * 0 for the weight-only path, whose dequantisation panel is per ith. */
int kr_qgemm_any_split(const kr_qmat *w);
/* kr_gemm_f32_reserve for the quantised Linear: the calling thread's kernel buffer for any
 * slice of w at M rows, allocated now. */
void kr_qgemm_reserve(const kr_qmat *w, int M);

#endif
