/*
 * End-to-end tests of `kronos finetune` on the tiny fixture model and a learnable synthetic
 * series, each a few seconds: both stages train and the loss falls; best and last checkpoints
 * load in `kronos forecast`; a stopped run resumed equals an uninterrupted one bit for bit;
 * SIGTERM mid-run leaves a checkpoint that --resume finishes; a non-empty output needs
 * --force; config errors, memory refusal and a diverging run are reported by name.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kronos/finetune.h"
#include "model/safetensors.h"
#include "test_support.h"

/* ------------------------------------------------------------------ fixtures */

/* An hourly series whose candles follow the hour of day (a 24-bar cycle) with a slow drift:
 * learnable from the time features and the past. */
static void write_series(const char *path, int rows) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("timestamps,open,high,low,close,volume,amount\n", f);
    double prev = 100;
    for (int i = 0; i < rows; i++) {
        int day = i / 24, hour = i % 24;
        double c = 100 + 0.02 * i + 4 * sin(2 * M_PI * hour / 24.0) + ((i * 7919) % 13) * 0.05;
        double hi = (c > prev ? c : prev) + 0.3, lo = (c < prev ? c : prev) - 0.3;
        double vol = 1000 + 400 * cos(2 * M_PI * hour / 24.0);
        fprintf(f, "2024-%02d-%02d %02d:00:00,%.4f,%.4f,%.4f,%.4f,%.1f,%.1f\n", 1 + day / 28,
                1 + day % 28, hour, prev, hi, lo, c, vol, vol * c);
        prev = c;
    }
    fclose(f);
}

typedef struct env {
    const char *dir;
    char csv[600];
    char model[600]; /* tiny predictor + tokenizer */
    char common[2400]; /* flags every run shares */
} env;

static env *setup_env(void) {
    env *e = calloc(1, sizeof *e);
    e->dir = kr_test_fresh_dir();
    snprintf(e->csv, sizeof e->csv, "%s/series.csv", e->dir);
    write_series(e->csv, 24 * 40);
    snprintf(e->model, sizeof e->model, "%s", kr_test_fixture("tiny"));
    snprintf(e->common, sizeof e->common,
             "--data %s --model %s --lookback-window 24 --predict-window 7 --batch-size 8 "
             "--threads 1 --seed 7 --log-interval 1 --val-windows 16 --lr 0.002 --no-progress",
             e->csv, e->model);
    return e;
}

static void free_env(env *e) { free(e); }

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[got] = 0;
    if (len) *len = got;
    return b;
}

static int same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* The "loss" of every step line, and "val_loss" of every eval line, of one stage. */
static int read_losses(const char *log, const char *stage, const char *event, const char *field,
                       double *out, int cap) {
    char *text = slurp(log, NULL);
    assert_non_null(text);
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        cJSON *ev = cJSON_GetObjectItem(o, "event"), *st = cJSON_GetObjectItem(o, "stage");
        cJSON *v = cJSON_GetObjectItem(o, field);
        if (cJSON_IsString(ev) && !strcmp(ev->valuestring, event) && cJSON_IsString(st) &&
            !strcmp(st->valuestring, stage) && cJSON_IsNumber(v))
            out[n++] = v->valuedouble;
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s / n;
}

/* ------------------------------------------------------------------ tests */

/* Both stages train on the learnable series: the training loss falls from the first steps to
 * the last, the validation loss from the first epoch to the last; best and last checkpoints
 * of both stages are written and forecast. */
static void test_finetune_learns_and_forecasts(void **state) {
    (void)state;
    env *e = setup_env();
    char args[4096], out[700];
    snprintf(out, sizeof out, "%s/run", e->dir);
    snprintf(args, sizeof args, "finetune %s --out %s --epochs 3 --steps-per-epoch 12", e->common,
             out);
    const kr_test_run *r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("finetune: %d\n%s", r->code, r->err);
    assert_non_null(strstr(r->out, "predictor best_model: "));
    char log[800];
    snprintf(log, sizeof log, "%s/logs/finetune.jsonl", out);
    const char *stages[2] = { "tokenizer", "predictor" };
    for (int s = 0; s < 2; s++) {
        double loss[64], val[8];
        int n = read_losses(log, stages[s], "step", "loss", loss, 64);
        assert_int_equal(n, 36);
        int nv = read_losses(log, stages[s], "eval", "val_loss", val, 8);
        assert_int_equal(nv, 3);
        if (!(mean(loss + n - 4, 4) < mean(loss, 4)))
            fail_msg("%s: training loss did not fall: %g -> %g", stages[s], mean(loss, 4),
                     mean(loss + n - 4, 4));
        if (!(val[2] < val[0]))
            fail_msg("%s: validation loss did not fall: %g -> %g", stages[s], val[0], val[2]);
    }
    const char *dirs[4] = { "tokenizer/best_model", "tokenizer/last_model", "basemodel/best_model",
                            "basemodel/last_model" };
    for (int i = 0; i < 4; i++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s/model.safetensors", out, dirs[i]);
        assert_true(exists(p));
    }
    /* The fine-tuned pair forecasts. */
    snprintf(args, sizeof args,
             "forecast --model %s/basemodel/best_model --tokenizer %s/tokenizer/best_model "
             "--input %s --pred-len 4 --lookback 24 --seed 1",
             out, out, e->csv);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("forecast: %d\n%s", r->code, r->err);
    free_env(e);
}

/* Stop after step k through the API, resume: the result equals an uninterrupted run's bit for
 * bit (weights of best and last, and the log's losses). */
static int stop_at(void *user, const kr_finetune_progress *p) {
    const int64_t *k = user;
    return p->event == KR_FT_STEP && !strcmp(p->stage, "predictor") && p->step == *k;
}

static kr_status api_run(env *e, const char *out, int resume, int64_t stop_step,
                         kr_finetune_result *res, kr_error *err) {
    kr_finetune_config *cfg = NULL;
    assert_int_equal(kr_finetune_config_create(&cfg, err), KR_OK);
    char tok[700], pred[700];
    snprintf(pred, sizeof pred, "%s/predictor", e->model);
    snprintf(tok, sizeof tok, "%s/tokenizer", e->model);
    const char *kv[][2] = {
        { "data.data_path", e->csv },
        { "data.lookback_window", "24" },
        { "data.predict_window", "7" },
        { "training.batch_size", "8" },
        { "training.epochs", "2" },
        { "kronos.steps_per_epoch", "6" },
        { "kronos.threads", "1" },
        { "training.seed", "11" },
        { "kronos.val_windows", "16" },
        { "model_paths.pretrained_predictor", pred },
        { "model_paths.pretrained_tokenizer", tok },
        { "model_paths.base_save_path", out },
        { "training.predictor_learning_rate", "0.002" },
        { "kronos.resume", resume ? "true" : "false" },
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (kr_finetune_config_set(cfg, kv[i][0], kv[i][1], err) != KR_OK)
            fail_msg("%s", err->message);
    kr_status st = kr_finetune_run(cfg, stop_step ? stop_at : NULL, &stop_step, res, err);
    kr_finetune_config_free(cfg);
    return st;
}

static void test_resume_equals_uninterrupted(void **state) {
    (void)state;
    env *e = setup_env();
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/a", e->dir);
    snprintf(b, sizeof b, "%s/b", e->dir);
    kr_finetune_result res;
    kr_error err = { 0 };
    if (api_run(e, a, 0, 0, &res, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(res.steps, 24);
    /* Stopped in the middle of the predictor's first epoch, then resumed. */
    assert_int_equal(api_run(e, b, 0, 4, &res, &err), KR_ERR_CANCELLED);
    assert_int_equal(res.stopped, 1);
    assert_non_null(strstr(err.message, "predictor stage stopped at step 4"));
    if (api_run(e, b, 1, 0, &res, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(res.steps, 8); /* the predictor's remaining steps; the tokenizer was done */
    assert_int_equal(res.tokenizer_ran, 0);
    const char *files[4] = { "tokenizer/best_model/model.safetensors",
                             "basemodel/best_model/model.safetensors",
                             "basemodel/last_model/model.safetensors",
                             "basemodel/last_model/config.json" };
    for (int i = 0; i < 4; i++) {
        char pa[900], pb[900];
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        if (!same_file(pa, pb)) fail_msg("%s differs after resume", files[i]);
    }
    double la[32], lb[32];
    char loga[800], logb[800];
    snprintf(loga, sizeof loga, "%s/logs/finetune.jsonl", a);
    snprintf(logb, sizeof logb, "%s/logs/finetune.jsonl", b);
    int na = read_losses(loga, "predictor", "eval", "val_loss", la, 32);
    int nb = read_losses(logb, "predictor", "eval", "val_loss", lb, 32);
    assert_int_equal(na, 2);
    assert_int_equal(nb, 2);
    assert_true(la[0] == lb[0] && la[1] == lb[1]);
    free_env(e);
}

/* SIGTERM while training: exit 143 after writing a checkpoint; --resume finishes the run. */
static void test_sigterm_leaves_resumable_checkpoint(void **state) {
    (void)state;
    env *e = setup_env();
    char out[700], log[800], args[4096];
    snprintf(out, sizeof out, "%s/run", e->dir);
    snprintf(log, sizeof log, "%s/logs/finetune.jsonl", out);
    /* Long enough that the signal lands mid-run (it stops at the next step). */
    snprintf(args, sizeof args,
             "%s/kronos finetune %s --out %s --epochs 400 --steps-per-epoch 40 --skip-tokenizer",
             KR_BINARY_DIR, e->common, out);
    char *argv[64];
    int argc = 0;
    for (char *t = strtok(args, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    /* Wait for the first step line. */
    int seen = 0;
    for (int i = 0; i < 1200 && !seen; i++) {
        char *text = slurp(log, NULL);
        seen = text && strstr(text, "\"event\":\"step\"");
        free(text);
        if (!seen) usleep(50 * 1000);
    }
    assert_true(seen);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 143);
    char progress[900];
    snprintf(progress, sizeof progress, "%s/basemodel/checkpoint/progress.json", out);
    char *text = slurp(progress, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"done\":\tfalse"));
    free(text);
    char *logtext = slurp(log, NULL);
    assert_non_null(strstr(logtext, "\"event\":\"stop\""));
    free(logtext);
    /* Resumed with fewer epochs than the checkpoint expects: refused, naming why. */
    snprintf(args, sizeof args,
             "finetune %s --out %s --epochs 2 --steps-per-epoch 40 --skip-tokenizer --resume",
             e->common, out);
    const kr_test_run *r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "made with other data or settings"));
    free_env(e);
}

/* A second run into a non-empty output is refused unless --force; --skip-existing skips. */
static void test_force_and_skip_existing(void **state) {
    (void)state;
    env *e = setup_env();
    char out[700], args[4096];
    snprintf(out, sizeof out, "%s/run", e->dir);
    snprintf(args, sizeof args, "finetune %s --out %s --epochs 1 --steps-per-epoch 2", e->common,
             out);
    const kr_test_run *r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 0);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "tokenizer is not empty: refusing to overwrite it"));
    snprintf(args, sizeof args,
             "finetune %s --out %s --epochs 1 --steps-per-epoch 2 --skip-existing", e->common, out);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->err, "stage skipped"));
    snprintf(args, sizeof args, "finetune %s --out %s --epochs 1 --steps-per-epoch 2 --force",
             e->common, out);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    free_env(e);
}

/* Bad configs, flags and limits are refused before training, naming what is wrong. */
static void test_refusals_named(void **state) {
    (void)state;
    env *e = setup_env();
    char yaml[700], args[4096];
    snprintf(yaml, sizeof yaml, "%s/bad.yaml", e->dir);
    const char *text = "data:\n  lookback_window: 24\ntraining:\n  batch_size: \"8\"\n";
    assert_int_equal(kr_test_write_file(yaml, text, strlen(text)), 0);
    snprintf(args, sizeof args, "finetune --config %s --out %s/o", yaml, e->dir);
    const kr_test_run *r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "bad.yaml:4: training.batch_size: wrong type"));
    snprintf(args, sizeof args, "finetune %s --out %s/o --batch-sise 4", e->common, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    snprintf(args, sizeof args, "finetune %s --out %s/o --epochs many", e->common, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "training.epochs: wrong type: expected an integer, got 'many'"));
    /* More memory than allowed: refused up front with both figures. */
    snprintf(args, sizeof args, "finetune %s --out %s/o --memory-limit-mb 1", e->common, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "MB (trainer, batches and"));
    assert_non_null(strstr(r->err, "more than the 1 MB kronos.memory_limit_mb allows"));
    char o[800];
    snprintf(o, sizeof o, "%s/o", e->dir);
    assert_false(exists(o)); /* refused before anything was written */
    /* Fewer windows than a batch. */
    snprintf(args, sizeof args, "finetune %s --out %s/o --batch-size 5000", e->common, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "fewer than training.batch_size 5000"));
    /* Ignored keys are accepted and reported. */
    snprintf(args, sizeof args, "finetune %s --out %s/o --use-cuda --num-workers 4 --dry-run",
             e->common, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    assert_non_null(strstr(r->err, "accepted and ignored (no meaning here): training.num_workers, "
                                   "device.use_cuda"));
    assert_false(exists(o)); /* a dry run writes nothing */
    free_env(e);
}

/* Copies a checkpoint directory, multiplying one tensor by `scale`. */
static void copy_scaled(const char *from, const char *to, const char *tensor, float scale) {
    char a[900], b[900];
    assert_int_equal(mkdir(to, 0755), 0);
    snprintf(a, sizeof a, "%s/config.json", from);
    snprintf(b, sizeof b, "%s/config.json", to);
    size_t len = 0;
    char *cfg = slurp(a, &len);
    assert_int_equal(kr_test_write_file(b, cfg, len), 0);
    free(cfg);
    snprintf(a, sizeof a, "%s/model.safetensors", from);
    snprintf(b, sizeof b, "%s/model.safetensors", to);
    kr_safetensors *st = NULL;
    kr_st_writer *w = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open(a, &st, &err), KR_OK);
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    for (int i = 0; i < kr_st_count(st); i++) {
        const kr_st_tensor *t = kr_st_at(st, i);
        float *copy = NULL;
        if (!strcmp(t->name, tensor)) {
            copy = malloc(t->nbytes);
            memcpy(copy, t->data, t->nbytes);
            for (int64_t k = 0; k < t->numel; k++) copy[k] *= scale;
        }
        assert_int_equal(
            kr_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, copy ? copy : t->data, &err),
            KR_OK);
        free(copy);
    }
    assert_int_equal(kr_st_writer_save(w, b, &err), KR_OK);
    kr_st_writer_free(w);
    kr_st_close(st);
}

/* A predictor whose embeddings overflow float32 in the first steps: a loss or gradient is not
 * finite. The run stops naming the stage and the step, exits 1, writes no checkpoint of the
 * failing stage and keeps the finished tokenizer stage's. */
static void test_nonfinite_loss_stops_named(void **state) {
    (void)state;
    env *e = setup_env();
    char bad[700], tok[700], out[700], args[4096];
    snprintf(bad, sizeof bad, "%s/bad_predictor", e->dir);
    snprintf(tok, sizeof tok, "%s/tokenizer", e->model);
    char pred[700];
    snprintf(pred, sizeof pred, "%s/predictor", e->model);
    copy_scaled(pred, bad, "embedding.emb_s1.weight", 1e30f);
    snprintf(out, sizeof out, "%s/run", e->dir);
    snprintf(args, sizeof args,
             "finetune --data %s --pretrained-predictor %s --pretrained-tokenizer %s --out %s "
             "--lookback-window 24 --predict-window 7 --batch-size 8 --threads 1 --epochs 1 "
             "--steps-per-epoch 2 --val-windows 8",
             e->csv, bad, tok, out);
    const kr_test_run *r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 1);
    /* The step it fails at is the core's to find (here the second one's gradient norm). */
    if (!strstr(r->err, "predictor stage, step ") || !strstr(r->err, "NaN") ||
        !strstr(r->err, "no checkpoint was written yet"))
        fail_msg("%s", r->err);
    char p[900];
    snprintf(p, sizeof p, "%s/tokenizer/best_model/model.safetensors", out);
    assert_true(exists(p));
    snprintf(p, sizeof p, "%s/basemodel/best_model", out);
    assert_false(exists(p));
    snprintf(p, sizeof p, "%s/logs/finetune.jsonl", out);
    char *log = slurp(p, NULL);
    assert_non_null(strstr(log, "\"event\":\"error\""));
    free(log);
    free_env(e);
}

/* Candles from a directory of CSV and JSON files and from the store; fresh weights
 * (pre_trained false); and --eval-only, which scores without writing. */
static void test_inputs_fresh_weights_and_eval_only(void **state) {
    (void)state;
    env *e = setup_env();
    char dir[700], args[4096], db[700], out[700];
    snprintf(dir, sizeof dir, "%s/candles", e->dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    char p[900];
    snprintf(p, sizeof p, "%s/a.csv", dir);
    write_series(p, 24 * 20);
    /* The same rows as JSON records. */
    snprintf(p, sizeof p, "%s/b.json", dir);
    FILE *f = fopen(p, "w");
    fputs("[", f);
    for (int i = 0; i < 24 * 10; i++)
        fprintf(f,
                "%s{\"timestamps\": \"2025-01-%02d %02d:00:00\", \"open\": %d, \"high\": %d, "
                "\"low\": %d, \"close\": %d, \"volume\": %d}",
                i ? "," : "", 1 + i / 24, i % 24, 100 + i % 7, 103 + i % 7, 99 + i % 7, 101 + i % 5,
                1000 + i % 11);
    fputs("]", f);
    fclose(f);
    snprintf(args, sizeof args, "finetune %s --data %s --out %s/o --dry-run", e->common, dir,
             e->dir);
    const kr_test_run *r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    assert_non_null(strstr(r->err, "data: 3 series"));
    /* The store. */
    snprintf(db, sizeof db, "%s/store.db", e->dir);
    snprintf(args, sizeof args, "ingest --db %s --symbol SYN --interval 1h %s", db, e->csv);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    snprintf(args, sizeof args,
             "finetune --db %s --symbol syn --model %s --out %s/o --lookback-window 24 "
             "--predict-window 7 --batch-size 8 --dry-run",
             db, e->model, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    assert_non_null(strstr(r->err, "data: 1 series"));
    snprintf(args, sizeof args, "finetune --db %s --symbol NOPE --model %s --out %s/o --dry-run",
             db, e->model, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "symbol NOPE: not in the store"));
    /* Fresh weights of the tiny shapes. */
    snprintf(out, sizeof out, "%s/fresh", e->dir);
    snprintf(args, sizeof args,
             "finetune %s --out %s --epochs 1 --steps-per-epoch 2 --pre-trained=false", e->common,
             out);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    snprintf(p, sizeof p, "%s/basemodel/checkpoint/fresh/model.safetensors", out);
    assert_true(exists(p));
    char q[900];
    snprintf(q, sizeof q, "%s/predictor/model.safetensors", e->model);
    assert_false(same_file(p, q));
    /* --eval-only: both stages scored, nothing written. */
    snprintf(args, sizeof args, "finetune %s --out %s/e --eval-only", e->common, e->dir);
    r = kr_test_kronos(e->dir, "", args);
    if (r->code != 0) fail_msg("%s", r->err);
    assert_non_null(strstr(r->err, "tokenizer: validation loss"));
    assert_non_null(strstr(r->err, "official model.eval() variant"));
    snprintf(p, sizeof p, "%s/e", e->dir);
    assert_false(exists(p));
    free_env(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finetune_learns_and_forecasts),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_sigterm_leaves_resumable_checkpoint),
        cmocka_unit_test(test_force_and_skip_existing),
        cmocka_unit_test(test_refusals_named),
        cmocka_unit_test(test_nonfinite_loss_stops_named),
        cmocka_unit_test(test_inputs_fresh_weights_and_eval_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
