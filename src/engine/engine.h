/*
 * engine/engine — what generation runs with (kr_engine: the weights, the context's threads and
 * workspace, the KV precision) and the step profile it accumulates. Owned by the context
 * (engine/context.c); borrowed by every step (engine/generate.h).
 */
#ifndef KR_ENGINE_ENGINE_H
#define KR_ENGINE_ENGINE_H

#include "base/workspace.h"
#include "kronos.h"
#include "model/model.h"
#include "model/transformer.h"

/* The step profile as the engine accumulates it (exported as kr_step_profile): the parts
 * (kernel probes of the model layer, sampling and the tokenizer passes timed here), the
 * steps' wall time, the window re-runs and the thread pool's round trips. */
typedef struct kr_engine_profile {
    int enabled;
    kr_prof parts;
    double seconds_steps;
    kr_prof_entry rerun;
    int64_t pool_regions;
    double seconds_pool_wait;
} kr_engine_profile;

/* What generation runs with: the weights, the context's threads and workspace, the KV
 * precision, and the profile every step adds to (NULL: off; ex.prof is then NULL too, else
 * &profile->parts). Owned by the context. */
typedef struct kr_engine {
    const kr_model *model;
    kr_exec ex;
    kr_kv_dtype kv_dtype;
    kr_engine_profile *profile;
} kr_engine;

/* The public form: OTHER is the steps' time outside the parts. */
void kr_engine_profile_export(const kr_engine_profile *p, kr_step_profile *out);

/* The tokenizer's passes are parts of their own: their kernels are counted into a scratch
 * profile (not the predictor's GEMM / attention parts) by the exec tokenizer_exec returns, and
 * booked whole, FLOPs included, by book_tokenizer (part KR_PROF_PART_TOK_ENCODE or _DECODE,
 * t0 from kr_prof_begin). */
kr_exec kr_engine_tokenizer_exec(const kr_engine *eng, kr_prof *scratch);
void kr_engine_book_tokenizer(const kr_engine *eng, int part, double t0, const kr_prof *scratch);
/* acc += b - a: what one step (a before, b after) added to a group's profile. */
void kr_engine_profile_add_delta(kr_engine_profile *acc, const kr_engine_profile *a,
                                 const kr_engine_profile *b);

#endif
