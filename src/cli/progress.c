/* cli/progress — see progress.h. */
#include "cli/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kronos/series.h"
#include "kronos/util.h"
#include "common/candles_input.h"

struct kr_ticker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    char what[200];
    double t0;
};

static void *tick(void *arg) {
    kr_ticker *t = arg;
    static const char spin[] = "|/-\\";
    pthread_mutex_lock(&t->mu);
    for (int k = 0; !t->stop; k++) {
        fprintf(stderr, "\r\033[K%c %s ... %.1f s", spin[k % 4], t->what, kr_now_seconds() - t->t0);
        fflush(stderr);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 250 * 1000000L;
        if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->mu, &dl);
    }
    pthread_mutex_unlock(&t->mu);
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    return NULL;
}

kr_ticker *kr_ticker_start(const char *what) {
    if (!isatty(STDERR_FILENO)) return NULL;
    kr_ticker *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->what, sizeof t->what, "%s", what);
    t->t0 = kr_now_seconds();
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, tick, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    return t;
}

void kr_ticker_stop(kr_ticker *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* 1 when dir/config.json mentions key (a cheap look: configs are a few hundred bytes). */
static int config_has(const char *dir, const char *key) {
    char path[4200], *text = NULL;
    size_t len = 0;
    kr_error err;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (kr_input_read_file(path, 1 << 16, "config", &text, &len, &err) != KR_OK) return 0;
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    int has = strstr(text, quoted) != NULL;
    free(text);
    return has;
}

void kr_cli_model_hint(const char *pred_dir, const char *tok_dir, char *hint, size_t cap) {
    hint[0] = 0;
    /* Only a tokenizer config has n_enc_layers; only a predictor config has n_layers. */
    int model_is_tok = config_has(pred_dir, "n_enc_layers");
    int tok_is_pred = config_has(tok_dir, "n_layers") && !config_has(tok_dir, "n_enc_layers");
    if (model_is_tok && tok_is_pred)
        snprintf(hint, cap,
                 " (hint: %s is a tokenizer and %s a predictor: are --model and --tokenizer "
                 "swapped?)",
                 pred_dir, tok_dir);
    else if (model_is_tok)
        snprintf(hint, cap, " (hint: --model %s is a tokenizer; --model takes the predictor)",
                 pred_dir);
    else if (tok_is_pred)
        snprintf(hint, cap, " (hint: --tokenizer %s is a predictor, not a tokenizer)", tok_dir);
}

void kr_cli_warn_thin_history(const char *cmd, const char *path, const kr_candles *c) {
    if (!c || c->n >= KR_FORECAST_MIN_ROWS) return;
    fprintf(stderr,
            "kronos %s: warning: %s: %lld rows of history; a forecast needs at least %d to "
            "rest on (the model normalises a series by its own mean and spread, which so few "
            "rows do not pin down): treat this one as noise\n",
            cmd, strcmp(path, "-") ? path : "stdin", (long long)c->n, KR_FORECAST_MIN_ROWS);
}

void kr_cli_warn_dropped_columns(const char *cmd, const char *path, const kr_candles *c) {
    if (c && !c->has_volume && !c->amount_dropped[0])
        fprintf(stderr,
                "kronos %s: warning: %s: no volume column: volume and amount are set to 0 for "
                "the model (the reference's rule) and forecast as 0; add a volume column if "
                "the market has one\n",
                cmd, strcmp(path, "-") ? path : "stdin");
    if (!c || !c->amount_dropped[0]) return;
    fprintf(stderr,
            "kronos %s: warning: %s: column '%s' ignored: without a volume column, volume and "
            "amount are both 0 (the reference's rule); add the volume column to use it\n",
            cmd, strcmp(path, "-") ? path : "stdin", c->amount_dropped);
}
