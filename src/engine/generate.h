/*
 * engine/generate — one engine step over any set of sequence groups (continuous batching with
 * bounded steps): every group with rows granted advances by up to that many rows of work.
 *
 *   admit new groups (kr_seq_admit: encode, prefix cache)
 *   plan the step's rows (engine/batch.c: prefill chunks, windows, decode rows)
 *   run the predictor over them (model/predictor.c -> model/transformer.c -> model/linear.c
 *   -> kernels/)
 *   sample s1, then s2 conditioned on it, for every path whose window ended (model/sampling.c)
 *   run the tokenizer decoder over the decode rows (model/tokenizer.c)
 *   move each group to its next phase (engine/sequence.c)
 *
 * A generation step's rows may spread over several engine steps (paths in turns, the
 * re-run history in chunks, a long path chunk in pieces), so one heavy group never makes an
 * engine step longer than the budgets the scheduler hands out; what is computed does not
 * change, only when.
 *
 * Results never depend on the budgets or on which groups share a step: kernels are
 * row-deterministic, a chunk's rows do not depend on how its past is split into references,
 * and each path draws from its own random stream (seed, path, step).
 */
#ifndef KR_ENGINE_GENERATE_H
#define KR_ENGINE_GENERATE_H

#include <stdint.h>

#include "engine/engine.h"
#include "engine/prefix_cache.h"
#include "engine/sequence.h"

/* Runs one engine step: every group with budget[k] > 0 advances by up to that many rows of
 * work (and by at least one unit of work — a prefill row, a path's chunk piece, a sampling
 * round — even when its next unit is larger); groups with budget 0 wait. New groups are
 * encoded first. hooks (may be NULL) connect the prefix cache. */
kr_status kr_generate_step(const kr_engine *eng, kr_seq **groups, const int64_t *budget,
                           int n_groups, const kr_prefix_hooks *hooks, kr_error *err);

#endif
