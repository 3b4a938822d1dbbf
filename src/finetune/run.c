/*
 * finetune/run — kr_finetune_run: plans both stages, checks everything that can fail before
 * any training (config, data, checkpoints, output directories, memory), then trains them in
 * order (stage.c) and fills the result. See kronos/finetune.h.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "finetune/data.h"
#include "finetune/pipeline.h"
#include "finetune/state.h"
#include "kronos.h"
#include "kronos/hub.h"
#include "kronos/util.h"
#include "train/window_encoder.h"

#define MB (1024.0 * 1024.0)

/* ---------------------------------------------------------------- events */

void kr_ft_emit(kr_ft_run *run, const kr_finetune_progress *p) {
    if (run->cb && run->cb(run->user, p)) run->stop_requested = 1;
}

/* Sends an event that carries a line and no figures (KR_FT_INFO, KR_FT_STAGE_SKIPPED): each
 * figure NaN, "none". */
static void emit_line(kr_ft_run *run, kr_finetune_event event, const char *stage,
                      const char *line) {
    kr_finetune_progress p = { .event = event, .stage = stage, .message = line };
    p.loss = p.epoch_loss = p.lr = p.grad_norm = NAN;
    p.val_loss = p.val_loss_official = p.best_val_loss = p.eta_seconds = NAN;
    kr_ft_emit(run, &p);
}

void kr_ft_info(kr_ft_run *run, const char *stage, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    emit_line(run, KR_FT_INFO, stage, line);
    if (run->log) {
        cJSON *o = kr_ft_log_event("info");
        if (stage) cJSON_AddStringToObject(o, "stage", stage);
        cJSON_AddStringToObject(o, "message", line);
        kr_ft_log_write(run->log, o, NULL);
    }
}

static void note_data(void *user, const char *line) { kr_ft_info(user, NULL, "%s", line); }

/* ---------------------------------------------------------------- planning */

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* A checkpoint named by a path or by a hub model id already pulled. */
static kr_status resolve_model(const char *key, const char *value, char *out, kr_error *err) {
    if (!value || !*value) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s is not set", key);
    if (is_dir(value)) {
        snprintf(out, KR_FINETUNE_PATH_MAX, "%s", value);
        if (!kr_ft_is_checkpoint(out))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: %s holds no config.json + model.safetensors", key, value);
        return KR_OK;
    }
    if (kr_hub_is_repo_id(value) &&
        kr_hub_resolve_cached(value, "main", out, KR_FINETUNE_PATH_MAX, NULL) == KR_OK)
        return KR_OK;
    const int hub = kr_hub_is_repo_id(value);
    return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: %s: no such checkpoint directory%s%s%s", key,
                        value, hub ? " (nor a pulled hub model: kronos pull " : "",
                        hub ? value : "", hub ? ")" : "");
}

static void stage_paths(kr_ft_stage *sg, const char *dir) {
    snprintf(sg->dir, sizeof sg->dir, "%s", dir);
    snprintf(sg->best, sizeof sg->best, "%.4080s/best_model", dir);
    snprintf(sg->last, sizeof sg->last, "%.4080s/last_model", dir);
    snprintf(sg->ckpt, sizeof sg->ckpt, "%.4080s/checkpoint", dir);
}

/* Whether the stage trains: skipped when asked, finished before (--resume), or its best_model
 * exists with skip_existing; continued from checkpoint/ with --resume; a non-empty directory
 * is refused without --force. */
static kr_status decide(const kr_finetune_config *cfg, kr_ft_stage *sg, kr_error *err) {
    sg->run = 0;
    if (!sg->enabled) {
        snprintf(sg->skip_reason, sizeof sg->skip_reason, "experiment.train_%s is false",
                 sg->target == KR_TRAIN_TOKENIZER ? "tokenizer" : "basemodel");
        return KR_OK;
    }
    if (cfg->eval_only) { /* scores the starting checkpoint; writes nothing */
        sg->run = 1;
        return KR_OK;
    }
    if (sg->epochs == 0) {
        snprintf(sg->skip_reason, sizeof sg->skip_reason, "0 epochs");
        return KR_OK;
    }
    if (cfg->resume && !cfg->force) {
        kr_ft_progress_file p;
        int exists = 0;
        kr_error local = { 0 };
        kr_status st = kr_ft_progress_read(sg->ckpt, &p, &exists, &local);
        if (exists && st != KR_OK) return kr_error_set(err, st, "%s", local.message);
        if (exists && p.done) {
            snprintf(sg->skip_reason, sizeof sg->skip_reason, "finished before (%s)", sg->ckpt);
            return KR_OK;
        }
        if (exists) {
            sg->run = sg->resume = 1;
            return KR_OK;
        }
    }
    if (cfg->skip_existing && kr_ft_is_checkpoint(sg->best)) {
        snprintf(sg->skip_reason, sizeof sg->skip_reason, "%s exists (skip_existing)", sg->best);
        return KR_OK;
    }
    int nonempty = kr_ft_dir_nonempty(sg->dir);
    if (nonempty < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: exists and is not a directory", sg->dir);
    if (nonempty && !cfg->force)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s is not empty: refusing to overwrite it (--force replaces it, "
                            "--resume continues its checkpoint)",
                            sg->dir);
    sg->run = 1;
    return KR_OK;
}

static size_t file_size(const char *dir, const char *name) {
    char p[KR_FINETUNE_PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0 ? (size_t)sb.st_size : 0;
}

/* The stage's shape of training and its memory estimate. */
static kr_status plan_stage(kr_ft_run *run, kr_ft_stage *sg, kr_error *err) {
    const kr_finetune_config *cfg = run->cfg;
    const int B = cfg->batch_size;
    const int rows = kr_dataset_window_rows(run->ds);
    sg->accumulation = sg->target == KR_TRAIN_TOKENIZER ? cfg->accumulation_steps : 1;
    sg->micro_batch = B / sg->accumulation;
    if (sg->micro_batch < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "training.accumulation_steps %d exceeds training.batch_size %d",
                            cfg->accumulation_steps, B);
    sg->train_windows = kr_dataset_n_windows(run->ds, KR_SPLIT_TRAIN);
    int64_t nval = kr_dataset_n_windows(run->ds, KR_SPLIT_VAL);
    sg->val_windows = cfg->val_windows > 0 && cfg->val_windows < nval ? cfg->val_windows : nval;
    /* The official loader drops a last partial batch (drop_last=True). */
    sg->steps_per_epoch = sg->train_windows / B;
    if (cfg->steps_per_epoch > 0 && cfg->steps_per_epoch < sg->steps_per_epoch)
        sg->steps_per_epoch = cfg->steps_per_epoch;
    if (sg->steps_per_epoch == 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s stage: the training split holds %lld windows of %d rows, fewer "
                            "than training.batch_size %d: lower the batch size or "
                            "data.lookback_window / predict_window, or give more data",
                            sg->name, (long long)sg->train_windows, rows, B);
    sg->total_steps = sg->steps_per_epoch * sg->epochs;

    kr_train_params *p = &sg->params;
    *p = kr_train_default_params(sg->target);
    p->batch_size = sg->micro_batch;
    p->seq_len = rows;
    p->accumulation_steps = sg->accumulation;
    p->weight_decay = cfg->adam_weight_decay;
    if (sg->target == KR_TRAIN_PREDICTOR) {
        p->lr = cfg->predictor_learning_rate;
        p->beta1 = cfg->adam_beta1;
        p->beta2 = cfg->adam_beta2;
        p->clip_norm = 3.0;
    } else {
        /* finetune_tokenizer.py builds its AdamW with torch's default betas. */
        p->lr = cfg->tokenizer_learning_rate;
        p->beta1 = 0.9;
        p->beta2 = 0.999;
        p->clip_norm = 2.0;
    }
    p->total_steps = sg->total_steps;
    p->pct_start = 0.03;
    p->div_factor = 10;
    p->use_dropout = cfg->dropout;
    p->seed = (uint64_t)cfg->seed;
    p->n_threads = cfg->threads;

    size_t trainer = 0;
    kr_status st = kr_train_memory_estimate(sg->pretrained, p, &trainer, err);
    if (st != KR_OK) return st;
    const size_t cells = (size_t)B * (size_t)rows;
    size_t buffers = cells * (6 * sizeof(float) + 7 * sizeof(int32_t)) +
                     (size_t)(sg->train_windows + sg->val_windows) * sizeof(kr_window_ref);
    size_t encoder = 0;
    if (sg->target == KR_TRAIN_PREDICTOR)
        /* The tokenizer's weights (read into memory) and its encoder's workspace, which its
         * module bounds for a window of these rows; the tokenizer may not exist yet (the
         * first stage writes it): its pretrained shape stands in. */
        encoder = 2 * file_size(sg->tokenizer, "model.safetensors") + (size_t)rows * rows * 64 +
                  (size_t)rows * 64 * 1024;
    sg->memory_bytes = trainer + buffers + encoder;
    return KR_OK;
}

/* Memory this process may still take: kronos.memory_limit_mb, else MemAvailable. */
static double available_bytes(const kr_finetune_config *cfg) {
    if (cfg->memory_limit_mb > 0) return (double)cfg->memory_limit_mb * MB;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb > 0) return kb * 1024.0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : INFINITY;
}

static void log_start(kr_ft_run *run) {
    cJSON *o = kr_ft_log_event("start");
    cJSON_AddStringToObject(o, "kronos", kr_version());
    cJSON *c = cJSON_AddObjectToObject(o, "config");
    for (int i = 0; c && i < kr_finetune_n_keys(); i++) {
        char v[4096];
        const kr_finetune_key *k = kr_finetune_key_at(i);
        if (kr_finetune_config_get(run->cfg, k->key, v, sizeof v, NULL) == KR_OK)
            cJSON_AddStringToObject(c, k->key, v);
    }
    kr_ft_log_write(run->log, o, NULL);
}

static void result_init(kr_finetune_result *r) {
    memset(r, 0, sizeof *r);
    r->tokenizer_best_val_loss = r->predictor_best_val_loss = NAN;
}

/* ---------------------------------------------------------------- run */

kr_status kr_finetune_run(const kr_finetune_config *cfg, kr_finetune_progress_cb cb, void *user,
                          kr_finetune_result *out, kr_error *err) {
    kr_finetune_result local;
    kr_finetune_result *res = out ? out : &local;
    result_init(res);
    if (!cfg) return kr_error_set(err, KR_ERR_INVALID_ARG, "finetune: NULL config");
    const double t0 = kr_now_seconds();
    kr_ft_run run = { .cfg = cfg, .cb = cb, .user = user, .result = res };
    kr_ft_stage tok = { .name = "tokenizer", .target = KR_TRAIN_TOKENIZER };
    kr_ft_stage pred = { .name = "predictor", .target = KR_TRAIN_PREDICTOR };
    kr_status st = kr_ft_config_resolve(cfg, &run.paths, err);
    if (st != KR_OK) return st;
    snprintf(res->base_save_path, sizeof res->base_save_path, "%s", run.paths.base_save_path);
    stage_paths(&tok, run.paths.tokenizer_dir);
    stage_paths(&pred, run.paths.predictor_dir);
    tok.enabled = cfg->train_tokenizer;
    pred.enabled = cfg->train_basemodel;
    tok.epochs = run.paths.tokenizer_epochs;
    pred.epochs = run.paths.basemodel_epochs;
    tok.fresh = !run.paths.pre_trained_tokenizer;
    pred.fresh = !run.paths.pre_trained_predictor;
    if (!tok.enabled && !pred.enabled)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "nothing to train: experiment.train_tokenizer and train_basemodel "
                            "are both false");
    if (tok.enabled &&
        (st = resolve_model("model_paths.pretrained_tokenizer", cfg->pretrained_tokenizer,
                            tok.pretrained, err)) != KR_OK)
        return st;
    if (pred.enabled) {
        if ((st = resolve_model("model_paths.pretrained_predictor", cfg->pretrained_predictor,
                                pred.pretrained, err)) != KR_OK)
            return st;
        /* The ids come from the tokenizer stage's best_model when that stage is asked for;
         * else from model_paths.finetuned_tokenizer, or the pretrained tokenizer when that is
         * not set (the official requires the former). */
        const int given = cfg->finetuned_tokenizer && *cfg->finetuned_tokenizer;
        if (cfg->eval_only && !given && tok.enabled)
            snprintf(pred.tokenizer, sizeof pred.tokenizer, "%s", tok.pretrained);
        else if (tok.enabled && !given)
            snprintf(pred.tokenizer, sizeof pred.tokenizer, "%s", tok.best);
        else if (given || kr_ft_is_checkpoint(run.paths.finetuned_tokenizer))
            snprintf(pred.tokenizer, sizeof pred.tokenizer, "%s", run.paths.finetuned_tokenizer);
        else if ((st = resolve_model("model_paths.pretrained_tokenizer (the predictor stage's "
                                     "tokenizer, since no fine-tuned one is named)",
                                     cfg->pretrained_tokenizer, pred.tokenizer, err)) != KR_OK)
            return st;
        if (!tok.enabled && !kr_ft_is_checkpoint(pred.tokenizer))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "model_paths.finetuned_tokenizer: %s holds no config.json + "
                                "model.safetensors",
                                pred.tokenizer);
    }
    if ((st = decide(cfg, &tok, err)) != KR_OK) return st;
    if ((st = decide(cfg, &pred, err)) != KR_OK) return st;

    /* The data, once for both stages. */
    kr_dataset_params dp = { .lookback = cfg->lookback_window,
                             .predict = cfg->predict_window,
                             .train_ratio = cfg->train_ratio,
                             .val_ratio = cfg->val_ratio,
                             .clip = (float)cfg->clip };
    if ((st = kr_dataset_create(&dp, &run.ds, err)) != KR_OK) return st;
    if ((st = kr_ft_load_data(cfg, run.ds, note_data, &run, err)) != KR_OK) goto done;
    kr_ft_info(&run, NULL,
               "data: %d series, windows of %d rows: %lld training, %lld validation, %lld test",
               kr_dataset_n_series(run.ds), kr_dataset_window_rows(run.ds),
               (long long)kr_dataset_n_windows(run.ds, KR_SPLIT_TRAIN),
               (long long)kr_dataset_n_windows(run.ds, KR_SPLIT_VAL),
               (long long)kr_dataset_n_windows(run.ds, KR_SPLIT_TEST));
    char ignored[1024];
    if (kr_finetune_config_ignored(cfg, ignored, sizeof ignored) > 0)
        kr_ft_info(&run, NULL, "accepted and ignored (no meaning here): %s", ignored);

    /* Plans and memory, before anything is written. */
    kr_ft_stage *stages[2] = { &tok, &pred };
    const double avail = available_bytes(cfg);
    for (int i = 0; i < 2; i++) {
        kr_ft_stage *sg = stages[i];
        if (!sg->run) continue;
        if ((st = plan_stage(&run, sg, err)) != KR_OK) goto done;
        double need = (double)sg->memory_bytes + (double)kr_dataset_bytes(run.ds);
        if (cfg->eval_only)
            kr_ft_info(&run, sg->name,
                       "%s: scoring %lld validation windows; about %.0f MB of memory", sg->name,
                       (long long)sg->val_windows, need / MB);
        else
            kr_ft_info(&run, sg->name,
                       "%s stage: %d epochs x %lld steps of %d windows (%d x %d), %lld validation "
                       "windows; about %.0f MB of memory",
                       sg->name, sg->epochs, (long long)sg->steps_per_epoch, cfg->batch_size,
                       sg->accumulation, sg->micro_batch, (long long)sg->val_windows, need / MB);
        if (need > avail) {
            st =
                kr_error_set(err, KR_ERR_NOMEM,
                             "%s stage: needs about %.0f MB (trainer, batches and %.0f MB of "
                             "candles), more than the %.0f MB %s: lower training.batch_size or "
                             "data.lookback_window",
                             sg->name, need / MB, (double)kr_dataset_bytes(run.ds) / MB, avail / MB,
                             cfg->memory_limit_mb > 0 ? "kronos.memory_limit_mb allows"
                                                      : "this machine has available");
            goto done;
        }
    }
    for (int i = 0; i < 2; i++)
        if (!stages[i]->run && stages[i]->enabled)
            kr_ft_info(&run, stages[i]->name, "%s stage skipped: %s", stages[i]->name,
                       stages[i]->skip_reason);
    if (cfg->dry_run) {
        kr_ft_info(&run, NULL, "dry run: nothing trained or written");
        goto done;
    }
    if (cfg->eval_only) {
        for (int i = 0; i < 2 && st == KR_OK; i++) {
            kr_ft_stage *sg = stages[i];
            if (!sg->run) continue;
            double val = NAN, off = NAN;
            if ((st = kr_ft_stage_eval(&run, sg, &val, &off, err)) != KR_OK) break;
            if (sg->target == KR_TRAIN_TOKENIZER)
                res->tokenizer_best_val_loss = val;
            else
                res->predictor_best_val_loss = val;
            char extra[96] = "";
            if (isfinite(off))
                snprintf(extra, sizeof extra, " (official model.eval() variant %.6f)", off);
            kr_ft_info(&run, sg->name, "%s: validation loss %.6f over %lld windows (%s)%s",
                       sg->name, val, (long long)sg->val_windows, sg->pretrained, extra);
        }
        goto done;
    }

    if ((st = kr_ft_log_open(run.paths.log_dir, &run.log, err)) != KR_OK) goto done;
    snprintf(res->log_path, sizeof res->log_path, "%s", kr_ft_log_path(run.log));
    log_start(&run);
    for (int i = 0; i < 2 && st == KR_OK; i++) {
        kr_ft_stage *sg = stages[i];
        if (!sg->run) {
            if (!sg->enabled) continue;
            cJSON *o = kr_ft_log_event("stage_skipped");
            cJSON_AddStringToObject(o, "stage", sg->name);
            cJSON_AddStringToObject(o, "reason", sg->skip_reason);
            kr_ft_log_write(run.log, o, NULL);
            emit_line(&run, KR_FT_STAGE_SKIPPED, sg->name, sg->skip_reason);
            continue;
        }
        if (!sg->resume && cfg->force) {
            /* Replace what an earlier run left (only what a run writes). */
            const char *parts[3] = { sg->best, sg->last, sg->ckpt };
            for (int k = 0; k < 3 && st == KR_OK; k++) st = kr_ft_remove_tree(parts[k], err);
            if (st != KR_OK) break;
        }
        if (sg->target == KR_TRAIN_PREDICTOR && !kr_ft_is_checkpoint(sg->tokenizer)) {
            st = kr_error_set(err, KR_ERR_INVALID_ARG,
                              "predictor stage: its tokenizer %s holds no checkpoint (the "
                              "tokenizer stage wrote none)",
                              sg->tokenizer);
            break;
        }
        if (sg->target == KR_TRAIN_TOKENIZER)
            res->tokenizer_ran = 1;
        else
            res->predictor_ran = 1;
        st = kr_ft_stage_train(&run, sg, err);
        if (st == KR_ERR_CANCELLED) res->stopped = 1;
    }
    {
        cJSON *o = kr_ft_log_event(st == KR_OK              ? "done"
                                   : st == KR_ERR_CANCELLED ? "stopped"
                                                            : "error");
        if (st != KR_OK && err) cJSON_AddStringToObject(o, "message", err->message);
        cJSON_AddNumberToObject(o, "seconds", kr_now_seconds() - t0);
        kr_ft_log_write(run.log, o, NULL);
    }
done:
    if (kr_ft_is_checkpoint(tok.best))
        snprintf(res->tokenizer_best, KR_FINETUNE_PATH_MAX, "%s", tok.best);
    if (kr_ft_is_checkpoint(tok.last))
        snprintf(res->tokenizer_last, KR_FINETUNE_PATH_MAX, "%s", tok.last);
    if (kr_ft_is_checkpoint(pred.best))
        snprintf(res->predictor_best, KR_FINETUNE_PATH_MAX, "%s", pred.best);
    if (kr_ft_is_checkpoint(pred.last))
        snprintf(res->predictor_last, KR_FINETUNE_PATH_MAX, "%s", pred.last);
    res->seconds = kr_now_seconds() - t0;
    kr_ft_log_close(run.log);
    kr_dataset_free(run.ds);
    return st;
}
