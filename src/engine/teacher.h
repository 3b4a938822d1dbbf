/*
 * engine/teacher — the model's next-token distributions along a real window (teacher
 * forcing), the measurement behind `kronos eval-quant`: one prefill over the window's true
 * tokens gives, at every position, the s1 distribution the generator would sample from if
 * the window ended there, and the s2 distribution given the true next s1.
 */
#ifndef KR_ENGINE_TEACHER_H
#define KR_ENGINE_TEACHER_H

#include <stdint.h>

#include "kronos.h"

/* Window: the last `lookback` rows of s (1 < lookback <= 512), normalised as a forecast
 * would. This model's tokenizer encodes the window into s1_out/s2_out [lookback] (may be
 * NULL). The predictor runs on s1_in/s2_in [lookback] when given (e.g. another model's
 * tokens, so two predictors see the same sequence), else on those tokens. Writes, for t in
 * [0, lookback − 1): s1_logits[t][2^s1_bits] (predicting s1 of row t+1) and
 * s2_logits[t][2^s2_bits] (predicting s2 of row t+1 given its true s1). Runs on the
 * context's engine thread between its steps (kr_context_run_task). */
KR_PRIVATE kr_status kr_teacher_logits(kr_context *ctx, const kr_series *s, int lookback,
                                       const int32_t *s1_in, const int32_t *s2_in, int32_t *s1_out,
                                       int32_t *s2_out, float *s1_logits, float *s2_logits,
                                       kr_error *err);

#endif
