/*
 * cli/main — the `kronos` executable: dispatches to one function per command. Each command
 * parses only its own flags; the work happens in the library.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "kronos.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command k_commands[] = {
    { "forecast", kr_cmd_forecast,
      "forecast candles from CSV or JSON files (mean path, paths, quantiles)" },
    { "gen-random", kr_cmd_gen_random, "write a random-weight checkpoint of a real Kronos shape" },
    { "bench", kr_cmd_bench, "time forecasts: KV cache vs full recomputation, paths, shapes" },
    { "serve", kr_cmd_serve,
      "serve forecasts over HTTP (continuous batching, prefix cache, metrics)" },
    { "ingest", kr_cmd_ingest,
      "store a candle CSV under a symbol and interval in the local database" },
    { "store", kr_cmd_store, "list the stored series, or delete one (or a range of its candles)" },
    { "analyze", kr_cmd_analyze,
      "report on stored symbols: forecast statistics, risk, technicals" },
    { "backtest", kr_cmd_backtest,
      "does the model beat a naive forecast? rolling-origin scores, tests, a strategy" },
    { "quantize", kr_cmd_quantize,
      "write a bf16 / int8 / fp8 / q4 checkpoint, calibrated on candle files" },
    { "eval-quant", kr_cmd_eval_quant,
      "measure what a quantised format costs in accuracy against f32" },
    { "pull", kr_cmd_pull,
      "download a Kronos checkpoint from the Hugging Face hub into its cache" },
};

static void usage(FILE *f) {
    fprintf(f,
            "kronos %s — Kronos K-line foundation models on the CPU\n\nusage: kronos <command> "
            "[flags]\n\ncommands:\n",
            kr_version());
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-12s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\n'kronos help <command>' (or 'kronos <command> --help') describes a command's "
               "flags.\n");
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
        if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kronos: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) { return finish_stdout(run(argc, argv)); }
