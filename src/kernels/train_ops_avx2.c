/*
 * kernels/train_ops_avx2 — the row-wise passes of a training step (train_kernels.h) with
 * AVX2 + FMA: train_ops_body.h at its width.
 */
#include "kernels/train_kernels.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/simd_width.h"

#define TO_NAME(x) x##_avx2
#include "kernels/train_ops_body.h"
#endif
