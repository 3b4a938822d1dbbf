/*
 * cli/cmd_pull — `kronos pull REPO`: downloads a Kronos checkpoint from the Hugging Face hub
 * into the hub cache (hub/hub.h does the work) and prints the snapshot directory on stdout,
 * so `--model "$(kronos pull ORG/NAME)"` works in scripts. Progress goes to stderr: a bar
 * redrawn in place on a terminal, an occasional plain line otherwise (logs, CI).
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "kronos/hub.h"

#define CMD "pull"

static const kr_cli_opt k_opts[] = {
    { "revision", 'r', KR_CLI_TEXT, "REV", 0, 0, NULL, "branch, tag or commit (default main)" },
    { "cache-dir", 'c', KR_CLI_DIR, "DIR", 0, 0, NULL,
      "hub cache directory (default $HF_HUB_CACHE, else $HF_HOME/hub,\nelse "
      "~/.cache/huggingface/hub)" },
    { "quiet", 'q', KR_CLI_FLAG, NULL, 0, 0, NULL, "no progress output" },
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos pull` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_pull_spec = {
    "pull",
    "REPO [--revision REV] [--cache-dir DIR] [--quiet]",
    "download a Kronos checkpoint from the Hugging Face hub into its cache",
    "Downloads config.json and model.safetensors (and README.md when there is one) of\n"
    "the Hugging Face model repository REPO (e.g. NeoQuasar/Kronos-small,\n"
    "NeoQuasar/Kronos-Tokenizer-base) into the hub cache, resuming an interrupted\n"
    "download and checking sizes and sha256. Prints the snapshot directory. Afterwards\n"
    "--model REPO / --tokenizer REPO of the other commands find it offline.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    16,
    NULL,
    "Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (private or\n"
    "gated repositories), HF_HOME, HF_HUB_CACHE. See docs/pull.md.\n",
};

typedef struct progress_out {
    int tty; /* stderr is a terminal: redraw a bar in place */
    int bar_drawn; /* a bar line without its newline is on screen */
    double last_print; /* monotonic seconds of the last redraw / line */
} progress_out;

static double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bytes in a human unit (decimal, as download tools and the hub show them). */
static const char *human(int64_t b, char *buf, size_t n) {
    if (b < 1000)
        snprintf(buf, n, "%" PRId64 " B", b);
    else if (b < 1000000)
        snprintf(buf, n, "%.1f kB", (double)b / 1e3);
    else if (b < 1000000000)
        snprintf(buf, n, "%.1f MB", (double)b / 1e6);
    else
        snprintf(buf, n, "%.2f GB", (double)b / 1e9);
    return buf;
}

static double speed_mbs(const kr_hub_progress *p) {
    return p->seconds > 0 ? (double)(p->done - p->resumed) / 1e6 / p->seconds : 0;
}

static void draw_bar(progress_out *o, const kr_hub_progress *p) {
    char a[32], b[32];
    enum { WIDTH = 24 };
    char bar[WIDTH + 1];
    int pct = p->total > 0 ? (int)(100.0 * (double)p->done / (double)p->total) : 0;
    int fill = p->total > 0 ? (int)((double)WIDTH * (double)p->done / (double)p->total) : 0;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    if (p->total >= 0)
        fprintf(stderr, "\r  %-20s [%s] %s / %s %3d%% %6.1f MB/s\033[K", p->file, bar,
                human(p->done, a, sizeof a), human(p->total, b, sizeof b), pct, speed_mbs(p));
    else
        fprintf(stderr, "\r  %-20s %s %6.1f MB/s\033[K", p->file, human(p->done, a, sizeof a),
                speed_mbs(p));
    fflush(stderr);
    o->bar_drawn = 1;
}

/* Starts a line of its own: on a terminal the bar line is overwritten in place, elsewhere it
 * was never drawn. */
static void line_start(progress_out *o) {
    if (o->bar_drawn) fputs("\r\033[K", stderr);
    o->bar_drawn = 0;
}

static int on_progress(const kr_hub_progress *p, void *user) {
    progress_out *o = user;
    char a[32], b[32];
    double now = mono_seconds();
    switch (p->event) {
    case KR_HUB_FILE_START:
        line_start(o);
        if (o->tty) {
            draw_bar(o, p); /* the bar names the file and size */
        } else if (p->done > 0) {
            fprintf(stderr, "%s: %s: resuming at %s of %s\n", p->repo, p->file,
                    human(p->done, a, sizeof a),
                    p->total >= 0 ? human(p->total, b, sizeof b) : "?");
        } else {
            fprintf(stderr, "%s: %s: downloading %s\n", p->repo, p->file,
                    p->total >= 0 ? human(p->total, b, sizeof b) : "(size unknown)");
        }
        o->last_print = now;
        break;
    case KR_HUB_FILE_PROGRESS:
        /* A terminal redraws ~10 times a second; a log gets a line every 10 s. */
        if (o->tty && now - o->last_print >= 0.1) {
            draw_bar(o, p);
            o->last_print = now;
        } else if (!o->tty && now - o->last_print >= 10) {
            fprintf(stderr, "%s: %s: %s / %s (%d%%), %.1f MB/s\n", p->repo, p->file,
                    human(p->done, a, sizeof a), p->total >= 0 ? human(p->total, b, sizeof b) : "?",
                    p->total > 0 ? (int)(100.0 * (double)p->done / (double)p->total) : 0,
                    speed_mbs(p));
            o->last_print = now;
        }
        break;
    case KR_HUB_FILE_RETRY:
        line_start(o);
        fprintf(stderr, "%s: %s: connection lost at %s, resuming\n", p->repo, p->file,
                human(p->done, a, sizeof a));
        break;
    case KR_HUB_FILE_WAITING:
        line_start(o);
        fprintf(stderr, "%s: %s: another kronos pull is downloading it; waiting for it\n", p->repo,
                p->file);
        break;
    case KR_HUB_FILE_VERIFY:
        if (o->tty) {
            line_start(o);
            fprintf(stderr, "  %-20s checking sha256 of %s ...", p->file,
                    human(p->done, a, sizeof a));
            fflush(stderr);
            o->bar_drawn = 1;
        }
        break;
    case KR_HUB_FILE_DONE:
        line_start(o);
        fprintf(stderr, "%s: %s: %s in %.1f s (%.1f MB/s), %s\n", p->repo, p->file,
                human(p->done, a, sizeof a), p->seconds, speed_mbs(p),
                p->sha256_verified ? "sha256 ok"
                : p->total >= 0    ? "size ok"
                                   : "unchecked: the server announced no size or sha256");
        break;
    case KR_HUB_FILE_CACHED:
        line_start(o);
        fprintf(stderr, "%s: %s: already in the cache\n", p->repo, p->file);
        break;
    case KR_HUB_FILE_ABSENT:
        line_start(o);
        fprintf(stderr, "%s: %s: not in the repository (optional)\n", p->repo, p->file);
        break;
    }
    return 0;
}

int kr_cmd_pull(int argc, char **argv) {
    struct option opts[KR_CLI_MAX_OPTS];
    kr_cli_opts_getopt(&kr_cli_pull_spec, opts, KR_CLI_MAX_OPTS);
    const char *revision = "main", *cache_dir = NULL;
    int quiet = 0;
    /* The dispatcher may already have run getopt; 0 makes glibc reinitialise its state. */
    optind = 0;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":hq", opts, NULL)) != -1) {
        switch (ch) {
        case 'r': revision = optarg; break;
        case 'c': cache_dir = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': kr_cli_opts_help(&kr_cli_pull_spec, stdout); return 0;
        case ':': return kr_cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return kr_cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return kr_cli_usage_error(CMD, "%s", "REPO is required (e.g. NeoQuasar/Kronos-small)");
    if (optind + 1 < argc)
        return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
    const char *repo = argv[optind];
    if (!kr_hub_is_repo_id(repo))
        return kr_cli_usage_error(CMD, "'%s' is not a hub model id of the form org/name", repo);
    if (!*revision) return kr_cli_usage_error(CMD, "%s", "--revision must not be empty");
    if (cache_dir && !*cache_dir)
        return kr_cli_usage_error(CMD, "%s", "--cache-dir must not be empty");

    progress_out out = { .tty = isatty(STDERR_FILENO) };
    kr_hub_params params = kr_hub_default_params();
    params.cache_dir = cache_dir;
    if (!quiet) {
        params.progress = on_progress;
        params.progress_user = &out;
    }
    char snapshot[PATH_MAX];
    kr_error err = { 0 };
    kr_status st = kr_hub_pull(&params, repo, revision, snapshot, sizeof snapshot, &err);
    if (out.bar_drawn) fputc('\n', stderr); /* keep the bar where it stopped, above the error */
    if (st != KR_OK) {
        /* A malformed revision or token is a usage error, as a malformed REPO is. */
        int rc = kr_cli_fail(CMD, err.message);
        return st == KR_ERR_INVALID_ARG ? 2 : rc;
    }
    printf("%s\n", snapshot);
    return 0;
}
