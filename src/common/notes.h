/*
 * common/notes — the advice a front end prints beside a result, worded once: when quantising
 * at load cost enough of a forecast to be worth doing beforehand.
 */
#ifndef KR_COMMON_NOTES_H
#define KR_COMMON_NOTES_H

#include <stddef.h>

#include "kronos.h"

/* Quantising at load is worth a note when it cost more than 5 % of the forecasts it served
 * (forecast_seconds): writes one into buf ("quantising to int8 at load took 0.17 s, 15 % of
 * this forecast: run `kronos quantize --quant int8 --out DIR` once and load DIR") and returns
 * 1; else returns 0 and leaves buf alone. */
KR_PRIVATE int kr_quantize_at_load_note(const kr_model_info *mi, double forecast_seconds, char *buf,
                                        size_t size);

#endif
