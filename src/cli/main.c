/*
 * cli/main — the `kronos` executable: dispatches to one function per command. Each command
 * parses only its own flags; the work happens in the library.
 */
#include <errno.h>
#include <stddef.h>
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
    { "quantize", kr_cmd_quantize,
      "write a bf16 / int8 / fp8 / q4 checkpoint, calibrated on candle files" },
    { "eval-quant", kr_cmd_eval_quant,
      "measure what a quantised format costs in accuracy against f32" },
    { "pull", kr_cmd_pull,
      "download a Kronos checkpoint from the Hugging Face hub into its cache" },
    { "calendars", kr_cmd_calendars,
      "list the exchange calendars: each market's years of holidays and their source" },
    { "version", kr_cmd_version,
      "version, commit, build type, CPU kernels and libraries of this build" },
};

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
