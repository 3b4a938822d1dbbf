/*
 * model/finite — finding NaN and infinite values in stored weights, in their stored format
 * (F32, F16, BF16, F8_E4M3), without converting them. The loader runs it over every tensor
 * the forward pass reads, so a corrupt checkpoint is refused at load (naming the tensor and
 * the first bad element) instead of silently changing forecasts.
 */
#ifndef KR_MODEL_FINITE_H
#define KR_MODEL_FINITE_H

#include <stdint.h>

#include "model/safetensors.h"

/* Index of the first NaN or infinity among the n elements of type dt at data (any alignment),
 * or -1 when all are finite. Integer dtypes have none (-1). One read of the data. */
int64_t kr_first_nonfinite(const void *data, kr_dtype dt, int64_t n);

/* "NaN", "+inf" or "-inf": what the element at index i is (i from kr_first_nonfinite). */
const char *kr_nonfinite_kind(const void *data, kr_dtype dt, int64_t i);

#endif
