/*
 * server/config — everything `kronos serve` can be told: listen address, model, limits,
 * scheduler parameters and time-of-day profiles. One struct, filled from defaults, then from a
 * JSON config file, then from command-line flags (cli/cmd_serve.c), and validated here so the
 * file and the flags obey the same ranges and produce the same messages.
 *
 * File format (every key optional, unknown keys are errors so a typo is never silently a
 * default):
 *   {"model": DIR, "tokenizer": DIR, "host": "127.0.0.1", "port": 8080, "quant": "f32",
 *    "kv_dtype": "f32", "threads": N, "kv_budget": BYTES | "BYTES" | "PCT%",
 *    "api_key_file": FILE, "db": FILE, "web_root": DIR, "access_log": FILE | "-",
 *    "tune": true, "request_timeout_s": 120, "read_timeout_s": 30, "max_body_bytes": 8388608,
 *    "max_rows": 100000, "max_request_memory": "128MiB", "max_memory_in_flight": "512MiB",
 *    "max_paths": 256, "max_pred_len": 2048, "max_connections": 512,
 *    "max_connections_per_ip": 128, "max_horizon": 256, "max_analyze_paths": 1024,
 *    "max_lookback": 2048, "max_calibrate": 10, "max_symbols": 64,
 *    "batch_wait_ms": 50, "max_batch_tokens": 4096, "max_running": 64, "max_queue": 256,
 *    "target_queue_p95_s": 0.5, "target_ttft_p95_s": 2, "prefix_cache": true,
 *    "static_batching": false,
 *    "profiles": [{"name": "session", "from": "09:30", "to": "16:00", "batch_wait_ms": 20}]}
 * Every `kronos serve` flag has its key (--no-tune is "tune": false, --request-timeout is
 * request_timeout_s), so a deployment can live in the file alone.
 */
#ifndef KR_SERVER_CONFIG_H
#define KR_SERVER_CONFIG_H

#include <stddef.h>

#include "kronos.h"

#define KR_SERVER_MAX_PROFILES 16
#define KR_SERVER_PATH_MAX 4096

/* A named set of scheduler overrides that applies between two local wall-clock times, e.g.
 * a shorter batch wait during the trading session. Fields left < 0 keep the base value. */
typedef struct kr_server_profile {
    char name[64];
    int from_min, to_min; /* minutes after local midnight; to < from wraps midnight */
    int batch_wait_ms; /* -1: keep */
    int max_batch_tokens; /* -1: keep */
    int max_running; /* -1: keep */
    int max_queue; /* -1: keep */
    double target_queue_p95_s; /* < 0: keep */
    double target_ttft_p95_s; /* < 0: keep */
} kr_server_profile;

/* Called when the active profile changes (NULL = back to the base parameters) with the
 * parameters that now apply; the server has already set the scheduler's batch_wait_ms and
 * max_batch_tokens (kr_context_set_limits, logged and exported by the tuner). Called from an
 * HTTP connection thread; keep it short. */
typedef void (*kr_server_profile_cb)(void *user, const kr_server_profile *active,
                                     const kr_context_params *effective);

typedef struct kr_server_config {
    char model[KR_SERVER_PATH_MAX]; /* predictor dir (or dir with predictor/, tokenizer/) */
    char tokenizer[KR_SERVER_PATH_MAX]; /* "" = from model / the bundled demo model */
    char host[256]; /* bind address (default 127.0.0.1) */
    int port; /* 0 = ephemeral (default 8080) */
    char quant[16]; /* weight format: f32, bf16, int8, fp8, q4 */
    char kv_dtype[8]; /* KV-cache precision: f32, bf16, int8 */
    double drift_sample; /* fraction of forecasts re-run on the f32 shadow when
                                            serving quantised weights (default 0.05; 0: off) */
    int threads; /* compute threads; 0 = all CPUs */
    char api_key_file[KR_SERVER_PATH_MAX];
    char api_key[256]; /* "" = no auth; loaded from api_key_file when empty */
    double request_timeout_s; /* per-request deadline (default 120 s) */
    double drain_delay_s; /* on a drain, /ready answers 503 this long while requests are still
                             served, so a load balancer's health check takes the replica out
                             before it refuses anything (default 0) */
    size_t max_body_bytes; /* request body limit (default 8 MiB) -> 413 */
    int max_paths; /* per request (default 256) -> 400 */
    int max_pred_len; /* per request (default 512) -> 400 */
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
    size_t max_memory_in_flight; /* the same summed over the requests being read and parsed
                                    (default 512 MiB) -> 503 with Retry-After */
    int max_horizon; /* /v1/analyze: horizon (default 256) -> 400 */
    int max_analyze_paths; /* /v1/analyze: paths and max_paths (default 1024) -> 400 */
    int max_lookback; /* /v1/analyze: lookback (default 2048) -> 400 */
    int max_calibrate; /* /v1/analyze: calibration windows (default 10) -> 400 */
    int max_symbols; /* /v1/analyze/batch: symbols (default 64, at most 64) -> 400 */
    char db[KR_SERVER_PATH_MAX]; /* candle store for /v1/candles, /v1/analyze ("" = 503) */
    char web_root[KR_SERVER_PATH_MAX]; /* files of the page at / ("" = 404) */
    char access_log[KR_SERVER_PATH_MAX]; /* JSON lines, one per request: a file (appended),
                                            "-" for stdout, "" for none */
    kr_context_params sched; /* engine parameters (kv_budget_bytes 0 = default; n_threads and
                                kv_dtype come from `threads` and `kv_dtype`) */
    int allow_nonfinite_weights; /* load a checkpoint even with NaN/inf weights (default 0) */
    int analysis_priority; /* priority of analyses against forecasts (default
                                KR_PRIORITY_LOW: a heavy report slows, never stalls, forecasts) */
    int n_profiles;
    kr_server_profile profiles[KR_SERVER_MAX_PROFILES];
    kr_server_profile_cb on_profile; /* may be NULL */
    void *on_profile_user;
} kr_server_config;

/* Defaults for every field (engine defaults from kr_context_default_params, with a 50 ms
 * batch wait and the tuner on). */
void kr_server_config_defaults(kr_server_config *c);

/* Overlays the keys present in a JSON config document onto c. label names the source in
 * errors ("kronos-serve.json: batch_wait_ms: must be an integer in 0..60000, got -1").
 * On error c may be partly updated. */
kr_status kr_server_config_parse(const char *json, size_t len, const char *label,
                                 kr_server_config *c, kr_error *err);
/* Reads a file and calls kr_server_config_parse with the path as the label. */
kr_status kr_server_config_load(const char *path, kr_server_config *c, kr_error *err);

/* Checks cross-field consistency (quant, ranges that flags may have set). */
kr_status kr_server_config_validate(const kr_server_config *c, kr_error *err);

/* Parses a KV budget: "BYTES" (integer, optional K/M/G/KiB/MiB/GiB suffix) or "PCT%" of
 * physical RAM (0 < PCT <= 90). */
kr_status kr_server_parse_kv_budget(const char *s, size_t *bytes, kr_error *err);

/* Parses "HH:MM" into minutes after midnight; returns 0 or -1. */
int kr_server_parse_clock(const char *s, int *minutes);

/* The profile active at a local time (minutes after midnight, 0..1439), or NULL. Profiles
 * never overlap (checked at parse), so at most one applies. */
const kr_server_profile *kr_server_profile_at(const kr_server_config *c, int minute_of_day);

/* base with p's overrides applied (p NULL: base unchanged). */
kr_context_params kr_server_profile_apply(const kr_context_params *base,
                                          const kr_server_profile *p);

#endif
