/*
 * analyst/summary — the plain-language summary of a report: a few sentences filled in from
 * the report's numbers by fixed templates (direction with its probability, expected move and
 * band, risk, volatility, technicals, calibration). Deterministic: the same numbers give the
 * same words. It describes the model's sample distribution and never advises.
 */
#ifndef KR_ANALYST_SUMMARY_H
#define KR_ANALYST_SUMMARY_H

#include "kronos.h"

struct kr_report;

/* Builds the sentences of r. Caller owns *out (free with kr_summary_free). */
kr_status kr_summary_build(const struct kr_report *r, char ***out, int *n, kr_error *err);
void kr_summary_free(char **s, int n);

/* The words for where r's paths finish: "leans up" when at least 60 % of them end above the
 * last close and that share is above one half by more than two standard errors; "leans down"
 * the same below; else "is undecided" (a lean the Monte Carlo error could undo is none). */
const char *kr_summary_direction(const struct kr_report *r);

#endif
