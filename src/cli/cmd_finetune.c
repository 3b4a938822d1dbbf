/*
 * cli/cmd_finetune — `kronos finetune`: reads the official finetune_csv YAML (--config) and
 * flags (every config key is one: --batch-size, --lookback-window, ...), then runs
 * kr_finetune_run with a progress bar on a terminal. Ctrl-C / SIGTERM asks the run to stop at
 * the next step: it writes a resumable checkpoint and the command exits 130 / 143; a second
 * signal ends it at once. The flags only set keys; the pipeline is the library's.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "cli/progress.h"
#include "kronos.h"
#include "kronos/finetune.h"
#include "kronos/util.h"

#define CMD "finetune"

/* Flags that are not config keys (getopt codes past the keys' 1000 + index). */
enum {
    OPT_CONFIG = 'c',
    OPT_HELP = 'h',
    OPT_DATA = 2000,
    OPT_OUT,
    OPT_LR,
    OPT_MODEL,
    OPT_TOKENIZER,
    OPT_SKIP_TOKENIZER,
    OPT_SKIP_PREDICTOR,
    OPT_NO_PROGRESS,
    OPT_KEY_BASE = 1000,
};

static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    g_signal = sig;
    /* A second signal ends the process the usual way. */
    signal(sig, SIG_DFL);
}

/* The command's own flags, as --help lists them first; a config key's flag among them
 * (--db, --force, ...) has key 0: the key's code is filled in by finetune_spec(). */
static const kr_cli_opt k_own[] = {
    { "config", OPT_CONFIG, KR_CLI_FILE, "FILE", 0, 0, NULL,
      "the official finetune_csv YAML config, as it is; flags given\nwith it override its keys" },
    { "data", OPT_DATA, KR_CLI_FILE, "FILE|DIR", 0, 0, NULL,
      "candles (CSV or JSON; a directory: its .csv/.json files),\nrepeatable (data.data_path)" },
    { "db", 0, KR_CLI_FILE, "PATH", 0, 0, NULL,
      "a candle store (kronos ingest): its series instead of or\nwith files" },
    { "symbol", 0, KR_CLI_TEXT, "SYM", 0, 0, NULL, "a stored series to train on, repeatable" },
    { "all", 0, KR_CLI_FLAG, NULL, 0, 0, NULL, "every stored series" },
    { "out", OPT_OUT, KR_CLI_DIR, "DIR", 0, 0, NULL,
      "where to write (model_paths.base_save_path)" },
    { "model", OPT_MODEL, KR_CLI_DIR, "DIR", 0, 0, NULL,
      "checkpoint to start from: predictor/ + tokenizer/, or a pulled\nhub name (default: the "
      "bundled demo model)" },
    { "tokenizer", OPT_TOKENIZER, KR_CLI_DIR, "DIR", 0, 0, NULL,
      "tokenizer to start from when --model is a predictor directory" },
    { "lr", OPT_LR, KR_CLI_NUM, "X", 0, 0, NULL, "both learning rates" },
    { "skip-tokenizer", OPT_SKIP_TOKENIZER, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "do not train the tokenizer (experiment.train_tokenizer false)" },
    { "skip-predictor", OPT_SKIP_PREDICTOR, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "do not train the predictor" },
    { "skip-basemodel", OPT_SKIP_PREDICTOR, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "the same (train_sequential.py's name)" },
    { "skip-existing", 0, KR_CLI_FLAG, NULL, 0, 0, NULL, "skip a stage whose best_model exists" },
    { "force", 0, KR_CLI_FLAG, NULL, 0, 0, NULL, "replace a non-empty stage directory" },
    { "resume", 0, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "continue an interrupted run from its checkpoints" },
    { "dry-run", 0, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "check config, data, paths and memory, then stop" },
    { "eval-only", 0, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "score the starting checkpoints on the validation windows" },
    { "no-progress", OPT_NO_PROGRESS, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "no progress bar (it is drawn only on a terminal anyway)" },
    { "help", OPT_HELP, KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The first part of --help: the usage, the description and the command's own flags. */
static const kr_cli_command k_own_spec = {
    "finetune",
    "[--config FILE.yaml] [--data FILE|DIR]... [--out DIR] [flags]",
    "fine-tune the tokenizer and predictor on candles (the official finetune_csv YAML)",
    "Fine-tunes a Kronos tokenizer and predictor on candles, as the official\n"
    "finetune_csv pipeline does: the tokenizer first, then the predictor on the\n"
    "fine-tuned tokenizer's ids. Writes DIR/tokenizer/{best_model,last_model} and\n"
    "DIR/basemodel/{best_model,last_model} (Hugging Face directories that kronos and\n"
    "from_pretrained load), resumable checkpoints and DIR/logs/finetune.jsonl.\n",
    k_own,
    (int)(sizeof k_own / sizeof k_own[0]),
    KR_CLI_FILE,
    18,
    NULL,
    NULL,
};

static int key_index(const char *flag) {
    for (int i = 0; i < kr_finetune_n_keys(); i++)
        if (!strcmp(kr_finetune_key_at(i)->flag, flag)) return i;
    return -1;
}

/* A config key's flag argument as --help shows it: none for a boolean, S for text, N else. */
static const char *key_arg(const kr_finetune_key *k) {
    return !strcmp(k->type, "bool")                                 ? NULL
           : !strcmp(k->type, "string") || !strcmp(k->type, "list") ? "S"
                                                                    : "N";
}

/* Every flag of the command (common/options.h), for getopt, completion and the man page: its own
 * (k_own), then each config key's that is not among them (the library's key table). Built
 * once; static storage. */
const kr_cli_command *kr_cli_finetune_spec(void) {
    static kr_cli_opt all[KR_CLI_MAX_OPTS];
    static char help[KR_CLI_MAX_OPTS][160];
    static kr_cli_command spec;
    if (spec.name) return &spec;
    int n = 0;
    for (int i = 0; i < k_own_spec.n_opts; i++) {
        all[n] = k_own[i];
        if (!all[n].key) all[n].key = OPT_KEY_BASE + key_index(all[n].name);
        n++;
    }
    for (int i = 0; i < kr_finetune_n_keys() && n < KR_CLI_MAX_OPTS; i++) {
        const kr_finetune_key *k = kr_finetune_key_at(i);
        int own = 0;
        for (int j = 0; j < k_own_spec.n_opts && !own; j++) own = !strcmp(k_own[j].name, k->flag);
        if (own) continue;
        const char *arg = key_arg(k);
        snprintf(help[n], sizeof help[n], "%s%s%s%s", k->key, k->ignored ? " (ignored)" : "",
                 *k->default_value ? ", default " : "", k->default_value);
        all[n] = (kr_cli_opt){ k->flag,
                               OPT_KEY_BASE + i,
                               !arg                ? KR_CLI_FLAG
                               : !strcmp(arg, "N") ? KR_CLI_NUM
                                                   : KR_CLI_TEXT,
                               arg,
                               0,
                               0,
                               NULL,
                               help[n] };
        n++;
    }
    spec = k_own_spec;
    spec.opts = all;
    spec.n_opts = n;
    return &spec;
}

static void usage(FILE *f) {
    kr_cli_opts_help(&k_own_spec, f);
    fputs("\nEvery config key is also a flag (booleans take =true/=false, alone they are true):\n",
          f);
    for (int i = 0; i < kr_finetune_n_keys(); i++) {
        const kr_finetune_key *k = kr_finetune_key_at(i);
        char flag[80];
        const char *arg = key_arg(k);
        snprintf(flag, sizeof flag, "--%s%s%s", k->flag, arg ? " " : "", arg ? arg : "");
        fprintf(f, "  %-30s %s%s%s%s\n", flag, k->key, k->ignored ? " (ignored)" : "",
                *k->default_value ? ", default " : "", k->default_value);
    }
    fputs("\nSee docs/finetune.md for every key and the documented differences from the\n"
          "official pipeline.\n",
          f);
}

/* ---------------------------------------------------------------- progress */

typedef struct bar {
    int tty;
    double last_draw;
    int drawn; /* a bar line is on screen */
} bar;

static void clear_bar(bar *b) {
    if (b->drawn) fputs("\r\033[K", stderr);
    b->drawn = 0;
}

static void fmt_duration(double s, char *out, size_t cap) {
    if (!isfinite(s) || s < 0) {
        snprintf(out, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, cap, "%ld:%02ld", t / 60, t % 60);
}

static int on_progress(void *user, const kr_finetune_progress *p) {
    bar *b = user;
    switch (p->event) {
    case KR_FT_INFO:
    case KR_FT_STAGE_SKIPPED:
        clear_bar(b);
        fprintf(stderr, "kronos %s: %s%s\n", CMD,
                p->event == KR_FT_STAGE_SKIPPED ? "stage skipped: " : "", p->message);
        break;
    case KR_FT_EVAL:
        clear_bar(b);
        if (!isfinite(p->val_loss)) {
            fprintf(stderr,
                    "kronos %s: %s epoch %d/%d: no validation windows (data.val_ratio gives no "
                    "window of lookback + predict + 1 rows): best_model is the last epoch's; "
                    "train loss %.5f (epoch mean)\n",
                    CMD, p->stage, p->epoch, p->epochs, p->epoch_loss);
            break;
        }
        fprintf(stderr, "kronos %s: %s epoch %d/%d: validation loss %.5f", CMD, p->stage, p->epoch,
                p->epochs, p->val_loss);
        if (isfinite(p->val_loss_official))
            fprintf(stderr, " (official model.eval() variant %.5f)", p->val_loss_official);
        fprintf(stderr, ", train loss %.5f (epoch mean)\n", p->epoch_loss);
        break;
    case KR_FT_SAVED: break;
    case KR_FT_STAGE_DONE:
        clear_bar(b);
        fprintf(stderr, "kronos %s: %s stage done: %lld steps, best validation loss %.5f\n", CMD,
                p->stage, (long long)p->step, p->best_val_loss);
        break;
    case KR_FT_STAGE_START:
    case KR_FT_STEP: {
        double now = kr_now_seconds();
        if (!b->tty ||
            (p->event == KR_FT_STEP && now - b->last_draw < 0.2 && p->step != p->total_steps))
            break;
        b->last_draw = now;
        char eta[32], val[32];
        fmt_duration(p->eta_seconds, eta, sizeof eta);
        snprintf(val, sizeof val, isfinite(p->val_loss) ? "%.4f" : "-", p->val_loss);
        fprintf(stderr,
                "\r\033[K[%s] epoch %d/%d step %lld/%lld loss %.4f val %s %.0f tok/s ETA %s",
                p->stage, p->epoch, p->epochs, (long long)p->step, (long long)p->total_steps,
                p->loss, val, p->tokens_per_second, eta);
        fflush(stderr);
        b->drawn = 1;
        break;
    }
    }
    return g_signal != 0;
}

/* ---------------------------------------------------------------- flags */

/* getopt's table of every flag: a config key's boolean takes an optional =true/=false. */
static struct option *build_options(void) {
    const kr_cli_command *spec = kr_cli_finetune_spec();
    struct option *o = calloc((size_t)spec->n_opts + 1, sizeof *o);
    if (!o) return NULL;
    for (int i = 0; i < spec->n_opts; i++) {
        const kr_cli_opt *k = &spec->opts[i];
        const int key_flag = k->key >= OPT_KEY_BASE && k->key < OPT_DATA;
        o[i] = (struct option){ k->name,
                                k->type != KR_CLI_FLAG ? required_argument
                                : key_flag             ? optional_argument
                                                       : no_argument,
                                NULL, k->key };
    }
    return o;
}

static int set_key(kr_finetune_config *cfg, const char *key, const char *value, int add) {
    kr_error err = { 0 };
    kr_status st = add ? kr_finetune_config_add(cfg, key, value, &err)
                       : kr_finetune_config_set(cfg, key, value, &err);
    if (st == KR_OK) return 0;
    fprintf(stderr, "kronos %s: error: %s\n", CMD, err.message);
    return 2;
}

int kr_cmd_finetune(int argc, char **argv) {
    struct option *longopts = build_options();
    if (!longopts) return kr_cli_fail(CMD, "out of memory");
    kr_finetune_config *cfg = NULL;
    kr_error err = { 0 };
    if (kr_finetune_config_create(&cfg, &err) != KR_OK) {
        free(longopts);
        return kr_cli_fail(CMD, err.message);
    }
    int rc = 0, progress = 1, c;
    const char *config = NULL, *model = NULL, *tokenizer = NULL;
    /* First pass: --config (and --help), so that flags override the file whatever their
     * order. */
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        if (c == OPT_HELP) {
            usage(stdout);
            goto out;
        }
        if (c == OPT_CONFIG) config = optarg;
    }
    if (config && kr_finetune_config_load_yaml(cfg, config, &err) != KR_OK) {
        fprintf(stderr, "kronos %s: error: %s\n", CMD, err.message);
        rc = 2;
        goto out;
    }
    optind = 1;
    opterr = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_CONFIG: break;
        case OPT_DATA: rc = set_key(cfg, "data.data_path", optarg, 1); break;
        case OPT_OUT: rc = set_key(cfg, "model_paths.base_save_path", optarg, 0); break;
        case OPT_LR:
            rc = set_key(cfg, "training.tokenizer_learning_rate", optarg, 0);
            if (!rc) rc = set_key(cfg, "training.predictor_learning_rate", optarg, 0);
            break;
        case OPT_MODEL: model = optarg; break;
        case OPT_TOKENIZER: tokenizer = optarg; break;
        case OPT_SKIP_TOKENIZER: rc = set_key(cfg, "experiment.train_tokenizer", "false", 0); break;
        case OPT_SKIP_PREDICTOR: rc = set_key(cfg, "experiment.train_basemodel", "false", 0); break;
        case OPT_NO_PROGRESS: progress = 0; break;
        case '?': rc = kr_cli_usage_error(CMD, "%s", "unknown flag or missing value"); break;
        default:
            if (c >= OPT_KEY_BASE && c < OPT_KEY_BASE + kr_finetune_n_keys()) {
                const kr_finetune_key *k = kr_finetune_key_at(c - OPT_KEY_BASE);
                const char *v = optarg ? optarg : "true"; /* a bare boolean flag */
                rc = set_key(cfg, k->key, v, !strcmp(k->type, "list"));
            } else
                rc = kr_cli_usage_error(CMD, "%s", "unknown flag");
        }
    }
    if (rc) goto out;
    if (optind < argc) {
        rc = kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    /* --model/--tokenizer, or the bundled demo model when neither the flags nor the config
     * name a checkpoint to start from. */
    char probe[8];
    kr_finetune_config_get(cfg, "model_paths.pretrained_predictor", probe, sizeof probe, NULL);
    int pred_set = probe[0] != 0;
    kr_finetune_config_get(cfg, "model_paths.pretrained_tokenizer", probe, sizeof probe, NULL);
    int tok_set = probe[0] != 0;
    if (model || tokenizer || (!pred_set && !tok_set)) {
        char pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[512];
        int r = kr_resolve_model_dirs(model, tokenizer, pred_dir, tok_dir, msg, sizeof msg);
        if (r != 0) {
            rc = r == -1 ? kr_cli_usage_error(CMD, "%s", msg) : kr_cli_fail(CMD, msg);
            goto out;
        }
        if (!model && !tokenizer)
            fprintf(stderr, "kronos %s: starting from the bundled demo model %s\n", CMD, pred_dir);
        if ((rc = set_key(cfg, "model_paths.pretrained_predictor", pred_dir, 0)) ||
            (rc = set_key(cfg, "model_paths.pretrained_tokenizer", tok_dir, 0)))
            goto out;
    }

    bar b = { .tty = progress && isatty(STDERR_FILENO) };
    g_signal = 0;
    struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    kr_finetune_result res;
    kr_status st = kr_finetune_run(cfg, on_progress, &b, &res, &err);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    clear_bar(&b);
    if (st == KR_OK || st == KR_ERR_CANCELLED) {
        if (res.tokenizer_best[0]) printf("tokenizer best_model: %s\n", res.tokenizer_best);
        if (res.tokenizer_last[0]) printf("tokenizer last_model: %s\n", res.tokenizer_last);
        if (res.predictor_best[0]) printf("predictor best_model: %s\n", res.predictor_best);
        if (res.predictor_last[0]) printf("predictor last_model: %s\n", res.predictor_last);
        if (res.log_path[0]) printf("log: %s\n", res.log_path);
    }
    if (st == KR_ERR_CANCELLED) {
        fprintf(stderr, "kronos %s: %s\n", CMD, err.message);
        rc = 128 + (g_signal ? (int)g_signal : SIGINT);
    } else if (st == KR_ERR_INVALID_ARG)
        rc = kr_cli_usage_error(CMD, "%s", err.message);
    else if (st != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
out:
    kr_finetune_config_free(cfg);
    free(longopts);
    return rc;
}
