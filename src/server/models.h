/*
 * server/models — the models one server serves, by name: the one kr_server_create was given
 * (the main model, borrowed) and those of the config's "models" (loaded by the server, owned),
 * each with its own engine context, a KV share and metrics.
 *
 * Requests name a model ("model" field; none = the default one). A request takes a reference
 * to its model's entry for its whole life (kr_models_acquire ... kr_models_release). Loading a
 * model under a name already served replaces it: the new entry takes the name at once (new
 * requests get the new weights), the old one is retired, and its context and weights are
 * freed when its last request releases it (in-flight requests finish on the old weights).
 * Unloading retires the same way. Thread-safe (one lock; loading happens outside it).
 *
 * KV memory: the budget is shared fairly in max_models equal shares (each context's
 * kv_budget_bytes = total / max_models); while a replaced entry still drains, the name holds
 * two shares' worth for the length of the longest request in flight.
 *
 * Precision ladder: a model may list lower precisions (config "precisions", each gated by the
 * eval-quant report it passed); each is a rung with its own weights and engine. New requests go
 * to the active rung (kr_served_pick); with the tuner on, kr_models_ladder_tick moves it down
 * under sustained queue pressure and back up when it relents (engine/ladder.h), never below
 * the profile's precision_floor. A rung being left keeps its running requests (and their KV)
 * until they end, beside the new rung's share.
 */
#ifndef KR_SERVER_MODELS_H
#define KR_SERVER_MODELS_H

#include <stdatomic.h>
#include <stddef.h>

#include "engine/ladder.h"
#include "engine/metrics.h"
#include "kronos.h"
#include "kronos/server.h"
#include "server/response.h"

typedef struct kr_models kr_models;

typedef struct kr_served {
    char name[64];
    const kr_model *model; /* the weights (owned unless main) */
    kr_model *owned_model; /* == model when the server loaded it */
    kr_context *ctx; /* its engine (owned unless main) */
    int main; /* the model kr_server_create was given: borrowed, never replaced */
    kr_metrics *metrics; /* its context's registry (NULL for main: the server's) */
    char model_dir[KR_SERVER_PATH_MAX], tokenizer_dir[KR_SERVER_PATH_MAX];
    char quant[16], kv_dtype[8];
    kr_api_model_desc desc;
    int refs; /* requests holding it, + 1 while it holds its name (guarded by the set's lock) */
    int retired;
    unsigned generation; /* 1, 2, ... each time the name was (re)loaded */
    /* The ladder: rung 0 is the model above (its fields mirrored), 1.. its lower precisions. */
    int n_rungs;
    struct kr_served_rung {
        char precision[32]; /* "f32", "int8", "q4-gptq": what answers say served them */
        const kr_model *model;
        kr_model *owned_model; /* rungs 1..: owned */
        kr_context *ctx;
        kr_metrics *metrics; /* rungs 1..: owned */
        kr_api_model_desc desc;
        char quant[16];
        kr_metric *m_requests; /* kronos_precision_requests_total{model,precision} */
    } rung[KR_LADDER_MAX_RUNGS];
    atomic_int active; /* the rung new requests get */
    kr_ladder ladder; /* guarded by the set's lock */
    kr_metric *m_down, *m_up, *m_rung;
} kr_served;

/* The rung a new request of e runs on (counted in kronos_precision_requests_total). */
int kr_served_pick(kr_served *e);

/* What to load under a name: kr_server_model_entry (a config "models" entry, or a POST
 * /v1/models/{name}). */
typedef kr_server_model_entry kr_model_spec;

/* A set around the main model (borrowed) and its context (borrowed: the server frees it). */
kr_status kr_models_create(const char *main_name, const kr_model *main_model, kr_context *main_ctx,
                           const kr_api_model_desc *main_desc, const kr_server_config *cfg,
                           size_t kv_share, kr_models **out, kr_error *err);
/* Frees every entry (contexts first: their requests are cancelled); the main one's context and
 * model stay the server's. */
void kr_models_free(kr_models *m);

/* The entry serving `name` ("" or NULL: the default), with a reference taken; NULL when no
 * model has that name. */
kr_served *kr_models_acquire(kr_models *m, const char *name);
void kr_models_release(kr_models *m, kr_served *e);

/* Loads spec and serves it under spec->name, replacing what had the name (the main model's
 * name cannot be: KR_ERR_UNSUPPORTED). KR_ERR_BUSY when max_models are served already and the
 * name is new. The load runs outside the lock: requests keep flowing meanwhile. */
kr_status kr_models_load(kr_models *m, const kr_model_spec *spec, kr_error *err);
/* Stops serving name (KR_ERR_NOT_FOUND if none, KR_ERR_INVALID_ARG for the main model). */
kr_status kr_models_unload(kr_models *m, const char *name, kr_error *err);
/* Makes the set match cfg's "models" (SIGHUP): loads new names, replaces changed ones (a
 * directory, quant or kv_dtype differs), unloads those no longer listed, sets the default.
 * Stops at the first failure (the rest unchanged). */
kr_status kr_models_apply(kr_models *m, const kr_server_config *cfg, kr_error *err);

/* The server's registry, for the ladder's series (before any model with a ladder loads). */
void kr_models_set_metrics(kr_models *m, kr_metrics *metrics);
/* One ladder tick (about a second apart, tuner on): every model with lower precisions moves
 * its active rung by engine/ladder.h's rule on its active engine's queue, within floor (the
 * profile's precision_floor, "" = the whole ladder), logging each move through log. */
void kr_models_ladder_tick(kr_models *m, double now, const char *floor, double target_queue,
                           void (*log)(void *user, const char *line), void *log_user);

/* Calls fn for every served entry (not retired ones) under the lock: keep fn short. */
void kr_models_each(kr_models *m, void (*fn)(void *user, kr_served *e, int is_default), void *user);
/* Entries retired but not yet freed (their requests still run). */
int kr_models_retired(kr_models *m);
/* Loads, replacements and unloads done. */
void kr_models_counts(kr_models *m, int *served, int *loads, int *unloads);

#endif
