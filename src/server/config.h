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
 *    "max_paths": 256, "max_pred_len": 2048, "max_context_limit": 2048, "max_connections": 512,
 *    "max_connections_per_ip": 128, "max_horizon": 256, "max_analyze_paths": 1024,
 *    "max_lookback": 2048, "max_calibrate": 10, "max_symbols": 64, "batch_size": 64,
 *    "batch_wait_ms": 50, "max_batch_tokens": 4096, "max_running": 64, "max_queue": 256,
 *    "target_queue_p95_s": 0.5, "target_ttft_p95_s": 2, "prefix_cache": true,
 *    "static_batching": false, "latency_mode": "normal" | "tight", "tune_window_s": 300,
 *    "tune_relax_s": 600, "market": "SSE", "timezone": "Asia/Shanghai", "llm_url": URL,
 *    "llm_model": "gemma3", "llm_timeout_s": 60,
 *    "profiles": [{"name": "session", "from": "09:30", "to": "11:30", "latency_mode": "tight",
 *                  "batch_wait_ms": 15, "max_running": 64, "max_queue": 512,
 *                  "target_queue_p95_s": 0.05, "target_ttft_p95_s": 0.5,
 *                  "static_batching": false}]}
 * Every `kronos serve` flag has its key (--no-tune is "tune": false, --request-timeout is
 * request_timeout_s), so a deployment can live in the file alone.
 */
#ifndef KR_SERVER_CONFIG_H
#define KR_SERVER_CONFIG_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "kronos.h"

#include "kronos/server.h"

/* The config struct, its defaults, parser and checks are public: kronos/server.h. */

/* Parses "HH:MM" into minutes after midnight; returns 0 or -1. */
int kr_server_parse_clock(const char *s, int *minutes);

/* The profile active at a local time (minutes after midnight, 0..1439), or NULL. Profiles
 * never overlap (checked at parse), so at most one applies. */
const kr_server_profile *kr_server_profile_at(const kr_server_config *c, int minute_of_day);

/* base with p's overrides applied (p NULL: base unchanged). */
kr_context_params kr_server_profile_apply(const kr_context_params *base,
                                          const kr_server_profile *p);

/* The IANA zone the profiles' times are read in ("" = the machine's local time). */
const char *kr_server_profile_zone(const kr_server_config *c);

/* Bits of a weight format (f32 32, bf16 16, fp8 and int8 8, q4 4), 0 for another name. */
int kr_precision_bits(const char *quant);
/* A served model's name: 1-63 letters, digits, '-', '_', '.' (not "." or ".."). */
int kr_server_model_name_ok(const char *name);
/* One "models" entry (config file, or a POST /v1/models/{name} body) named name into e;
 * errors name label and the key. */
kr_status kr_server_model_entry_parse(const cJSON *obj, const char *name, const char *label,
                                      kr_server_model_entry *e, kr_error *err);

/* Minute of the day (0..1439) at Unix time utc in the profiles' zone. */
kr_status kr_server_profile_minute(const kr_server_config *c, int64_t utc, int *minute,
                                   kr_error *err);

#endif
