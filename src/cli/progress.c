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
#include "kronos/server.h"
#include "kronos/util.h"

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
    if (kr_read_file(path, 1 << 16, "config", &text, &len, &err) != KR_OK) return 0;
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

int kr_cli_read_stdin(size_t max, char **out, size_t *len, char *msg, size_t cap) {
    size_t n = 0, sz = 65536;
    char *buf = malloc(sz + 1);
    if (!buf) {
        snprintf(msg, cap, "out of memory reading standard input");
        return -1;
    }
    for (;;) {
        if (n > max) { /* one byte past the limit is enough to know */
            free(buf);
            snprintf(msg, cap, "standard input is larger than %zu bytes", max);
            return -1;
        }
        if (n == sz) {
            /* Grown to at most max + 1 bytes: doubling past it held 2 GiB for a 1 GiB limit. */
            const size_t grown = sz > max / 2 ? max + 1 : sz * 2;
            char *nb = realloc(buf, grown + 1);
            if (!nb) {
                free(buf);
                snprintf(msg, cap, "out of memory reading standard input");
                return -1;
            }
            buf = nb;
            sz = grown;
        }
        size_t got = fread(buf + n, 1, sz - n, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        snprintf(msg, cap, "cannot read standard input");
        return -1;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* Whether the file's first byte after white space (and a UTF-8 BOM) is '{' or '['. An
 * unreadable file, or one that is not a regular file (a FIFO would block the open until a
 * writer came), answers no and is left to the CSV reader to report. */
static int starts_like_json(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char head[256];
    size_t n = fread(head, 1, sizeof head, f), i = 0;
    fclose(f);
    if (n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF) i = 3;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) i++;
    return i < n && (head[i] == '{' || head[i] == '[');
}

int kr_cli_load_candles(const char *path, kr_candles **out, char *msg, size_t cap) {
    const int from_stdin = !strcmp(path, "-");
    const char *label = from_stdin ? "stdin" : path;
    size_t n = strlen(path);
    const int json = n > 5 && !strcmp(path + n - 5, ".json");
    kr_error err = { 0 };
    if (!from_stdin && !json && !starts_like_json(path)) {
        if (kr_candles_read_csv(path, out, &err) == KR_OK) return 0;
        snprintf(msg, cap, "%s", err.message);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    if (from_stdin) {
        if (kr_cli_read_stdin((size_t)1 << 30, &text, &len, msg, cap) != 0) return -1;
    } else if (kr_read_file(path, (size_t)1 << 30, "candle file", &text, &len, &err) != KR_OK) {
        snprintf(msg, cap, "%s", err.message);
        return -1;
    }
    int rc = 0;
    if (kr_server_parse_candles(text, len, label, out, &err) != KR_OK) {
        snprintf(msg, cap, "%s", err.message);
        rc = -1;
    }
    free(text);
    return rc;
}

void kr_cli_warn_dropped_columns(const char *cmd, const char *path, const kr_candles *c) {
    if (!c || !c->amount_dropped[0]) return;
    fprintf(stderr,
            "kronos %s: warning: %s: column '%s' ignored: without a volume column, volume and "
            "amount are both 0 (the reference's rule); add the volume column to use it\n",
            cmd, strcmp(path, "-") ? path : "stdin", c->amount_dropped);
}
