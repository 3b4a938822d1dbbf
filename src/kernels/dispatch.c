/*
 * kernels/dispatch — picks the kernel variant once per process and routes the kr_* entry
 * points to it.
 *
 * CPUID says what the CPU has; XGETBV says whether the OS saves the wide registers (a
 * hypervisor can hide them), so both are checked. KRONOS_ISA lowers the choice (never
 * raises it above what the CPU runs). The choice is made under pthread_once; afterwards each
 * call is one atomic load and an indirect call. Off x86 only the scalar row is ever chosen
 * (isa_fallback.c gives the other names a body so this table still links).
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

typedef void (*rmsnorm_fn)(int, int, const float *, int, const float *, float, float *, int);
typedef void (*rope_fn)(int, int, int, float *, int, int, const float *);
typedef void (*silu_mul_fn)(int, const float *, const float *, float *);
typedef void (*add_fn)(int, const float *, float *);
typedef void (*softmax_fn)(int, const float *, float *);

typedef struct kr_kernel_table {
    kr_gemm_f32_fn gemm_f32;
    kr_attend_f32_fn attend_f32;
    kr_attend_multi_f32_fn attend_multi_f32;
    rmsnorm_fn rmsnorm_f32;
    rope_fn rope_f32;
    silu_mul_fn silu_mul_f32;
    add_fn add_f32;
    softmax_fn softmax_f32;
} kr_kernel_table;

static const kr_kernel_table k_tables[KR_ISA_COUNT] = {
    [KR_ISA_SCALAR] = { kr_gemm_f32_scalar, kr_attend_f32_scalar, kr_attend_multi_f32_scalar,
                        kr_rmsnorm_f32_scalar, kr_rope_f32_scalar, kr_silu_mul_f32_scalar,
                        kr_add_f32_scalar, kr_softmax_f32_scalar },
    [KR_ISA_AVX2] = { kr_gemm_f32_avx2, kr_attend_f32_avx2, kr_attend_multi_f32_avx2,
                      kr_rmsnorm_f32_avx2, kr_rope_f32_avx2, kr_silu_mul_f32_avx2, kr_add_f32_avx2,
                      kr_softmax_f32_avx2 },
    [KR_ISA_AVX512] = { kr_gemm_f32_avx512, kr_attend_f32_avx512, kr_attend_multi_f32_avx512,
                        kr_rmsnorm_f32_avx512, kr_rope_f32_avx512, kr_silu_mul_f32_avx512,
                        kr_add_f32_avx512, kr_softmax_f32_avx512 },
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_supported[KR_ISA_COUNT];
static kr_isa g_best = KR_ISA_SCALAR;
static atomic_int g_active = -1;
static int g_avx512_vnni, g_avx512_bf16; /* extensions of the AVX-512 level */

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
    if (max_subleaf >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        g_avx512_bf16 = g_supported[KR_ISA_AVX512] && (int)((a >> 5) & 1);
    }
}
#endif

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
    atomic_store_explicit(&g_active, (int)best, memory_order_release);
}

static inline const kr_kernel_table *table(void) {
    int a = atomic_load_explicit(&g_active, memory_order_acquire);
    if (a < 0) {
        pthread_once(&g_once, init_once);
        a = atomic_load_explicit(&g_active, memory_order_acquire);
    }
    return &k_tables[a];
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

const char *kr_isa_name(kr_isa isa) {
    switch (isa) {
    case KR_ISA_SCALAR: return "scalar";
    case KR_ISA_AVX2: return "avx2";
    case KR_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

void kr_gemm_f32(int M, int N, int K, const float *A, int lda, const float *W, const float *bias,
                 float *C, int ldc, int ith, int nth) {
    table()->gemm_f32(M, N, K, A, lda, W, bias, C, ldc, ith, nth);
}

void kr_attend_f32(const float *q, int head_dim, float scale, const kr_kv_span *spans, int n_spans,
                   float *scratch, float *out) {
    table()->attend_f32(q, head_dim, scale, spans, n_spans, scratch, out);
}

void kr_attend_multi_f32(int nq, const float *const *q, int head_dim, float scale,
                         const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                         const int *n_own, float *scratch, int scratch_stride, float *const *out) {
    table()->attend_multi_f32(nq, q, head_dim, scale, shared, n_shared, own, n_own, scratch,
                              scratch_stride, out);
}

void kr_rmsnorm_f32(int n_rows, int d, const float *x, int ldx, const float *w, float eps, float *y,
                    int ldy) {
    table()->rmsnorm_f32(n_rows, d, x, ldx, w, eps, y, ldy);
}

void kr_rope_f32(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
                 const float *inv_freq) {
    table()->rope_f32(n_rows, n_heads, head_dim, x, ldx, pos0, inv_freq);
}

void kr_silu_mul_f32(int n, const float *a, const float *b, float *out) {
    table()->silu_mul_f32(n, a, b, out);
}

void kr_add_f32(int n, const float *x, float *y) { table()->add_f32(n, x, y); }

void kr_softmax_f32(int n, const float *x, float *y) { table()->softmax_f32(n, x, y); }
