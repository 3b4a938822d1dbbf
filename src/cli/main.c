/*
 * cli/main — the `kronos` executable: dispatches to one function per command. Each command
 * parses only its own flags; the work happens in the library.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/options.h"
#include "kronos.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    const kr_cli_command *spec; /* its option table; NULL: no flags (a left-out command) */
    const kr_cli_command *(*spec_of)(void); /* a table built at run time, instead of spec */
} command;

extern const kr_cli_command kr_cli_calendars_spec, kr_cli_version_spec, kr_cli_ingest_spec,
    kr_cli_forecast_spec, kr_cli_analyze_spec, kr_cli_quantize_spec, kr_cli_eval_quant_spec,
    kr_cli_bench_spec, kr_cli_gen_random_spec, kr_cli_serve_spec, kr_cli_store_spec,
    kr_cli_backtest_spec, kr_cli_pull_spec;

/* The option tables of the commands a build left out (cmd_unavailable.c stands in for them):
 * none, so their help, completion and man page entry say "built without ...". */
#if KRONOS_BUILD_ANALYST
#define KR_ANALYZE_SPEC (&kr_cli_analyze_spec)
#else
#define KR_ANALYZE_SPEC NULL
#endif
#if KRONOS_BUILD_EVAL
#define KR_BENCH_SPEC (&kr_cli_bench_spec)
#define KR_EVAL_QUANT_SPEC (&kr_cli_eval_quant_spec)
#define KR_BACKTEST_SPEC (&kr_cli_backtest_spec)
#else
#define KR_BENCH_SPEC NULL
#define KR_EVAL_QUANT_SPEC NULL
#define KR_BACKTEST_SPEC NULL
#endif
#if KRONOS_BUILD_SERVER
#define KR_SERVE_SPEC (&kr_cli_serve_spec)
#else
#define KR_SERVE_SPEC NULL
#endif

static const command k_commands[] = {
    { "forecast", kr_cmd_forecast,
      "forecast candles from CSV or JSON files (mean path, paths, quantiles)",
      &kr_cli_forecast_spec, NULL },
    { "gen-random", kr_cmd_gen_random, "write a random-weight checkpoint of a real Kronos shape",
      &kr_cli_gen_random_spec, NULL },
    { "bench", kr_cmd_bench, "time forecasts: KV cache vs full recomputation, paths, shapes",
      KR_BENCH_SPEC, NULL },
    { "serve", kr_cmd_serve,
      "serve forecasts over HTTP (continuous batching, prefix cache, metrics)", KR_SERVE_SPEC,
      NULL },
    { "ingest", kr_cmd_ingest,
      "store a candle CSV under a symbol and interval in the local database", &kr_cli_ingest_spec,
      NULL },
    { "store", kr_cmd_store, "list the stored series, or delete one (or a range of its candles)",
      &kr_cli_store_spec, NULL },
    { "analyze", kr_cmd_analyze, "report on stored symbols: forecast statistics, risk, technicals",
      KR_ANALYZE_SPEC, NULL },
    { "backtest", kr_cmd_backtest,
      "does the model beat a naive forecast? rolling-origin scores, tests, a strategy",
      KR_BACKTEST_SPEC, NULL },
    { "quantize", kr_cmd_quantize,
      "write a bf16 / int8 / fp8 / q4 checkpoint, calibrated on candle files",
      &kr_cli_quantize_spec, NULL },
    { "eval-quant", kr_cmd_eval_quant,
      "measure what a quantised format costs in accuracy against f32", KR_EVAL_QUANT_SPEC, NULL },
    { "finetune", kr_cmd_finetune,
      "fine-tune the tokenizer and predictor on candles (the official finetune_csv YAML)", NULL,
      kr_cli_finetune_spec },
    { "pull", kr_cmd_pull, "download a Kronos checkpoint from the Hugging Face hub into its cache",
      &kr_cli_pull_spec, NULL },
    { "calendars", kr_cmd_calendars,
      "list the exchange calendars: each market's years of holidays and their source",
      &kr_cli_calendars_spec, NULL },
    { "version", kr_cmd_version,
      "version, commit, build type, CPU kernels and libraries of this build", &kr_cli_version_spec,
      NULL },
    { "completion", kr_cmd_completion, "write the bash or zsh completion script", NULL, NULL },
    { "man", kr_cmd_man, "write the man page kronos(1)", NULL, NULL },
};

int kr_cli_describe(kr_cli_described *out, int cap) {
    int n = 0;
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0] && n < cap; i++) {
        const command *c = &k_commands[i];
        const kr_cli_command *spec = c->spec_of ? c->spec_of() : c->spec;
        kr_cli_described *d = &out[n++];
        memset(d, 0, sizeof *d);
        d->name = c->name;
        d->summary = c->summary;
        if (!spec) continue;
        d->synopsis = spec->synopsis;
        d->opts = spec->opts;
        d->n_opts = spec->n_opts;
        d->operands = spec->operands;
    }
    return n;
}

static void usage(FILE *f) {
    fprintf(f,
            "kronos %s — Kronos K-line foundation models on the CPU\n\nusage: kronos <command> "
            "[flags]\n\ncommands:\n",
            kr_version());
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-12s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\n'kronos help <command>' (or 'kronos <command> --help') describes a command's "
               "flags.\nEvery command also takes --calendar-dir DIR: exchange calendar files "
               "that replace or extend\nthe shipped ones (also $KRONOS_CALENDAR_DIR; see "
               "'kronos calendars --help').\n");
}

/* What a command printed to stdout, flushed and checked: a result that fitted in stdio's
 * buffer was lost with status 0 when the disk was full (> /dev/full) or stdout closed, so a
 * script writing "> out.csv" saw success. As coreutils' close_stdout. */
static int finish_stdout(int rc) {
    const int flushed = fflush(stdout) == 0;
    if (flushed && !ferror(stdout)) return rc;
    const int e = flushed ? 0 : errno; /* ferror alone: an earlier write, its errno gone */
    if (e == EPIPE) return rc ? rc : 141; /* a reader that left: as SIGPIPE would say */
    fprintf(stderr, "kronos: error writing standard output%s%s\n", e ? ": " : "",
            e ? strerror(e) : "");
    return rc ? rc : 1;
}

/* --calendar-dir DIR (or =DIR), which every command takes, is removed from argv before the
 * command parses its own flags; the calendars are loaded either way, so the shipped files and
 * $KRONOS_CALENDAR_DIR apply to every command. 0, or 2 after a message. */
static int take_calendar_dir(int *argc, char **argv) {
    const char *dir = NULL;
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        if (i >= 2 && !strcmp(argv[i], "--")) { /* the rest are operands */
            while (i < *argc) argv[out++] = argv[i++];
            break;
        }
        if (i >= 2 && !strncmp(argv[i], "--calendar-dir=", 15)) {
            dir = argv[i] + 15;
            continue;
        }
        if (i >= 2 && !strcmp(argv[i], "--calendar-dir")) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "kronos %s: error: --calendar-dir needs a directory\n", argv[1]);
                return 2;
            }
            dir = argv[++i];
            continue;
        }
        argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    if (dir && !*dir) {
        fprintf(stderr, "kronos %s: error: --calendar-dir must not be empty\n", argv[1]);
        return 2;
    }
    char msg[1024];
    if (kr_cli_load_calendars(dir, dir != NULL, msg, sizeof msg) != 0) {
        fprintf(stderr, "kronos %s: error: %s\n", argv[1], msg);
        return 2;
    }
    return 0;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") && argc >= 3) {
        /* kronos help CMD = kronos CMD --help */
        for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
            if (!strcmp(argv[2], k_commands[i].name)) {
                char *help_argv[] = { argv[2], "--help", NULL };
                return k_commands[i].run(2, help_argv);
            }
        fprintf(stderr, "kronos help: unknown command '%s'\n\n", argv[2]);
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kronos %s\n", kr_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name)) {
            if (take_calendar_dir(&argc, argv) != 0) return 2;
            return k_commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "kronos: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) { return finish_stdout(run(argc, argv)); }
