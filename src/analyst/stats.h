/*
 * analyst/stats — the few sample statistics every analyst module needs (mean, standard
 * deviation, quantiles), with one definition each so a number means the same thing in the
 * report, the calibration and the tests.
 */
#ifndef KR_ANALYST_STATS_H
#define KR_ANALYST_STATS_H

#include <stdint.h>

/* Arithmetic mean; NaN when n < 1. */
double kr_stat_mean(const double *x, int64_t n);
/* Standard deviation with ddof (0: population, 1: sample); NaN when n - ddof < 1. */
double kr_stat_std(const double *x, int64_t n, int ddof);
/* Sorts x ascending in place (NaN-free input). */
void kr_stat_sort(double *x, int64_t n);
/* Quantile q in [0,1] of an ascending array, numpy's default 'linear' method (position
 * q*(n-1) between order statistics) — the same rule as kr_forecast_quantile. NaN if n < 1. */
double kr_stat_quantile_sorted(const double *sorted, int64_t n, double q);
/* Fewest values kr_stat_quantile_se_sorted estimates an error from. Below it the p10 / p90
 * rank interval reaches past the extreme values (p (n - 1) < sqrt(n p (1 - p))) and rests on
 * one spacing: on normal samples the estimate averages 25% short of the quantile's real spread
 * at 6 values, 15-17% at 8 (checked within 25% by tests/test_analyst_quantile_se.c) and within
 * 6% from 16 on. */
#define KR_STAT_QUANTILE_SE_MIN_N 8
/* Monte Carlo standard error of kr_stat_quantile_sorted(sorted, n, q), distribution-free, from
 * the order statistics around it; NaN when n < KR_STAT_QUANTILE_SE_MIN_N or q is not inside
 * (0, 1). See stats.c for the estimator. */
double kr_stat_quantile_se_sorted(const double *sorted, int64_t n, double q);
/* -1, 0 or +1. */
int kr_stat_sign(double x);

#endif
