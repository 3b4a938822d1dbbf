/*
 * kernels/kernels_internal.h — helpers shared by the kernel variants (not part of the API).
 */
#ifndef KR_KERNELS_INTERNAL_H
#define KR_KERNELS_INTERNAL_H

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

#endif
