/*
 * cli/cmd_serve — `kronos serve`: loads a model and runs the HTTP server (src/server) until a
 * signal, then drains: /ready turns 503, new requests get 503, accepted ones finish and are
 * answered, and the process exits 0. SIGTERM and SIGINT drain; SIGHUP reloads the served
 * models from the --config file (server/models.h; without one it drains too); a second
 * SIGTERM or SIGINT during the drain stops the process at once, as operators expect of a
 * second Ctrl-C.
 *
 * Settings come from defaults, then --config FILE (JSON: every flag has a key, plus the
 * scheduler knobs, limits and time-of-day profiles), then the flags, so a flag always wins
 * over the file. --check-config validates all of it and exits without serving.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/serve_notifier.h"
#include "cli/share_paths.h"
#include "kronos.h"
#include "kronos/analyst.h"
#include "kronos/store.h"
#include "kronos/server.h"

#define CMD "serve"

static const kr_cli_opt k_opts[] = {
    KR_CLI_OPT_MODEL(
        "predictor directory, or a directory holding predictor/ and\ntokenizer/ (default: the "
        "bundled demo model)"),
    KR_CLI_OPT_TOKENIZER(KR_CLI_HELP_TOKENIZER),
    { "host", 'H', KR_CLI_TEXT, "ADDR", 0, 0, NULL,
      "address to bind (default 127.0.0.1; another address without\nan API key is warned about "
      "at start-up)" },
    { "port", 'p', KR_CLI_INT, "N", 0, 65535, NULL, "port (default 8080; 0 = any free port)" },
    { "config", 'c', KR_CLI_FILE, "FILE", 0, 0, NULL,
      "JSON settings: every flag as a key (db, web_root,\naccess_log, tune, request_timeout_s, "
      "...) plus limits,\nscheduler knobs and profiles (docs/api.md); flags override\nthe file" },
    { "check-config", 'C', KR_CLI_FLAG, NULL, 0, 0, NULL,
      "check the settings and the files they name, print them,\nexit 0 without serving (or as a "
      "start would fail: 2\nfor a bad setting, 1 for a model or store it cannot use)" },
    KR_CLI_OPT_QUANT(
        "weight format: f32 (default), bf16, int8, fp8, q4 —\nquantised at load; a kronos "
        "quantize checkpoint keeps its own"),
    KR_CLI_OPT_KV_DTYPE(
        "KV-cache precision: f32 (default), bf16, int8\n(quantised: drift_sample of the "
        "forecasts, default 5%, are\nre-run on the f32 original -> kronos_quant_drift)"),
    KR_CLI_OPT_THREADS,
    { "kv-budget", 'k', KR_CLI_TEXT, "BYTES|PCT%", 0, 0, NULL,
      "KV cache memory: running requests + prefix cache\n(default 25% of RAM)" },
    { "api-key-file", 'a', KR_CLI_FILE, "FILE", 0, 0, NULL,
      "require 'Authorization: Bearer <key>' on /v1 routes" },
    { "no-tune", 'n', KR_CLI_FLAG, NULL, 0, 0, NULL,
      "keep batch_wait_ms and the batch limit fixed" },
    { "request-timeout", 'r', KR_CLI_NUM, "S", 0, 0, NULL,
      "per-request deadline in seconds (default 120) -> 504" },
    { "drain-delay", 'D', KR_CLI_NUM, "S", 0, 0, NULL,
      "on a signal, /ready answers 503 for S seconds while requests\nare still served, then the "
      "drain (default 0; behind a load\nbalancer: longer than its health-check interval)" },
    KR_CLI_OPT_DB(
        "candle store of /v1/candles and /v1/analyze: a file, or a\nPostgreSQL URL "
        "postgresql://... that replicas share\n(default as for 'kronos analyze': $KRONOS_DB, else "
        "the XDG\ndata directory)"),
    { "web-root", 'w', KR_CLI_DIR, "DIR", 0, 0, NULL,
      "files of the web page (default: the built web/dist)" },
    KR_CLI_OPT_ALLOW_NONFINITE(KR_CLI_HELP_ALLOW_NONFINITE),
    { "no-mmap", 'M', KR_CLI_FLAG, NULL, 0, 0, NULL,
      "read the checkpoint into memory instead of mapping it:\nreplacing or truncating the files "
      "while serving is then\nharmless (a mapped file rewritten in place crashes the\nserver); "
      "costs the page cache shared between processes" },
    { "access-log", 'L', KR_CLI_FILE, "FILE|-", 0, 0, NULL,
      "one JSON line per request (appended; - = stdout)" },
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos serve` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_serve_spec = {
    "serve",
    "[flags]",
    "serve forecasts over HTTP (continuous batching, prefix cache, metrics)",
    "Serves forecasts over HTTP: POST /v1/forecast, GET /v1/models, /health, /ready,\n"
    "/metrics; the candle store and reports: /v1/symbols, /v1/candles/SYMBOL,\n"
    "/v1/analyze, /v1/analyze/batch; and a web page at / (see docs/api.md).\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    24,
    NULL,
    "Signals: SIGTERM and SIGINT drain (/ready 503; after --drain-delay, new requests\n"
    "503; accepted ones answered) and exit 0; a second one during the drain stops at once.\n"
    "SIGHUP with --config reads the file again and loads, replaces or unloads the models\n"
    "of its \"models\" key (requests in flight finish on the old weights; other keys need a\n"
    "restart); without --config SIGHUP drains like SIGTERM.\n"
    "SIGUSR1 reopens the --access-log file (after logrotate has moved it).\n"
    "Under systemd (Type=notify, $NOTIFY_SOCKET): READY once listening, a STATUS line,\n"
    "STOPPING at a drain, and WatchdogSec pings sent only while the engine runs.\n"
    "\n"
    "Exit status: 0 after a drain (or a good --check-config); 1 when the start fails\n"
    "(model, port, store); 2 for a bad flag or config value, named; killed by the\n"
    "signal itself after a second SIGTERM or SIGINT.\n",
};

typedef struct flags {
    const char *model, *tokenizer, *host, *port, *config, *quant, *kv_dtype, *threads, *kv_budget,
        *api_key_file, *timeout, *drain_delay, *db, *web_root, *access_log;
    int no_tune, check, allow_nonfinite, no_mmap;
} flags;

static int parse_flags(int argc, char **argv, flags *fl) {
    const kr_cli_forecast_flags shared = { .model = &fl->model,
                                           .tokenizer = &fl->tokenizer,
                                           .allow_nonfinite = &fl->allow_nonfinite,
                                           .db = &fl->db };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_serve_spec, &shared, argc, argv);
    /* An empty value is a mistake, never a choice: `--api-key-file "$UNSET"` must not serve
     * without authentication, `--model ''` the demo model, `--access-log ''` no log. Every
     * flag's value, named (the config file's keys refuse "" the same way). */
    ps.refuse_empty = 1;
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        switch (c) {
        case 'H': fl->host = optarg; break;
        case 'p': fl->port = optarg; break;
        case 'c': fl->config = optarg; break;
        /* Checked with the config file's values (apply_flags). */
        case KR_OPT_QUANT: fl->quant = optarg; break;
        case KR_OPT_KV_DTYPE: fl->kv_dtype = optarg; break;
        case KR_OPT_THREADS: fl->threads = optarg; break;
        case 'k': fl->kv_budget = optarg; break;
        case 'a': fl->api_key_file = optarg; break;
        case 'n': fl->no_tune = 1; break;
        case 'r': fl->timeout = optarg; break;
        case 'D': fl->drain_delay = optarg; break;
        case 'w': fl->web_root = optarg; break;
        case 'L': fl->access_log = optarg; break;
        case 'C': fl->check = 1; break;
        case 'M': fl->no_mmap = 1; break;
        }
    }
    if (ps.status) return ps.status;
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    return 0;
}

/* Flags over the config: returns 0 or a usage-error exit code. */
static int apply_flags(const flags *fl, kr_server_config *cfg) {
    char msg[600];
    if (fl->model) snprintf(cfg->model, sizeof cfg->model, "%s", fl->model);
    if (fl->tokenizer) snprintf(cfg->tokenizer, sizeof cfg->tokenizer, "%s", fl->tokenizer);
    if (fl->host) snprintf(cfg->host, sizeof cfg->host, "%s", fl->host);
    if (fl->port && !kr_arg_int(fl->port, 0, 65535, &cfg->port))
        return kr_cli_usage_error(CMD, "--port must be an integer in 0..65535, got '%s'", fl->port);
    if (fl->quant) {
        if (!kr_arg_quant(fl->quant))
            return kr_cli_usage_error(
                CMD, "--quant must be one of f32, bf16, int8, fp8, q4, got '%s'", fl->quant);
        snprintf(cfg->quant, sizeof cfg->quant, "%s", fl->quant);
    }
    if (fl->kv_dtype) {
        if (!kr_arg_kv_dtype(fl->kv_dtype))
            return kr_cli_usage_error(CMD, "--kv-dtype must be one of f32, bf16, int8, got '%s'",
                                      fl->kv_dtype);
        snprintf(cfg->kv_dtype, sizeof cfg->kv_dtype, "%s", fl->kv_dtype);
    }
    if (fl->threads && !kr_arg_int(fl->threads, 1, 1024, &cfg->threads))
        return kr_cli_usage_error(CMD, "--threads must be an integer in 1..1024, got '%s'",
                                  fl->threads);
    if (fl->kv_budget) {
        kr_error err = { 0 };
        if (kr_server_parse_kv_budget(fl->kv_budget, &cfg->sched.kv_budget_bytes, &err) != KR_OK) {
            /* The parser names the config key (kv_budget: ...); here it was the flag. */
            const char *why = err.message;
            if (!strncmp(why, "kv_budget: ", 11)) why += 11;
            return kr_cli_usage_error(CMD, "--kv-budget: %s", why);
        }
    }
    if (fl->api_key_file)
        snprintf(cfg->api_key_file, sizeof cfg->api_key_file, "%s", fl->api_key_file);
    if (fl->no_tune) cfg->sched.tune = 0;
    if (fl->timeout) {
        float t;
        if (!kr_arg_float(fl->timeout, 1e-3, 86400, &t))
            return kr_cli_usage_error(
                CMD, "--request-timeout must be seconds in (0, 86400], got '%s'", fl->timeout);
        cfg->request_timeout_s = t;
    }
    if (fl->drain_delay) {
        float t;
        if (!kr_arg_float(fl->drain_delay, 0, 600, &t))
            return kr_cli_usage_error(CMD, "--drain-delay must be seconds in [0, 600], got '%s'",
                                      fl->drain_delay);
        cfg->drain_delay_s = t;
    }
    if (fl->access_log) snprintf(cfg->access_log, sizeof cfg->access_log, "%s", fl->access_log);
    /* The web root: the flag, else the config's web_root, else the built page. One named
     * explicitly must exist. */
    struct stat sb;
    if (fl->web_root) snprintf(cfg->web_root, sizeof cfg->web_root, "%s", fl->web_root);
    if (cfg->web_root[0] && (stat(cfg->web_root, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return kr_cli_usage_error(CMD,
                                  fl->web_root ? "--web-root '%s' is not a directory"
                                               : "web_root '%s' is not a directory",
                                  cfg->web_root);
    /* Else every page would be a 404 while the server looks healthy. */
    if (cfg->web_root[0] && access(cfg->web_root, R_OK | X_OK) != 0) {
        snprintf(msg, sizeof msg, "%s '%s' cannot be read by this user: %s",
                 fl->web_root ? "--web-root" : "web_root", cfg->web_root, strerror(errno));
        return kr_cli_usage_error(CMD, "%s", msg);
    }
    if (!cfg->web_root[0]) kr_share_path("web", cfg->web_root, sizeof cfg->web_root);
    /* The config's calendar_dir, unless --calendar-dir (read before any command) named one. */
    if (cfg->calendar_dir[0] && !kr_cli_calendar_dir_given()) {
        char cal_msg[1024];
        if (kr_cli_load_calendars(cfg->calendar_dir, 0, cal_msg, sizeof cal_msg) != 0)
            return kr_cli_usage_error(CMD, "calendar_dir: %s", cal_msg);
    }
    /* The store: the flag, else the config's db, else $KRONOS_DB / the XDG data directory. It
     * is optional for serving forecasts: without one only its routes fail (503). One that was
     * asked for (--db, the config's db, KRONOS_DB) must be usable now, not at the first write. */
    char db[KR_SERVER_PATH_MAX];
    snprintf(db, sizeof db, "%s", fl->db ? fl->db : cfg->db);
    const int db_named = db[0] != '\0';
    const char *env_db = getenv("KRONOS_DB");
    const int asked = db_named || (env_db && *env_db);
    kr_error err = { 0 };
    if (kr_store_resolve_path(db_named ? db : NULL, cfg->db, sizeof cfg->db, &err) != KR_OK ||
        kr_store_check_writable(cfg->db, &err) != KR_OK) {
        /* A database server that is down or restarting is no misconfiguration: a replica
         * starts (its forecasts need no store) and its store routes answer 503 with
         * Retry-After until the database is back. --check-config still says it failed. */
        if (err.status == KR_ERR_UNAVAILABLE && !fl->check) {
            fprintf(stderr,
                    "kronos %s: warning: %s; serving anyway: /v1/candles and /v1/analyze from "
                    "the store answer 503 with Retry-After until it can be reached\n",
                    CMD, err.message);
            return 0;
        }
        if (asked) return kr_cli_fail(CMD, err.message);
        fprintf(stderr,
                "kronos %s: warning: no candle store (%s); /v1/candles and /v1/analyze "
                "answer 503\n",
                CMD, err.message);
        cfg->db[0] = '\0';
    }
    return 0;
}

/* --check-config: what start-up would refuse, refused now; the rest printed. */
/* The engine's settings in effect: what decides who waits and for how long. */
static void print_scheduler(const kr_server_config *cfg) {
    const kr_context_params *p = &cfg->sched;
    char budget[64];
    if (p->kv_budget_bytes)
        snprintf(budget, sizeof budget, "%.1f MiB", (double)p->kv_budget_bytes / (1 << 20));
    else
        snprintf(budget, sizeof budget, "25%% of RAM");
    printf("  scheduler   kv budget %s, batch wait %d ms, max batch tokens %d, max running %d,\n"
           "              max queue %d, prefix cache %s, backfill %s, %s batching, tuner %s\n",
           budget, p->batch_wait_ms, p->max_batch_tokens, p->max_running, p->max_queue,
           p->prefix_cache ? "on" : "off", p->backfill ? "on" : "off",
           p->static_batching ? "static" : "continuous", p->tune ? "on" : "off");
    printf("  profiles    %d", cfg->n_profiles);
    for (int i = 0; i < cfg->n_profiles; i++) {
        const kr_server_profile *pr = &cfg->profiles[i];
        printf("%s%s %02d:%02d-%02d:%02d", i ? ", " : " (", pr->name, pr->from_min / 60,
               pr->from_min % 60, pr->to_min / 60, pr->to_min % 60);
    }
    printf("%s\n", cfg->n_profiles ? ")" : "");
    if (cfg->llm_url[0])
        printf("  narrative   model %s, timeout %g s\n",
               cfg->llm_model[0] ? cfg->llm_model : KR_NARRATIVE_DEFAULT_MODEL, cfg->llm_timeout_s);
    else
        printf("  narrative   off (no llm_url)\n");
}

static int check_config(const kr_server_config *cfg, const char *pred_dir, const char *tok_dir) {
    kr_error err = { 0 };
    char key[256];
    if (cfg->api_key_file[0] &&
        kr_auth_load_key_file(cfg->api_key_file, key, sizeof key, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "api_key_file: %s", err.message);
    char warning[KR_SERVER_PATH_MAX + 200];
    if (kr_auth_key_file_exposed(cfg->api_key_file, warning, sizeof warning))
        fprintf(stderr, "kronos %s: %s\n", CMD, warning);
    /* A port held by another process is only a warning: the usual case is the running server
     * itself, while its next config is checked. */
    if (kr_server_check_listen(cfg, &err) != KR_OK) {
        if (err.status != KR_ERR_BUSY) return kr_cli_usage_error(CMD, "%s", err.message);
        fprintf(stderr, "kronos %s: warning: %s; in use now, so a start fails until it is free\n",
                CMD, err.message);
    }
    char db_shown[KR_SERVER_PATH_MAX];
    kr_store_display_name(cfg->db, db_shown, sizeof db_shown);
    printf("kronos serve: config OK\n"
           "  listen      %s:%d\n"
           "  model       %s\n"
           "  tokenizer   %s\n"
           "  quant       %s, kv %s\n"
           "  api key     %s\n"
           "  db          %s\n"
           "  web root    %s\n"
           "  access log  %s\n"
           "  limits      body %zu B, rows %d, request memory %zu B, in flight %zu B,\n"
           "              read timeout %g s, request timeout %g s, connections %d (%d per "
           "address)\n",
           cfg->host, cfg->port, pred_dir, tok_dir, cfg->quant, cfg->kv_dtype,
           cfg->api_key_file[0] ? cfg->api_key_file : "none (no authentication)",
           db_shown[0] ? db_shown : "none (/v1/candles and /v1/analyze answer 503)", cfg->web_root,
           cfg->access_log[0] ? cfg->access_log : "off", cfg->max_body_bytes, cfg->max_rows,
           cfg->max_request_memory, cfg->max_memory_in_flight, cfg->read_timeout_s,
           cfg->request_timeout_s, cfg->max_connections, cfg->max_connections_per_ip);
    print_scheduler(cfg);
    return 0;
}

static void log_line(void *user, const char *line) {
    (void)user;
    char ts[32];
    time_t t = time(NULL);
    struct tm lt;
    localtime_r(&t, &lt);
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &lt);
    fprintf(stderr, "%s kronos serve: %s\n", ts, line);
}

/* Serving quantised weights (or a quantised KV cache) made from an f32 checkpoint: load that
 * checkpoint again as the one-thread f32 shadow behind kronos_quant_drift. A checkpoint that
 * is quantised on disk has no f32 original here, so there is no shadow (said once). */
static int attach_shadow(kr_server *srv, const kr_model *model, const kr_server_config *cfg,
                         const char *pred_dir, const char *tok_dir, const kr_model_params *load) {
    kr_model_info mi;
    kr_model_get_info(model, &mi);
    int quantised = strcmp(mi.quant, "f32") != 0 || strcmp(cfg->kv_dtype, "f32") != 0;
    if (!quantised || cfg->drift_sample <= 0) return 0;
    if (!kr_server_shadow_planned(model, cfg)) {
        fprintf(stderr,
                "kronos serve: %s is quantised on disk: no f32 original to shadow, "
                "kronos_quant_drift is not exported\n",
                pred_dir);
        return 0;
    }
    kr_model_params sp = *load;
    sp.quant = NULL; /* the f32 original */
    kr_model *shadow = NULL;
    kr_error err = { 0 };
    if (kr_model_load(pred_dir, tok_dir, &sp, &shadow, &err) != KR_OK ||
        kr_server_attach_shadow(srv, shadow, cfg->drift_sample, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    fprintf(stderr,
            "kronos serve: f32 shadow on %.0f%% of forecasts -> kronos_quant_drift (its KV "
            "cache: a quarter of the KV budget)\n",
            cfg->drift_sample * 100);
    return 0;
}

/* The drain runs on its own thread so the main thread keeps listening for a second signal. */
typedef struct drain_job {
    kr_server *srv;
    double grace_s;
    atomic_int done;
} drain_job;

static void *drain_main(void *arg) {
    drain_job *d = arg;
    kr_server_drain(d->srv, d->grace_s);
    atomic_store(&d->done, 1);
    return NULL;
}

static const char *sig_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
}

/* SIGUSR1: the access log's file was rotated; open its path again. */
static void reopen_logs(kr_server *srv) {
    kr_error err = { 0 };
    char line[1200];
    if (kr_server_reopen_logs(srv, &err) == KR_OK)
        snprintf(line, sizeof line, "SIGUSR1: access log reopened");
    else
        snprintf(line, sizeof line, "SIGUSR1: %s; still writing to the old file", err.message);
    log_line(NULL, line);
}

/* SIGHUP with a --config file: read it again and make the served models match its "models"
 * and default_model (in-flight requests finish on the weights they started on). */
static void reload_models(kr_server *srv, const char *config_path) {
    kr_server_config *c = malloc(sizeof *c);
    kr_error err = { 0 };
    char line[1400];
    kr_status st = c ? KR_OK : kr_error_set(&err, KR_ERR_NOMEM, "out of memory");
    if (st == KR_OK) {
        kr_server_config_defaults(c);
        st = kr_server_config_load(config_path, c, &err);
    }
    if (st == KR_OK) st = kr_server_reload_models(srv, c, &err);
    if (st == KR_OK)
        snprintf(line, sizeof line, "SIGHUP: models reloaded from %s", config_path);
    else
        snprintf(line, sizeof line, "SIGHUP: models not (all) reloaded: %s", err.message);
    log_line(NULL, line);
    free(c);
}

/* Waits for the first signal (SIGUSR1 only reopens the log; SIGHUP with a config file reloads
 * its models), drains, and returns when the drain is over; a second SIGTERM or SIGINT
 * meanwhile ends the process at once, by that signal. */
static void serve_until_signal(kr_server *srv, const sigset_t *sigs, double grace_s,
                               serve_notifier *notifier, const char *config_path) {
    int sig = 0;
    while (sigwait(sigs, &sig) == 0 && (sig == SIGUSR1 || (sig == SIGHUP && config_path))) {
        if (sig == SIGUSR1)
            reopen_logs(srv);
        else
            reload_models(srv, config_path);
    }
    char line[160];
    snprintf(line, sizeof line,
             "%s: draining (SIGTERM or SIGINT again stops at once, cutting what is in flight)",
             sig_name(sig));
    log_line(NULL, line);
    snprintf(line, sizeof line, "draining after %s", sig_name(sig));
    serve_notifier_stopping(notifier, line);
    drain_job d = { srv, grace_s, 0 };
    pthread_t th;
    if (pthread_create(&th, NULL, drain_main, &d) != 0) {
        drain_main(&d);
        return;
    }
    const struct timespec tick = { 0, 100 * 1000 * 1000 };
    while (!atomic_load(&d.done)) {
        siginfo_t si;
        int again = sigtimedwait(sigs, &si, &tick);
        if (again < 0) continue; /* EAGAIN: a tick; EINTR */
        if (again == SIGUSR1) {
            reopen_logs(srv);
            continue;
        }
        if (again == SIGHUP) {
            log_line(NULL, "SIGHUP during the drain: ignored (SIGTERM or SIGINT stops at once)");
            continue;
        }
        snprintf(line, sizeof line, "second %s during the drain: stopping now", sig_name(again));
        log_line(NULL, line);
        fflush(stderr);
        /* Die by the signal itself, so the exit status says what happened. */
        signal(again, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, again);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        raise(again);
        _exit(128 + again); /* not reached */
    }
    pthread_join(th, NULL);
}

int kr_cmd_serve(int argc, char **argv) {
    /* `systemctl kill -s USR1` (a log rotation) signals every process of the unit, an
     * ExecStartPre `--check-config` too, whose default action would be to die: held from the
     * start, and taken by the sigwait below once the server runs. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    flags fl;
    memset(&fl, 0, sizeof fl);
    int rc = parse_flags(argc, argv, &fl);
    if (rc != 0) return rc < 0 ? 0 : rc;

    static kr_server_config cfg; /* ~30 KB of paths: keep it off the stack */
    kr_server_config_defaults(&cfg);
    kr_error err = { 0 };
    if (fl.config && kr_server_config_load(fl.config, &cfg, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    if ((rc = apply_flags(&fl, &cfg)) != 0) return rc;
    if (kr_server_config_validate(&cfg, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    /* Before the model loads (and for --check-config): a log that cannot be one (a FIFO would
     * block the start) or cannot be written. */
    if (cfg.access_log[0] && kr_server_check_access_log(cfg.access_log, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    cfg.sched.log = log_line;

    char pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[1024];
    int resolved = kr_resolve_model_dirs(cfg.model[0] ? cfg.model : NULL,
                                         cfg.tokenizer[0] ? cfg.tokenizer : NULL, pred_dir, tok_dir,
                                         msg, sizeof msg);
    if (resolved != 0) /* -2: a hub name not pulled yet is a runtime error, not a usage one */
        return resolved == -2 ? kr_cli_fail(CMD, msg) : kr_cli_usage_error(CMD, "%s", msg);
    snprintf(cfg.model, sizeof cfg.model, "%s", pred_dir);
    snprintf(cfg.tokenizer, sizeof cfg.tokenizer, "%s", tok_dir);
    if (fl.check) return check_config(&cfg, pred_dir, tok_dir);

    /* The signals are blocked before any thread starts, so every thread inherits the mask
     * and only the main thread's sigwait receives them: no async-signal-safety puzzles. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Request bodies (up to max_body_bytes) are large, short-lived buffers: a fixed mmap
     * threshold hands them back to the system when freed, where glibc's adaptive threshold
     * would soon keep them in the heap after the first free. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);

    kr_model_params mp = kr_model_default_params();
    mp.quant = cfg.quant;
    mp.allow_nonfinite = fl.allow_nonfinite || cfg.allow_nonfinite_weights;
    mp.no_mmap = fl.no_mmap || cfg.no_mmap;
    kr_model *model = NULL;
    if (kr_model_load(pred_dir, tok_dir, &mp, &model, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    kr_server *srv = NULL;
    if (kr_server_create(model, &cfg, &srv, &err) != KR_OK) {
        kr_model_free(model);
        return kr_cli_fail(CMD, err.message);
    }
    if (attach_shadow(srv, model, &cfg, pred_dir, tok_dir, &mp) != 0) {
        kr_server_free(srv);
        kr_model_free(model);
        return 1;
    }
    kr_model_info mi;
    kr_model_get_info(model, &mi);
    if (mi.demo)
        fprintf(stderr,
                "kronos serve: DEMO MODEL \xe2\x80\x94 not a forecast: %s declares itself a "
                "demo/test checkpoint (%s); every report and the web page say so\n",
                pred_dir, mi.source[0] ? mi.source : "no source given");
    /* What an operator checks first in the journal: which model, store, page and log. */
    char db_shown[KR_SERVER_PATH_MAX], summary[4 * KR_SERVER_PATH_MAX];
    kr_store_display_name(cfg.db, db_shown, sizeof db_shown);
    snprintf(summary, sizeof summary,
             "serving %s (quant %s, kv %s; tokenizer %s); store %s; web page %s; access log %s; "
             "API key %s",
             pred_dir, mi.quant, cfg.kv_dtype, tok_dir, db_shown[0] ? db_shown : "none (503)",
             cfg.web_root, cfg.access_log[0] ? cfg.access_log : "off",
             cfg.api_key_file[0] ? cfg.api_key_file : "none (no authentication)");
    log_line(NULL, summary);
    const char *host = cfg.host;
    int v6 = strchr(host, ':') != NULL;
    char url[320];
    snprintf(url, sizeof url, "http://%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "",
             kr_server_port(srv));
    fprintf(stderr, "listening on %s\n", url);
    fflush(stderr);
    char status[400];
    snprintf(status, sizeof status, "serving on %s", url);
    serve_notifier *notifier = serve_notifier_start(srv, status, log_line);

    serve_until_signal(srv, &sigs, cfg.request_timeout_s, notifier, fl.config);
    serve_notifier_free(notifier);
    kr_server_free(srv);
    kr_model_free(model);
    log_line(NULL, "stopped");
    return 0;
}
