/*
 * kernels/dispatch — the kernel dispatch table (dispatch.h) and the dispatched entry points.
 *
 * CPUID says what the CPU has; XGETBV says whether the OS saves the wide registers (a
 * hypervisor can hide them), so both are checked. KRONOS_ISA lowers the choice (never
 * raises it above what the CPU runs). The rows are filled under pthread_once; afterwards each
 * call is one atomic load and an indirect call. Off x86 only the scalar row is ever chosen
 * (isa_fallback.c gives the other names a body so this table still links).
 */
#include "kernels/dispatch.h"
#include "kernels/qgemm_int8_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* The rows, complete but for the CPU-feature entries (bf16 products, the AMX int8 picker),
 * which init_once adds. */
#define KR_TABLE_ROW(ISA, sfx)                                                                    \
    {                                                                                             \
        .isa = ISA, .gemm_f32 = kr_gemm_f32_##sfx, .gemm_nn_f32 = kr_gemm_nn_f32_##sfx,           \
        .gemm_tn_f32 = kr_gemm_tn_f32_##sfx, .gemm_nn_bias_f32 = kr_gemm_nn_bias_f32_##sfx,       \
        .attend_f32 = kr_attend_f32_##sfx, .attend_multi_f32 = kr_attend_multi_f32_##sfx,         \
        .attend_causal_f32 = kr_attend_causal_f32_##sfx, .rmsnorm_f32 = kr_rmsnorm_f32_##sfx,     \
        .rope_f32 = kr_rope_f32_##sfx, .silu_mul_f32 = kr_silu_mul_f32_##sfx,                     \
        .add_f32 = kr_add_f32_##sfx, .softmax_f32 = kr_softmax_f32_##sfx,                         \
        .dequant_rows = kr_dequant_rows_##sfx, .quant_act_u8 = kr_quant_act_u8_##sfx,             \
        .qgemm_int8 = kr_qgemm_int8_##sfx, .kv_pack_bf16 = kr_kv_pack_bf16_##sfx,                 \
        .kv_unpack_bf16 = kr_kv_unpack_bf16_##sfx, .kv_pack_int8 = kr_kv_pack_int8_##sfx,         \
        .kv_unpack_int8 = kr_kv_unpack_int8_##sfx, .fma_burn = kr_fma_burn_##sfx,                 \
        .attn_head_fwd = kr_attn_head_fwd_##sfx, .attn_head_bwd = kr_attn_head_bwd_##sfx,         \
        .rmsnorm_fwd_rows = kr_rmsnorm_fwd_rows_##sfx,                                            \
        .rmsnorm_apply_rows = kr_rmsnorm_apply_rows_##sfx,                                        \
        .rmsnorm_bwd_rows = kr_rmsnorm_bwd_rows_##sfx,                                            \
        .rmsnorm_gw_cols = kr_rmsnorm_gw_cols_##sfx, .colsum_add_cols = kr_colsum_add_cols_##sfx, \
        .swiglu_bwd = kr_swiglu_bwd_##sfx, .rope_rows = kr_rope_rows_##sfx,                       \
        .softmax_xent_row = kr_softmax_xent_row_##sfx, .xent_grad_row = kr_xent_grad_row_##sfx,   \
        .adamw_f32 = kr_adamw_f32_##sfx,                                                          \
    }

static kr_kernel_table g_tables[KR_ISA_COUNT] = {
    [KR_ISA_SCALAR] = KR_TABLE_ROW(KR_ISA_SCALAR, scalar),
    [KR_ISA_AVX2] = KR_TABLE_ROW(KR_ISA_AVX2, avx2),
    [KR_ISA_AVX512] = KR_TABLE_ROW(KR_ISA_AVX512, avx512),
};

/* The AVX-512 row's packed-A GEMM (NULL in the rows that read A in place). */
static void add_packed_gemm(void) {
    g_tables[KR_ISA_AVX512].gemm_f32_packed_a_floats = kr_gemm_f32_packed_a_floats_avx512;
    g_tables[KR_ISA_AVX512].gemm_f32_pack_a = kr_gemm_f32_pack_a_avx512;
    g_tables[KR_ISA_AVX512].gemm_f32_packed = kr_gemm_f32_packed_avx512;
    g_tables[KR_ISA_AVX512].gemm_f32_reserve = kr_gemm_f32_reserve_avx512;
    g_tables[KR_ISA_AVX2].gemm_f32_reserve = kr_gemm_f32_reserve_avx2;
}
#undef KR_TABLE_ROW

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_supported[KR_ISA_COUNT];
static kr_isa g_best = KR_ISA_SCALAR;
static atomic_int g_active = -1;
static int g_avx512_vnni, g_avx512_bf16; /* extensions of the AVX-512 level */
static int g_avx_vnni; /* AVX-VNNI (VEX, ymm): an extension of the AVX2 level */
static int g_amx_int8; /* AMX-TILE + AMX-INT8 granted to this process (kr_cpu_has_amx_int8) */

#if defined(__x86_64__)
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ __volatile__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void detect_x86(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (int)((c >> 27) & 1), avx = (int)((c >> 28) & 1);
    int fma = (int)((c >> 12) & 1), f16c = (int)((c >> 29) & 1);
    if (!osxsave || !avx) return;
    unsigned long long xcr0 = xgetbv0();
    int ymm_os = (xcr0 & 0x6) == 0x6;
    int zmm_os = (xcr0 & 0xE6) == 0xE6; /* + opmask, ZMM_Hi256, Hi16_ZMM state */
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned max_subleaf = a;
    int avx2 = (int)((b >> 5) & 1);
    int f = (int)((b >> 16) & 1), dq = (int)((b >> 17) & 1);
    int bw = (int)((b >> 30) & 1), vl = (int)((b >> 31) & 1);
    g_supported[KR_ISA_AVX2] = ymm_os && avx2 && fma && f16c;
    g_supported[KR_ISA_AVX512] = g_supported[KR_ISA_AVX2] && zmm_os && f && dq && bw && vl;
    g_avx512_vnni = g_supported[KR_ISA_AVX512] && (int)((c >> 11) & 1);
    int amx = (int)((d >> 24) & 1) && (int)((d >> 25) & 1); /* AMX-TILE, AMX-INT8 */
    int tiles_os = (xcr0 & 0x60000) == 0x60000; /* XTILECFG, XTILEDATA state */
    if (max_subleaf >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        g_avx512_bf16 = g_supported[KR_ISA_AVX512] && (int)((a >> 5) & 1);
        g_avx_vnni = g_supported[KR_ISA_AVX2] && (int)((a >> 4) & 1);
    }
    g_amx_int8 = g_supported[KR_ISA_AVX512] && amx && tiles_os;
}

/* Linux hands out the 8 KB of tile data per process on request (the signal frame grows):
 * without the grant, the first tile instruction faults. Refused e.g. when a thread's
 * sigaltstack is too small for the larger frame; then there is no AMX. */
static int amx_permission(void) {
#if defined(__linux__)
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return 0;
    unsigned long long granted = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &granted) != 0) return 0;
    return (int)((granted >> XFEATURE_XTILEDATA) & 1);
#else
    return 0;
#endif
}
#endif

/* Rows of A from which the AMX int8 GEMM runs instead of VPDPBUSD in place. AMX first packs
 * the thread's W slice (a read and a write of N·kp bytes, memory-bound: ~30 ns per KB from
 * L2, ~70 beyond), which VPDPBUSD never pays; the tiles then cost little per row. Measured
 * (1 thread, interleaved, best of 25, two runs; AMX time / VPDPBUSD time at M = 8, 12, 16):
 *   N = K = 512, W in L2            0.96-1.02  0.67-0.71  0.46-0.55
 *   the same, W cycling over 16 MB  0.86-0.93  0.68-0.75  0.57-0.67
 *   N = 1024, K = 512, W in L2      1.02       0.71       0.56
 *   N = 2048, K = 832, W in L2      1.18-1.23  0.96-0.97  0.79-0.83
 *   the same, W cycling over 20 MB  1.04-1.14  0.85-0.92  0.81
 * From 16 AMX wins on every shape tried; decode (M <= 8) keeps VPDPBUSD. */
enum { KR_AMX_MIN_M = 16 };

void kr_qgemm_int8_avx512_auto(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                               const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                               int nth) {
    if (M >= KR_AMX_MIN_M)
        kr_qgemm_int8_amx(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);
    else
        kr_qgemm_int8_avx512(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);
}

void kr_qgemm_int8_avx512_auto_reserve(int M, const kr_qmat *w) {
    if (M >= KR_AMX_MIN_M) kr_qgemm_int8_amx_reserve(w);
}

static void init_once(void) {
    g_supported[KR_ISA_SCALAR] = 1;
#if defined(__x86_64__)
    detect_x86();
#endif
    kr_isa best = KR_ISA_SCALAR;
    for (int i = KR_ISA_COUNT - 1; i > 0; i--)
        if (g_supported[i]) {
            best = (kr_isa)i;
            break;
        }
    const char *env = getenv("KRONOS_ISA");
    if (env && *env) {
        for (int i = 0; i < KR_ISA_COUNT; i++)
            if (strcmp(env, kr_isa_name((kr_isa)i)) == 0 && i < (int)best) best = (kr_isa)i;
    }
    g_best = best;
    add_packed_gemm();
    g_tables[KR_ISA_AVX2].qgemm_int8_reserve = kr_qgemm_int8_avx2_reserve;
#if defined(__x86_64__)
    g_tables[KR_ISA_AVX512].qgemm_int8_reserve = kr_qgemm_int8_avx512_reserve;
#endif
    if (g_avx512_bf16) {
        g_tables[KR_ISA_AVX512].quant_act_bf16 = kr_quant_act_bf16_avx512;
        g_tables[KR_ISA_AVX512].qgemm_bf16 = kr_qgemm_bf16_avx512bf16;
    }
#if defined(__x86_64__)
    /* KRONOS_AMX=0 keeps the VPDPBUSD path (A/B measurements). */
    const char *amx_env = getenv("KRONOS_AMX");
    if (amx_env && strcmp(amx_env, "0") == 0) g_amx_int8 = 0;
    g_amx_int8 = g_amx_int8 && kr_qgemm_int8_amx_built && amx_permission();
    /* KRONOS_AVXVNNI=0 keeps the AVX2 row on VPMADDWD (what a CPU without AVX-VNNI runs). */
    const char *vnni_env = getenv("KRONOS_AVXVNNI");
    g_avx_vnni =
        g_avx_vnni && kr_qgemm_int8_avxvnni_built && !(vnni_env && strcmp(vnni_env, "0") == 0);
    if (g_avx_vnni) {
        g_tables[KR_ISA_AVX2].qgemm_int8 = kr_qgemm_int8_avxvnni;
        g_tables[KR_ISA_AVX2].qgemm_int8_reserve = kr_qgemm_int8_avxvnni_reserve;
    }
    if (g_amx_int8) {
        g_tables[KR_ISA_AVX512].qgemm_int8 = kr_qgemm_int8_avx512_auto;
        g_tables[KR_ISA_AVX512].qgemm_int8_reserve = kr_qgemm_int8_avx512_auto_reserve;
    }
#endif
    /* The release store publishes the filled rows to every thread that loads g_active. */
    atomic_store_explicit(&g_active, (int)best, memory_order_release);
}

const kr_kernel_table *kr_kernels(void) {
    int a = atomic_load_explicit(&g_active, memory_order_acquire);
    if (a < 0) {
        pthread_once(&g_once, init_once);
        a = atomic_load_explicit(&g_active, memory_order_acquire);
    }
    return &g_tables[a];
}

const kr_kernel_table *kr_kernels_for(kr_isa isa) {
    return kr_isa_supported(isa) ? &g_tables[isa] : NULL;
}

kr_isa kr_isa_best(void) {
    pthread_once(&g_once, init_once);
    return g_best;
}

kr_isa kr_isa_active(void) {
    pthread_once(&g_once, init_once);
    return (kr_isa)atomic_load_explicit(&g_active, memory_order_acquire);
}

int kr_isa_supported(kr_isa isa) {
    pthread_once(&g_once, init_once);
    return (int)isa >= 0 && isa < KR_ISA_COUNT && g_supported[isa];
}

kr_isa kr_isa_set(kr_isa isa) {
    if (kr_isa_supported(isa)) atomic_store_explicit(&g_active, (int)isa, memory_order_release);
    return kr_isa_active();
}

int kr_cpu_has_avx512_vnni(void) { return kr_isa_active() == KR_ISA_AVX512 && g_avx512_vnni; }

int kr_cpu_has_avx512_bf16(void) { return kr_isa_active() == KR_ISA_AVX512 && g_avx512_bf16; }

int kr_cpu_has_avx_vnni(void) { return kr_isa_active() >= KR_ISA_AVX2 && g_avx_vnni; }

int kr_cpu_has_amx_int8(void) { return kr_isa_active() == KR_ISA_AVX512 && g_amx_int8; }

const char *kr_isa_name(kr_isa isa) {
    switch (isa) {
    case KR_ISA_SCALAR: return "scalar";
    case KR_ISA_AVX2: return "avx2";
    case KR_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

/* ---- the dispatched entry points of every family */

void kr_gemm_f32(int M, int N, int K, const float *A, int lda, const float *W, const float *bias,
                 float *C, int ldc, int ith, int nth) {
    kr_kernels()->gemm_f32(M, N, K, A, lda, W, bias, C, ldc, ith, nth);
}

void kr_gemm_nn_f32(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                    int ldc, int accumulate, int ith, int nth) {
    kr_kernels()->gemm_nn_f32(M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}

void kr_gemm_tn_f32(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                    int ldc, int accumulate, int ith, int nth) {
    kr_kernels()->gemm_tn_f32(M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}

void kr_gemm_nn_bias_f32(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         const float *bias, float *C, int ldc, int ith, int nth) {
    kr_kernels()->gemm_nn_bias_f32(M, N, K, A, lda, B, ldb, bias, C, ldc, ith, nth);
}

size_t kr_gemm_f32_packed_a_floats(int M, int K) {
    const kr_kernel_table *t = kr_kernels();
    return t->gemm_f32_packed_a_floats ? t->gemm_f32_packed_a_floats(M, K) : 0;
}

void kr_gemm_f32_reserve(int M, int K) {
    const kr_kernel_table *t = kr_kernels();
    if (t->gemm_f32_reserve) t->gemm_f32_reserve(M, K);
}

void kr_gemm_f32_pack_a(int M, int K, const float *A, int lda, float *pa, int m0, int m1) {
    const kr_kernel_table *t = kr_kernels();
    if (t->gemm_f32_pack_a) t->gemm_f32_pack_a(M, K, A, lda, pa, m0, m1);
}

void kr_gemm_f32_packed(int M, int N, int K, const float *A, int lda, const float *pa,
                        const float *W, const float *bias, float *C, int ldc, int ith, int nth) {
    const kr_kernel_table *t = kr_kernels();
    if (t->gemm_f32_packed)
        t->gemm_f32_packed(M, N, K, A, lda, pa, W, bias, C, ldc, ith, nth);
    else
        t->gemm_f32(M, N, K, A, lda, W, bias, C, ldc, ith, nth);
}

void kr_attend_f32(const float *q, int head_dim, float scale, const kr_kv_span *spans, int n_spans,
                   float *scratch, float *out) {
    kr_kernels()->attend_f32(q, head_dim, scale, spans, n_spans, scratch, out);
}

void kr_attend_multi_f32(int nq, const float *const *q, int head_dim, float scale,
                         const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                         const int *n_own, float *scratch, int scratch_stride, float *const *out) {
    kr_kernels()->attend_multi_f32(nq, q, head_dim, scale, shared, n_shared, own, n_own, scratch,
                                   scratch_stride, out);
}

void kr_attend_causal_f32(int nq, const float *const *q, int head_dim, float scale,
                          const kr_kv_span *spans, int n_spans, const int *n_keys, float *scratch,
                          int scratch_stride, float *const *out) {
    kr_kernels()->attend_causal_f32(nq, q, head_dim, scale, spans, n_spans, n_keys, scratch,
                                    scratch_stride, out);
}

void kr_rmsnorm_f32(int n_rows, int d, const float *x, int ldx, const float *w, float eps, float *y,
                    int ldy) {
    kr_kernels()->rmsnorm_f32(n_rows, d, x, ldx, w, eps, y, ldy);
}

void kr_rope_f32(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
                 const float *inv_freq) {
    kr_kernels()->rope_f32(n_rows, n_heads, head_dim, x, ldx, pos0, inv_freq);
}

void kr_silu_mul_f32(int n, const float *a, const float *b, float *out) {
    kr_kernels()->silu_mul_f32(n, a, b, out);
}

void kr_add_f32(int n, const float *x, float *y) { kr_kernels()->add_f32(n, x, y); }

void kr_softmax_f32(int n, const float *x, float *y) { kr_kernels()->softmax_f32(n, x, y); }

void kr_dequant_rows(const kr_qmat *w, int r0, int r1, float *out, int ldo) {
    kr_kernels()->dequant_rows(w, r0, r1, out, ldo);
}

void kr_kv_pack_bf16(const float *x, uint16_t *out, size_t n) {
    kr_kernels()->kv_pack_bf16(x, out, n);
}

void kr_kv_unpack_bf16(const uint16_t *h, float *out, size_t n) {
    kr_kernels()->kv_unpack_bf16(h, out, n);
}

void kr_kv_pack_int8(const float *x, int8_t *q, float *scale, int d, int group) {
    kr_kernels()->kv_pack_int8(x, q, scale, d, group);
}

void kr_kv_unpack_int8(const int8_t *q, const float *scale, float *out, int d, int group) {
    kr_kernels()->kv_unpack_int8(q, scale, out, d, group);
}

void kr_attn_head_fwd(const kr_attn_head *h, const float *q, const float *k, const float *v,
                      float *out, float *scratch) {
    kr_kernels()->attn_head_fwd(h, q, k, v, out, scratch);
}

void kr_attn_head_bwd(const kr_attn_head *h, const float *q, const float *k, const float *v,
                      const float *out, const float *dout, float *dq, float *dk, float *dv,
                      float *scratch) {
    kr_kernels()->attn_head_bwd(h, q, k, v, out, dout, dq, dk, dv, scratch);
}

void kr_rmsnorm_fwd_rows(int n_rows, int d, const float *x, const float *w, float eps, float *y,
                         float *rstd) {
    kr_kernels()->rmsnorm_fwd_rows(n_rows, d, x, w, eps, y, rstd);
}

void kr_rmsnorm_apply_rows(int n_rows, int d, const float *x, const float *rstd, const float *w,
                           float *y) {
    kr_kernels()->rmsnorm_apply_rows(n_rows, d, x, rstd, w, y);
}

void kr_rmsnorm_bwd_rows(int n_rows, int d, const float *dy, const float *x, const float *rstd,
                         const float *w, float *dx, int accumulate) {
    kr_kernels()->rmsnorm_bwd_rows(n_rows, d, dy, x, rstd, w, dx, accumulate);
}

void kr_rmsnorm_gw_cols(int n_rows, int d, int c0, int c1, const float *dy, const float *x,
                        const float *rstd, float *gw) {
    kr_kernels()->rmsnorm_gw_cols(n_rows, d, c0, c1, dy, x, rstd, gw);
}

void kr_colsum_add_cols(int n_rows, int ld, int c0, int c1, const float *x, float *out) {
    kr_kernels()->colsum_add_cols(n_rows, ld, c0, c1, x, out);
}

void kr_swiglu_bwd(int n, const float *dg, float *h1, float *h3, float *g) {
    kr_kernels()->swiglu_bwd(n, dg, h1, h3, g);
}

void kr_rope_rows(int n_rows, int n_heads, int half, float *x, int ld, const float *cos,
                  const float *sin, float sign) {
    kr_kernels()->rope_rows(n_rows, n_heads, half, x, ld, cos, sin, sign);
}

double kr_softmax_xent_row(int V, float *x, int target) {
    return kr_kernels()->softmax_xent_row(V, x, target);
}

void kr_xent_grad_row(int V, float *p, int target, float scale) {
    kr_kernels()->xent_grad_row(V, p, target, scale);
}

void kr_adamw_f32(size_t n, const kr_adamw *a, float *w, const float *g, float *m, float *v) {
    kr_kernels()->adamw_f32(n, a, w, g, m, v);
}

double kr_fma_burn(kr_isa isa, long iters) {
    const kr_kernel_table *t = kr_kernels_for(isa);
    return t ? t->fma_burn(iters) : 0.0;
}
