/*
 * kernels/train_ops_avx512 — the row-wise passes of a training step (train_kernels.h) with
 * AVX-512: train_ops_body.h at its width.
 */
#include "kernels/train_kernels.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX512
#include "kernels/simd_width.h"

#define TO_NAME(x) x##_avx512
#include "kernels/train_ops_body.h"
#endif
