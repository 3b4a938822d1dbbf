/*
 * kronos/server.h — the HTTP server behind `kronos serve`: libmicrohttpd's threads on the I/O
 * side (one thread per connection), the engine's scheduler thread on the compute side, and
 * per-request jobs between them.
 *
 *   POST /v1/forecast   forecast (JSON, or text/event-stream with "stream": true)
 *   POST /v1/analyze    a report (also /v1/analyze/batch, and /analyze {"stock_code"})
 *   /v1/candles         the candle store (GET, POST)
 *   GET  /v1/models     the served model
 *   GET  /health        200 while the process runs
 *   GET  /ready         200 when the model is loaded, the server is not draining and its
 *                       PostgreSQL store (if any) answers a probe, else 503
 *   GET  /metrics       Prometheus text: engine series + HTTP series
 *   GET  /              the web page (web_root)
 * docs/api.md has every route, field and status.
 *
 * Limits map to statuses: bad input 400 (field and row named; also an ambiguous body length,
 * then the connection closes), missing/wrong API key 401, unknown path 404, wrong method 405,
 * body over max_body_bytes or max_request_memory 413, queue full 429 with Retry-After,
 * draining 503, memory budget (max_memory_in_flight: bodies, analyses' working sets, answers)
 * full 503 with Retry-After, one request larger than that budget 413, deadline passed 504. A client that disconnects cancels its request; one whose request has not
 * arrived read_timeout_s after accept is cut. Every answer carries X-Request-Id. The server
 * never installs signal handlers; the caller (`kronos serve`) turns signals into
 * kr_server_drain.
 */
#ifndef KRONOS_SERVER_H
#define KRONOS_SERVER_H

#include <stddef.h>

#include "kronos.h"
#include "kronos/series.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- configuration
 * Everything `kronos serve` can be told: one struct, filled from defaults, then from a JSON
 * config file (docs/api.md lists the keys; unknown keys are errors), then from flags, and
 * validated so the file and the flags obey the same ranges and produce the same messages. */

#define KR_SERVER_MAX_PROFILES 16
#define KR_SERVER_PATH_MAX 4096

/* The batch wait latency_mode "tight" implies when none is given, and the most it allows:
 * latency-critical work trades some throughput for a short wait (docs/api.md). */
#define KR_TIGHT_WAIT_MS 15
#define KR_TIGHT_WAIT_MAX_MS 20

/* A named set of scheduler overrides that applies between two wall-clock times of the
 * market's time zone (timezone / market keys; the machine's when neither is given), e.g. a
 * short batch wait during the trading session. Fields left < 0 keep the base value. */
typedef struct kr_server_profile {
    char name[64];
    int from_min, to_min; /* minutes after local midnight; to < from wraps midnight */
    int batch_wait_ms; /* -1: keep */
    int max_batch_tokens; /* -1: keep */
    int max_running; /* -1: keep */
    int max_queue; /* -1: keep */
    double target_queue_p95_s; /* < 0: keep */
    double target_ttft_p95_s; /* < 0: keep */
    int static_batching; /* -1: keep, 0: continuous, 1: static batches of max_running */
    int latency_tight; /* latency_mode "tight": wait <= KR_TIGHT_WAIT_MAX_MS (default 15) */
    char precision_floor[16]; /* the lowest precision the ladder may use ("" = any) */
} kr_server_profile;

/* Called when the active profile changes (NULL = back to the base parameters) with the
 * parameters that now apply; the server has already set the scheduler's batch_wait_ms and
 * max_batch_tokens (kr_context_set_limits, logged and exported by the tuner). Called from an
 * HTTP connection thread; keep it short. */
typedef void (*kr_server_profile_cb)(void *user, const kr_server_profile *active,
                                     const kr_context_params *effective);

#define KR_SERVER_MAX_MODELS 8

#define KR_SERVER_MAX_PRECISIONS 3

/* A lower precision of a served model that the tuner may move new requests to under sustained
 * queue pressure (the precision ladder, docs/api.md): its weight format, a quantised
 * checkpoint (or "" to quantise the model at load, round-to-nearest), and the
 * `kronos eval-quant --gate ... --json` report it passed (required). */
typedef struct kr_server_precision {
    char quant[16]; /* bf16, int8, fp8, q4 */
    char method[16]; /* "" or what the report says (rtn, smoothquant, awq, gptq) */
    char model[1024]; /* a `kronos quantize` output directory, or "" */
    char gate_report[1024];
} kr_server_precision;

/* A model served beside the main one (config "models", POST /v1/models/{name}). */
typedef struct kr_server_model_entry {
    char name[64]; /* letters, digits, '-', '_', '.' */
    char model[KR_SERVER_PATH_MAX]; /* predictor dir, or a dir with predictor/ + tokenizer/ */
    char tokenizer[KR_SERVER_PATH_MAX]; /* "" = from model */
    char quant[16]; /* "" = as stored; f32, bf16, int8, fp8, q4: quantised at load */
    char kv_dtype[8]; /* "" = the server's kv_dtype */
    int n_precisions; /* the ladder below the model's own precision, fastest last */
    kr_server_precision precisions[KR_SERVER_MAX_PRECISIONS];
} kr_server_model_entry;

typedef struct kr_server_config {
    char model[KR_SERVER_PATH_MAX]; /* predictor dir (or dir with predictor/, tokenizer/) */
    char tokenizer[KR_SERVER_PATH_MAX]; /* "" = from model / the bundled demo model */
    char host[256]; /* bind address (default 127.0.0.1) */
    int port; /* 0 = ephemeral (default 8080) */
    char quant[16]; /* weight format: f32, bf16, int8, fp8, q4 */
    char kv_dtype[8]; /* KV-cache precision: f32, bf16, int8 */
    double drift_sample; /* fraction of forecasts re-run on the f32 shadow when
                                            serving quantised weights (default 0.05; 0: off) */
    double drift_kv_share; /* share of kv_budget set aside for the shadow's f32 KV cache
                              (0 < x <= 0.9, default 0.25) */
    int threads; /* compute threads; 0 = all CPUs */
    char api_key_file[KR_SERVER_PATH_MAX];
    char api_key[256]; /* "" = no auth; loaded from api_key_file when empty */
    double request_timeout_s; /* per-request deadline (default 120 s) */
    double drain_delay_s; /* on a drain, /ready answers 503 this long while requests are still
                             served, so a load balancer's health check takes the replica out
                             before it refuses anything (default 0) */
    size_t max_body_bytes; /* request body limit (default 8 MiB) -> 413 */
    int max_paths; /* per request (default 256) -> 400 */
    int max_pred_len; /* per request (default 2048) -> 400 */
    int max_context_limit; /* the largest max_context a request may ask for: the window the
                              engine attends over, whose cost grows with its square
                              (default 2048) -> 400 */
    int max_connections; /* concurrent HTTP connections (default 512) */
    int max_connections_per_ip; /* concurrent connections from one client address (default
                                   128; 0 = no limit, e.g. behind a reverse proxy) */
    double read_timeout_s; /* a request's headers and body must have arrived this long after
                              the connection was accepted (or the previous answer was sent);
                              a slow trickle cannot extend it (default 30 s) */
    int max_rows; /* candles in one JSON body (default 100,000) -> 400; also bounds the
                     number of JSON values a body may hold (413 beyond) */
    size_t max_request_memory; /* estimated memory of one request's body and parse tree
                                  (default 128 MiB) -> 413 */
    size_t max_memory_in_flight; /* summed over every request in progress: its body and parse
                                    tree, what it builds (an analysis' histories, paths and
                                    reports; the room for its answer) and its answer until
                                    sent (default 512 MiB) -> 503 with Retry-After, refused
                                    before the work; one request past it alone -> 413 */
    int max_horizon; /* /v1/analyze: horizon (default 256) -> 400 */
    int max_analyze_paths; /* /v1/analyze: paths and max_paths (default 1024) -> 400 */
    int max_lookback; /* /v1/analyze: lookback (default 2048) -> 400 */
    int max_calibrate; /* /v1/analyze: calibration windows (default 10) -> 400 */
    int max_symbols; /* /v1/analyze/batch: symbols (default 64, at most 64) -> 400 */
    int batch_size; /* offline scoring (/v1/analyze/batch, backtest jobs): forecasts in static
                       batches of this many series x paths rows (default
                       KR_STATIC_BATCH_ROWS_DEFAULT; 0: all at once) */
    int offline_batch_wait_ms; /* offline scoring's batch wait, whatever the time-of-day profile
                                  (kr_request_params.batch_wait_ms; default 500) */
    char db[KR_SERVER_PATH_MAX]; /* candle store for /v1/candles, /v1/analyze ("" = 503) */
    char web_root[KR_SERVER_PATH_MAX]; /* files of the page at / ("" = 404) */
    char access_log[KR_SERVER_PATH_MAX]; /* JSON lines, one per request: a file (appended),
                                            "-" for stdout, "" for none */
    kr_context_params sched; /* engine parameters (kv_budget_bytes 0 = default; n_threads and
                                kv_dtype come from `threads` and `kv_dtype`) */
    int allow_nonfinite_weights; /* load a checkpoint even with NaN/inf weights (default 0) */
    int no_mmap; /* read the checkpoint into memory instead of mapping it (default 0; see
                    kr_model_params.no_mmap) */
    int analysis_priority; /* priority of analyses against forecasts (default
                                KR_PRIORITY_LOW: a heavy report slows, never stalls, forecasts) */
    int latency_tight; /* top-level latency_mode "tight" (the base parameters) */
    char timezone[64]; /* IANA zone of the profiles' times ("" = from market, else the
                          machine's local time) */
    char market[32]; /* a calendar name (SSE, NYSE, ...): its zone when timezone is "" */
    /* Calendar files that replace or extend the shipped ones (kr_calendar_load; `kronos serve`
     * loads them at start, a --calendar-dir flag outranks it); "" = $KRONOS_CALENDAR_DIR. */
    char calendar_dir[KR_SERVER_PATH_MAX];
    char llm_url[KR_SERVER_PATH_MAX]; /* LLM endpoint of the optional narrative of the
                                         analyses (a request asks with "narrative": true;
                                         "" = none; requests never name URLs themselves) */
    char llm_model[128]; /* its model ("" = KR_NARRATIVE_DEFAULT_MODEL) */
    double llm_timeout_s; /* per narrative request (default 60 s) */
    char norm[16]; /* normalisation of requests that do not say: "exact" (default) or
                      "anchored" (docs/api.md, "norm") */
    int norm_refresh_bars; /* anchored: a new anchor after this many bars (default 16) */
    /* Models beside the main one ("models": {"name": {"model", "tokenizer", "quant",
     * "kv_dtype"}}), the one requests without a "model" field get ("" = the main one), and how
     * many may be served at once (the KV budget's equal shares; 0 = 1 + n_models). */
    int n_models;
    kr_server_model_entry models[KR_SERVER_MAX_MODELS];
    char default_model[64];
    int max_models;
    int n_profiles;
    kr_server_profile profiles[KR_SERVER_MAX_PROFILES];
    kr_server_profile_cb on_profile; /* may be NULL */
    void *on_profile_user;
} kr_server_config;

/* Defaults for every field (engine defaults from kr_context_default_params, with a 50 ms
 * batch wait and the tuner on). */
KR_API void kr_server_config_defaults(kr_server_config *c);

/* Overlays the keys present in a JSON config document onto c. label names the source in
 * errors ("kronos-serve.json: batch_wait_ms: must be an integer in 0..60000, got -1").
 * On error c may be partly updated. */
KR_API kr_status kr_server_config_parse(const char *json, size_t len, const char *label,
                                        kr_server_config *c, kr_error *err);
/* Reads a file and calls kr_server_config_parse with the path as the label. */
KR_API kr_status kr_server_config_load(const char *path, kr_server_config *c, kr_error *err);

/* Checks cross-field consistency (quant, ranges that flags may have set). */
KR_API kr_status kr_server_config_validate(const kr_server_config *c, kr_error *err);

/* Parses a KV budget: "BYTES" (integer, optional K/M/G/KiB/MiB/GiB suffix; at most 90% of
 * physical RAM, refused naming the machine's RAM beyond) or "PCT%" of physical RAM
 * (0 < PCT <= 90). */
KR_API kr_status kr_server_parse_kv_budget(const char *s, size_t *bytes, kr_error *err);

/* ---------------------------------------------------------------- the server */

typedef struct kr_server kr_server;

/* Creates the scheduler over model (borrowed; must outlive the server) and starts listening
 * on cfg->host:cfg->port (port 0: an ephemeral port, see kr_server_port). cfg is copied. When
 * cfg->api_key is empty and cfg->api_key_file is set, the key is read from the file.
 * Caller owns *out; free with kr_server_free. */
KR_API kr_status kr_server_create(const kr_model *model, const kr_server_config *cfg,
                                  kr_server **out, kr_error *err);

/* Whether a server of model and cfg runs an f32 shadow (kr_server_attach_shadow): drift_sample
 * > 0 and weights quantised at load (an f32 original exists) or a KV dtype other than f32.
 * Such a server sets drift_kv_share of kv_budget (a quarter) aside for the shadow's f32 KV
 * cache. */
KR_API int kr_server_shadow_planned(const kr_model *model, const kr_server_config *cfg);

/* Serving a quantised model: runs a `sample` fraction of the answered forecasts again on
 * f32_model (the f32 original; owned by the server from now on) and exports
 * kronos_quant_drift (server/drift.h), within the KV memory kr_server_create set aside
 * (KR_ERR_INVALID_ARG when kr_server_shadow_planned said no). Call right after
 * kr_server_create. */
KR_API kr_status kr_server_attach_shadow(kr_server *s, kr_model *f32_model, double sample,
                                         kr_error *err);

/* Makes the served models match cfg's "models" and default_model (what `kronos serve` does on
 * SIGHUP with its config file read again): new names are loaded, changed ones replaced (new
 * requests get the new weights at once, requests in flight finish on the old ones, which are
 * freed after the last), names no longer listed unloaded. Every other key of cfg is ignored
 * (a restart applies them). Thread-safe. */
KR_API kr_status kr_server_reload_models(kr_server *s, const kr_server_config *cfg, kr_error *err);

/* The port actually bound (useful with port 0). */
KR_API int kr_server_port(const kr_server *s);
/* The engine context (borrowed), e.g. for kr_context_get_stats in tests. */
KR_API kr_context *kr_server_context(kr_server *s);

/* Graceful stop, blocking: /ready answers 503 at once; after cfg.drain_delay_s (requests are
 * still served meanwhile, so a load balancer checking /ready stops sending first) new /v1
 * requests answer 503 too; every request already accepted runs to completion and its response
 * is sent (waiting at most grace_s seconds for the responses after the scheduler has drained).
 * Idempotent; thread-safe. */
KR_API void kr_server_drain(kr_server *s, double grace_s);
/* 1 once kr_server_drain refuses new requests (after the drain delay). */
KR_API int kr_server_is_draining(kr_server *s);
/* 1 once kr_server_drain was called (what /ready answers 503 for). */
KR_API int kr_server_is_leaving(kr_server *s);

/* Reopens the access log file at its path (after logrotate moved it; `kronos serve` calls
 * this on SIGUSR1). KR_OK without an access log or with standard output; KR_ERR_IO naming
 * the path when it cannot be opened (the old file stays in use). Thread-safe. */
KR_API kr_status kr_server_reopen_logs(kr_server *s, kr_error *err);

/* What kr_server_create would meet binding cfg->host:cfg->port, found by binding and closing
 * a socket at once: KR_ERR_INVALID_ARG when the host does not resolve, is not an address of
 * this machine or the port needs privileges; KR_ERR_BUSY when another process holds the port
 * now (the start fails until it is free); KR_OK otherwise. For `--check-config`. */
KR_API kr_status kr_server_check_listen(const kr_server_config *cfg, kr_error *err);

/* Whether path can be the access log: "-" (standard output), a regular file that is writable
 * or can be created in its directory, or a character device. A FIFO, a socket or a directory
 * is refused, naming what it is (KR_ERR_INVALID_ARG): a FIFO's open blocks until a reader
 * comes and its writes block when the reader stops. kr_server_create opens the log under the
 * same rule, without blocking. For `--check-config` and the start-up checks. */
KR_API kr_status kr_server_check_access_log(const char *path, kr_error *err);

/* Drains (if not yet), stops listening and frees everything. NULL is a no-op. */
KR_API void kr_server_free(kr_server *s);

/* Reads the key: the file's first line, surrounding whitespace removed. Refuses an empty key,
 * one longer than cap - 1 bytes and keys with control characters (they could never be sent
 * in a header). */
KR_API kr_status kr_auth_load_key_file(const char *path, char *key, size_t cap, kr_error *err);
/* 1, with a warning naming the file, its mode and the fix in msg, when every user of the
 * machine may read the key file (mode o+r: anyone logged in could call the API); else 0. */
KR_API int kr_auth_key_file_exposed(const char *path, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_SERVER_H */
