/*
 * A program written against the installed library only: built with
 * `pkg-config --cflags --libs kronos`, it loads the installed demo model, forecasts a synthetic
 * series synchronously and through the asynchronous API, and checks that both agree and that
 * the header and the library are the same version. Exit 0 when all is well.
 *   consumer MODEL_DIR
 */
#include <kronos.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if KRONOS_VERSION_NUMBER < 200
#error "this consumer needs the 0.2 API (contexts)"
#endif

typedef struct done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finished;
    kr_forecast *result;
} done;

static void on_event(void *user, const kr_event *ev) {
    done *d = user;
    if (ev->kind != KR_EVENT_DONE && ev->kind != KR_EVENT_FAILED) return;
    pthread_mutex_lock(&d->mu);
    d->finished = ev->kind == KR_EVENT_DONE ? 1 : -1;
    d->result = ev->result;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer MODEL_DIR\n");
        return 2;
    }
    if (strcmp(kr_version(), KRONOS_VERSION) != 0) {
        fprintf(stderr, "header %s, library %s\n", KRONOS_VERSION, kr_version());
        return 1;
    }
    char pred[4096], tok[4096];
    snprintf(pred, sizeof pred, "%s/predictor", argv[1]);
    snprintf(tok, sizeof tok, "%s/tokenizer", argv[1]);
    kr_error err = { 0 };
    kr_model *model = NULL;
    if (kr_model_load(pred, tok, NULL, &model, &err) != KR_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    kr_context *ctx = NULL;
    if (kr_context_create(model, &cp, &ctx, &err) != KR_OK) {
        fprintf(stderr, "context: %s\n", err.message);
        return 1;
    }
    enum { N = 200 };
    static int64_t ts[N];
    static double v[N * 6];
    for (int i = 0; i < N; i++) {
        ts[i] = 1700000000 + 300 * (int64_t)i; /* 5-minute bars, every day of the week */
        double c = 100 + 5 * sin(i / 9.0);
        double row[6] = { c - 0.2, c + 0.5, c - 0.6, c, 1000 + 10 * i, 0 };
        memcpy(v + 6 * i, row, sizeof row);
    }
    kr_series s = { .n = N, .timestamps = ts, .values = v, .has_volume = 1, .has_amount = 0 };
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 12;
    p.paths = 4;
    p.seed = 7;
    kr_forecast *sync = NULL;
    if (kr_forecast_run(ctx, &s, &p, &sync, &err) != KR_OK) {
        fprintf(stderr, "forecast: %s\n", err.message);
        return 1;
    }
    done d = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL };
    kr_request_params rp = kr_request_default_params();
    rp.on_event = on_event;
    rp.user = &d;
    rp.deadline_s = 60;
    uint64_t id = 0;
    if (kr_submit(ctx, &s, &p, &rp, &id, &err) != KR_OK) {
        fprintf(stderr, "submit: %s\n", err.message);
        return 1;
    }
    pthread_mutex_lock(&d.mu);
    while (!d.finished) pthread_cond_wait(&d.cv, &d.mu);
    pthread_mutex_unlock(&d.mu);
    if (d.finished != 1) return 1;
    const double *a = kr_forecast_mean(sync), *b = kr_forecast_mean(d.result);
    if (memcmp(a, b, sizeof(double) * 6 * (size_t)p.pred_len) != 0) {
        fprintf(stderr, "asynchronous and synchronous forecasts differ\n");
        return 1;
    }
    printf("kronos %s: next close %.4f (4 paths, 12 steps), id %llu\n", kr_version(), a[KR_CLOSE],
           (unsigned long long)id);
    kr_forecast_free(sync);
    kr_forecast_free(d.result);
    kr_context_free(ctx);
    kr_model_free(model);
    return 0;
}
