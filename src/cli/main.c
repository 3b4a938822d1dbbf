/*
 * cli/main — the `kronos` executable: dispatches to one function per command. Each command
 * parses only its own flags; the work happens in the library.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "kronos.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    const kr_cli_command *spec; /* its option table, NULL: described by its --help */
} command;

extern const kr_cli_command kr_cli_calendars_spec, kr_cli_version_spec, kr_cli_ingest_spec,
    kr_cli_forecast_spec, kr_cli_analyze_spec, kr_cli_quantize_spec, kr_cli_eval_quant_spec,
    kr_cli_bench_spec;

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
#else
#define KR_BENCH_SPEC NULL
#define KR_EVAL_QUANT_SPEC NULL
#endif

static const command k_commands[] = {
    { "forecast", kr_cmd_forecast,
      "forecast candles from CSV or JSON files (mean path, paths, quantiles)",
      &kr_cli_forecast_spec },
    { "gen-random", kr_cmd_gen_random, "write a random-weight checkpoint of a real Kronos shape",
      NULL },
    { "bench", kr_cmd_bench, "time forecasts: KV cache vs full recomputation, paths, shapes",
      KR_BENCH_SPEC },
    { "serve", kr_cmd_serve,
      "serve forecasts over HTTP (continuous batching, prefix cache, metrics)", NULL },
    { "ingest", kr_cmd_ingest,
      "store a candle CSV under a symbol and interval in the local database", &kr_cli_ingest_spec },
    { "store", kr_cmd_store, "list the stored series, or delete one (or a range of its candles)",
      NULL },
    { "analyze", kr_cmd_analyze, "report on stored symbols: forecast statistics, risk, technicals",
      KR_ANALYZE_SPEC },
    { "backtest", kr_cmd_backtest,
      "does the model beat a naive forecast? rolling-origin scores, tests, a strategy", NULL },
    { "quantize", kr_cmd_quantize,
      "write a bf16 / int8 / fp8 / q4 checkpoint, calibrated on candle files",
      &kr_cli_quantize_spec },
    { "eval-quant", kr_cmd_eval_quant,
      "measure what a quantised format costs in accuracy against f32", KR_EVAL_QUANT_SPEC },
    { "finetune", kr_cmd_finetune,
      "fine-tune the tokenizer and predictor on candles (the official finetune_csv YAML)", NULL },
    { "pull", kr_cmd_pull, "download a Kronos checkpoint from the Hugging Face hub into its cache",
      NULL },
    { "calendars", kr_cmd_calendars,
      "list the exchange calendars: each market's years of holidays and their source",
      &kr_cli_calendars_spec },
    { "version", kr_cmd_version,
      "version, commit, build type, CPU kernels and libraries of this build",
      &kr_cli_version_spec },
    { "completion", kr_cmd_completion, "write the bash or zsh completion script", NULL },
    { "man", kr_cmd_man, "write the man page kronos(1)", NULL },
};

/* What `kronos CMD --help` prints, captured (the command writes to stdout). */
static void help_text(const command *c, char *out, size_t cap) {
    out[0] = '\0';
    FILE *tmp = tmpfile();
    if (!tmp) return;
    fflush(stdout);
    const int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(tmp), STDOUT_FILENO) < 0) {
        if (saved >= 0) close(saved);
        fclose(tmp);
        return;
    }
    char *help_argv[] = { (char *)c->name, "--help", NULL };
    c->run(2, help_argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(tmp);
    const size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

int kr_cli_describe_commands(kr_cli_described *out, int cap, kr_cli_opt (*opts)[KR_CLI_MAX_OPTS],
                             char (*text)[KR_CLI_HELP_TEXT]) {
    int n = 0;
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0] && n < cap; i++) {
        const command *c = &k_commands[i];
        kr_cli_described *d = &out[n++];
        memset(d, 0, sizeof *d);
        d->name = c->name;
        d->summary = c->summary;
        if (c->spec) {
            d->synopsis = c->spec->synopsis;
            d->opts = c->spec->opts;
            d->n_opts = c->spec->n_opts;
            d->operands = c->spec->operands;
            continue;
        }
        if (c->run == kr_cmd_completion || c->run == kr_cmd_man) continue;
        char help[16384];
        help_text(c, help, sizeof help);
        /* "usage: kronos NAME SYNOPSIS" -> the synopsis, kept in text[] after the flags. */
        d->n_opts =
            kr_cli_opts_from_help(help, opts[i], KR_CLI_MAX_OPTS, text[i], KR_CLI_HELP_TEXT - 512);
        d->opts = opts[i];
        const char *u = strstr(help, "usage: kronos ");
        if (u) {
            u += strlen("usage: kronos ") + strlen(c->name);
            while (*u == ' ') u++;
            const char *e = strchr(u, '\n');
            const size_t len = e ? (size_t)(e - u) : strlen(u);
            char *syn = text[i] + KR_CLI_HELP_TEXT - 512;
            snprintf(syn, 512, "%.*s", (int)(len < 511 ? len : 511), u);
            d->synopsis = syn;
        }
        d->operands = strstr(d->synopsis ? d->synopsis : "", "FILE") ||
                              strstr(d->synopsis ? d->synopsis : "", "CSV")
                          ? KR_CLI_FILE
                          : KR_CLI_FLAG;
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
