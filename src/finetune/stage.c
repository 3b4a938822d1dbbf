/*
 * finetune/stage — one stage of a fine-tune: the official training loop (finetune_csv's
 * train_model / train_tokenizer) over the training core (kronos/train.h).
 *
 * Each epoch takes the epoch's window order (train/order.h), batch by batch: fills the
 * windows, encodes them with the frozen tokenizer (predictor stage), runs the micro-batches
 * (the tokenizer's accumulation_steps slices of a batch, as the official), steps the
 * optimizer. After the last batch it validates, writes last_model/, best_model/ when the
 * validation loss improved, and a resumable checkpoint. Buffers are allocated once, before
 * the first step.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "finetune/fresh_weights.h"
#include "finetune/pipeline.h"
#include "finetune/state.h"
#include "kronos/util.h"
#include "train/order.h"
#include "train/window_encoder.h"

typedef struct stage_ctx {
    kr_ft_run *run;
    kr_ft_stage *sg;
    kr_trainer *tr;
    kr_window_encoder *enc; /* predictor stage */
    int rows; /* window rows */
    float *x; /* [batch][rows][6] */
    int32_t *stamp; /* [batch][rows][5] */
    int32_t *s1, *s2; /* [batch][rows] */
    kr_window_ref *order; /* [train windows] */
    kr_window_ref *val; /* [val windows scored] */
    int64_t n_val;
    char start_dir[KR_FINETUNE_PATH_MAX]; /* what the trainer was created from */
    char state_file[64]; /* the state file progress.json names now ("" before the first) */
    int64_t saved_steps; /* the step of that checkpoint (-1: none yet) */
    kr_ft_progress_file pos;
    double t0, trained_positions, last_loss, last_lr, last_norm;
    double epoch_loss_sum; /* this epoch's step losses, for its mean */
    int64_t epoch_steps;
    double last_val, last_val_official;
} stage_ctx;

static int is_predictor(const stage_ctx *c) { return c->sg->target == KR_TRAIN_PREDICTOR; }

/* Positions one window trains: the predictor learns rows - 1 next tokens, the tokenizer
 * reconstructs every row. */
static double positions_per_window(const stage_ctx *c) {
    return is_predictor(c) ? c->rows - 1 : c->rows;
}

static void progress_base(const stage_ctx *c, kr_finetune_progress *p, kr_finetune_event ev) {
    memset(p, 0, sizeof *p);
    p->event = ev;
    p->stage = c->sg->name;
    p->epoch = c->pos.epoch < c->sg->epochs ? c->pos.epoch + 1 : c->sg->epochs;
    p->epochs = c->sg->epochs;
    p->step = c->pos.steps;
    p->total_steps = c->sg->total_steps;
    p->step_in_epoch = c->pos.batch;
    p->steps_per_epoch = c->sg->steps_per_epoch;
    p->loss = c->last_loss;
    p->epoch_loss = c->epoch_steps ? c->epoch_loss_sum / (double)c->epoch_steps : NAN;
    p->lr = c->last_lr;
    p->grad_norm = c->last_norm;
    p->val_loss = c->last_val;
    p->val_loss_official = c->last_val_official;
    p->best_val_loss = c->pos.best_val_loss;
    double el = kr_now_seconds() - c->t0;
    p->elapsed_seconds = el;
    p->tokens_per_second = el > 0 ? c->trained_positions / el : 0;
    p->eta_seconds = NAN;
}

/* ---------------------------------------------------------------- batches */

static kr_status fill(stage_ctx *c, const kr_window_ref *refs, int n, kr_error *err) {
    const int rows = c->rows;
    for (int i = 0; i < n; i++) {
        kr_status st = kr_dataset_fill(c->run->ds, refs[i], c->x + (size_t)i * rows * 6,
                                       c->stamp + (size_t)i * rows * 5, err);
        if (st != KR_OK) return st;
    }
    if (is_predictor(c)) return kr_window_encoder_run(c->enc, c->x, n, rows, c->s1, c->s2, err);
    return KR_OK;
}

static kr_train_batch slice(const stage_ctx *c, int first, int n) {
    size_t off = (size_t)first * (size_t)c->rows;
    kr_train_batch b = { .n = n, .len = c->rows };
    if (is_predictor(c)) {
        b.s1 = c->s1 + off;
        b.s2 = c->s2 + off;
        b.stamp = c->stamp + off * 5;
    } else
        b.x = c->x + off * 6;
    return b;
}

/* ---------------------------------------------------------------- checkpoints */

/* A saved checkpoint's config.json is the starting checkpoint's, byte for byte: training
 * changes weights, not the constructor's arguments, and this keeps what a writer of configs
 * would normalise away (the dropout rates, the BSQ loss weights, kronos's "intended_use" and
 * "source", so that a fine-tuned demo model stays marked as one). */
static kr_status copy_config(const char *from_dir, const char *to_dir, kr_error *err) {
    char from[KR_FINETUNE_PATH_MAX + 16], to[KR_FINETUNE_PATH_MAX + 32];
    snprintf(from, sizeof from, "%s/config.json", from_dir);
    snprintf(to, sizeof to, "%s/config.json", to_dir);
    return kr_ft_copy_file(from, to, err);
}

/* Writes the model into dir through dir.tmp, so a reader never sees half a checkpoint there
 * (only, for a moment, none). */
static kr_status save_model(stage_ctx *c, const char *dir, kr_error *err) {
    char tmp[KR_FINETUNE_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    kr_status st = kr_ft_remove_tree(tmp, err);
    if (st == KR_OK) st = kr_trainer_save(c->tr, tmp, err);
    if (st == KR_OK) st = copy_config(c->start_dir, tmp, err);
    if (st != KR_OK) return st;
    if ((st = kr_ft_remove_tree(dir, err)) != KR_OK) return st;
    if (rename(tmp, dir) != 0)
        return kr_error_set(err, KR_ERR_IO, "%s: cannot rename to %s", tmp, dir);
    kr_finetune_progress p;
    progress_base(c, &p, KR_FT_SAVED);
    p.path = dir;
    kr_ft_emit(c->run, &p);
    cJSON *o = kr_ft_log_event("saved");
    cJSON_AddStringToObject(o, "stage", c->sg->name);
    cJSON_AddStringToObject(o, "path", dir);
    cJSON_AddNumberToObject(o, "step", (double)c->pos.steps);
    kr_ft_log_write(c->run->log, o, NULL);
    return KR_OK;
}

/* A resumable checkpoint at the current position: the trainer's state file, then
 * progress.json naming it, then the previous state file removed. */
static kr_status save_state(stage_ctx *c, kr_error *err) {
    kr_status st = kr_mkdir_p(c->sg->ckpt, err);
    if (st != KR_OK) return st;
    char previous[64];
    snprintf(previous, sizeof previous, "%s", c->state_file);
    snprintf(c->pos.state_file, sizeof c->pos.state_file, "trainer-%lld.state",
             (long long)c->pos.steps);
    char path[KR_FINETUNE_PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s", c->sg->ckpt, c->pos.state_file);
    if ((st = kr_trainer_save_state(c->tr, path, err)) != KR_OK) return st;
    if ((st = kr_ft_progress_write(c->sg->ckpt, &c->pos, previous, err)) != KR_OK) return st;
    snprintf(c->state_file, sizeof c->state_file, "%s", c->pos.state_file);
    c->saved_steps = c->pos.steps;
    return KR_OK;
}

/* ---------------------------------------------------------------- validation */

/* The official validation loss: tokenizer mse(z, x) over the scored windows (the official
 * weighs each batch by its windows); predictor the mean of the batches' losses, batches of
 * batch_size windows as the official val loader makes them (the last one partial). */
static kr_status validate(stage_ctx *c, double *val, double *val_official, kr_error *err) {
    *val = *val_official = NAN;
    if (c->n_val == 0) return KR_OK;
    const int chunk = c->sg->micro_batch;
    double sum = 0, sum_off = 0, weight = 0;
    for (int64_t first = 0; first < c->n_val; first += chunk) {
        int n = (int)(c->n_val - first < chunk ? c->n_val - first : chunk);
        kr_status st = fill(c, c->val + first, n, err);
        if (st != KR_OK) return st;
        kr_train_batch b = slice(c, 0, n);
        kr_train_losses l;
        if ((st = kr_trainer_evaluate(c->tr, &b, 0, &l, err)) != KR_OK) return st;
        if (is_predictor(c)) {
            sum += l.loss;
            weight += 1;
            if (c->run->cfg->official_eval) {
                kr_train_losses lo;
                if ((st = kr_trainer_evaluate(c->tr, &b, 1, &lo, err)) != KR_OK) return st;
                sum_off += lo.loss;
            }
        } else {
            sum += l.recon * n;
            weight += n;
        }
    }
    *val = sum / weight;
    if (is_predictor(c) && c->run->cfg->official_eval) *val_official = sum_off / weight;
    return KR_OK;
}

/* ---------------------------------------------------------------- setup */

static kr_status prepare(stage_ctx *c, kr_error *err) {
    kr_ft_stage *sg = c->sg;
    const kr_finetune_config *cfg = c->run->cfg;
    kr_status st;
    snprintf(c->start_dir, sizeof c->start_dir, "%s", sg->pretrained);
    if (sg->fresh && !cfg->eval_only) {
        snprintf(c->start_dir, sizeof c->start_dir, "%s/fresh", sg->ckpt);
        if (!kr_ft_is_checkpoint(c->start_dir)) {
            st = kr_ft_write_fresh(sg->pretrained, sg->target == KR_TRAIN_TOKENIZER,
                                   (uint64_t)cfg->seed, c->start_dir, err);
            if (st != KR_OK) return st;
        }
    }
    if ((st = kr_trainer_create(c->start_dir, &sg->params, &c->tr, err)) != KR_OK) return st;
    if (is_predictor(c) &&
        (st = kr_window_encoder_create(sg->tokenizer, cfg->threads, &c->enc, err)) != KR_OK) {
        kr_error_prefix(err, "the predictor stage's tokenizer %s", sg->tokenizer);
        return st;
    }
    const int B = cfg->batch_size;
    c->rows = kr_dataset_window_rows(c->run->ds);
    const size_t cells = (size_t)B * (size_t)c->rows;
    c->x = malloc(cells * 6 * sizeof *c->x);
    c->stamp = malloc(cells * 5 * sizeof *c->stamp);
    c->s1 = malloc(cells * sizeof *c->s1);
    c->s2 = malloc(cells * sizeof *c->s2);
    c->order = malloc((size_t)(sg->train_windows ? sg->train_windows : 1) * sizeof *c->order);
    c->val = malloc((size_t)(sg->val_windows ? sg->val_windows : 1) * sizeof *c->val);
    if (!c->x || !c->stamp || !c->s1 || !c->s2 || !c->order || !c->val)
        return kr_error_set(err, KR_ERR_NOMEM, "%s stage: out of memory for batches", sg->name);
    kr_order_eval(c->run->ds, KR_SPLIT_VAL, cfg->val_windows, c->val, &c->n_val);

    /* Where the run stands: a fresh start, or the checkpoint's position. */
    kr_ft_progress_file *p = &c->pos;
    memset(p, 0, sizeof *p);
    p->best_val_loss = p->last_val_loss = NAN;
    p->steps_per_epoch = sg->steps_per_epoch;
    p->total_steps = sg->total_steps;
    p->train_windows = sg->train_windows;
    p->batch_size = B;
    p->window_rows = c->rows;
    p->seed = (uint64_t)cfg->seed;
    if (sg->resume && !cfg->eval_only) {
        kr_ft_progress_file saved;
        int exists = 0;
        if ((st = kr_ft_progress_read(sg->ckpt, &saved, &exists, err)) != KR_OK) return st;
        if (saved.steps_per_epoch != p->steps_per_epoch || saved.total_steps != p->total_steps ||
            saved.train_windows != p->train_windows || saved.batch_size != B ||
            saved.window_rows != c->rows || saved.seed != p->seed)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s/progress.json: the checkpoint was made with other data or "
                                "settings (%lld training windows of %d rows, batch %d, %lld "
                                "steps, seed %lld; now %lld, %d, %d, %lld, %lld): resuming would "
                                "replay other batches; start over with --force",
                                sg->ckpt, (long long)saved.train_windows, saved.window_rows,
                                saved.batch_size, (long long)saved.total_steps,
                                (long long)saved.seed, (long long)p->train_windows, c->rows, B,
                                (long long)p->total_steps, (long long)p->seed);
        char path[KR_FINETUNE_PATH_MAX + 80];
        snprintf(path, sizeof path, "%s/%s", sg->ckpt, saved.state_file);
        if ((st = kr_trainer_load_state(c->tr, path, err)) != KR_OK) return st;
        if (kr_trainer_steps_done(c->tr) != saved.steps)
            return kr_error_set(err, KR_ERR_FORMAT, "%s: holds step %ld, progress.json says %lld",
                                path, kr_trainer_steps_done(c->tr), (long long)saved.steps);
        *p = saved;
        snprintf(c->state_file, sizeof c->state_file, "%s", saved.state_file);
        c->saved_steps = saved.steps;
        c->last_val = saved.last_val_loss;
    }
    return KR_OK;
}

static void release(stage_ctx *c) {
    kr_trainer_free(c->tr);
    kr_window_encoder_free(c->enc);
    free(c->x);
    free(c->stamp);
    free(c->s1);
    free(c->s2);
    free(c->order);
    free(c->val);
}

/* ---------------------------------------------------------------- the loop */

static void log_step(stage_ctx *c, const kr_train_losses *l) {
    cJSON *o = kr_ft_log_event("step");
    cJSON_AddStringToObject(o, "stage", c->sg->name);
    cJSON_AddNumberToObject(o, "epoch", c->pos.epoch + 1);
    cJSON_AddNumberToObject(o, "step", (double)c->pos.steps);
    cJSON_AddNumberToObject(o, "loss", c->last_loss);
    if (is_predictor(c)) {
        cJSON_AddNumberToObject(o, "ce_s1", l->ce_s1);
        cJSON_AddNumberToObject(o, "ce_s2", l->ce_s2);
    } else {
        cJSON_AddNumberToObject(o, "recon_pre", l->recon_pre);
        cJSON_AddNumberToObject(o, "recon", l->recon);
        cJSON_AddNumberToObject(o, "bsq", l->bsq);
    }
    cJSON_AddNumberToObject(o, "lr", c->last_lr);
    cJSON_AddNumberToObject(o, "grad_norm", c->last_norm);
    double el = kr_now_seconds() - c->t0;
    cJSON_AddNumberToObject(o, "tokens_per_second", el > 0 ? c->trained_positions / el : 0);
    cJSON_AddNumberToObject(o, "elapsed_seconds", el);
    kr_ft_log_write(c->run->log, o, NULL);
}

static double eta(const stage_ctx *c, int64_t steps_at_start) {
    int64_t done = c->pos.steps - steps_at_start;
    if (done <= 0) return NAN;
    double per = (kr_now_seconds() - c->t0) / (double)done;
    return per * (double)(c->sg->total_steps - c->pos.steps);
}

/* One optimizer step on batch b of the epoch's order. */
static kr_status train_step(stage_ctx *c, int64_t b, kr_error *err) {
    kr_ft_stage *sg = c->sg;
    const int B = c->run->cfg->batch_size;
    kr_status st = fill(c, c->order + b * B, sg->micro_batch * sg->accumulation, err);
    if (st != KR_OK) return st;
    double loss = 0;
    kr_train_losses l = { 0 };
    for (int m = 0; m < sg->accumulation; m++) {
        kr_train_batch mb = slice(c, m * sg->micro_batch, sg->micro_batch);
        if ((st = kr_trainer_accumulate(c->tr, &mb, &l, err)) != KR_OK) {
            kr_trainer_zero_grad(c->tr);
            kr_error_prefix(err, "%s stage, step %lld (epoch %d)", sg->name,
                            (long long)c->pos.steps + 1, c->pos.epoch + 1);
            return st;
        }
        loss += l.loss / sg->accumulation;
    }
    if (!isfinite(loss))
        return kr_error_set(err, KR_ERR_NUMERIC, "%s stage, step %lld (epoch %d): the loss is %s",
                            sg->name, (long long)c->pos.steps + 1, c->pos.epoch + 1,
                            isnan(loss) ? "NaN" : "infinite");
    kr_train_step_info info;
    if ((st = kr_trainer_step(c->tr, &info, err)) != KR_OK) {
        kr_error_prefix(err, "%s stage, step %lld (epoch %d)", sg->name,
                        (long long)c->pos.steps + 1, c->pos.epoch + 1);
        return st;
    }
    c->pos.steps++;
    c->pos.batch = b + 1;
    c->last_loss = loss;
    c->epoch_loss_sum += loss;
    c->epoch_steps++;
    c->last_lr = info.lr;
    c->last_norm = info.grad_norm;
    c->trained_positions += positions_per_window(c) * sg->micro_batch * sg->accumulation;
    c->run->result->steps++;
    const int64_t every = c->run->cfg->log_interval;
    if (c->pos.steps == 1 || c->pos.steps % every == 0) log_step(c, &l);
    return KR_OK;
}

static kr_status end_of_epoch(stage_ctx *c, kr_error *err) {
    kr_ft_stage *sg = c->sg;
    double val, val_off;
    kr_status st = validate(c, &val, &val_off, err);
    if (st != KR_OK) return st;
    c->last_val = c->pos.last_val_loss = val;
    c->last_val_official = val_off;
    const int improved =
        !isfinite(val) || !isfinite(c->pos.best_val_loss) || val < c->pos.best_val_loss;
    if (improved) c->pos.best_val_loss = val;
    kr_finetune_progress p;
    progress_base(c, &p, KR_FT_EVAL);
    kr_ft_emit(c->run, &p);
    cJSON *o = kr_ft_log_event("eval");
    cJSON_AddStringToObject(o, "stage", sg->name);
    cJSON_AddNumberToObject(o, "epoch", c->pos.epoch + 1);
    cJSON_AddNumberToObject(o, "step", (double)c->pos.steps);
    cJSON_AddNumberToObject(o, "val_loss", val);
    if (is_predictor(c) && c->run->cfg->official_eval)
        cJSON_AddNumberToObject(o, "val_loss_official", val_off);
    cJSON_AddNumberToObject(o, "val_windows", (double)c->n_val);
    if (c->epoch_steps)
        cJSON_AddNumberToObject(o, "train_loss", c->epoch_loss_sum / (double)c->epoch_steps);
    cJSON_AddBoolToObject(o, "best", improved);
    kr_ft_log_write(c->run->log, o, NULL);
    if ((st = save_model(c, sg->last, err)) != KR_OK) return st;
    /* Without validation windows every epoch is "best": best_model is the last one. */
    if (improved && (st = save_model(c, sg->best, err)) != KR_OK) return st;
    c->pos.epoch++;
    c->pos.batch = 0;
    c->epoch_loss_sum = 0;
    c->epoch_steps = 0;
    return save_state(c, err);
}

/* A stage's context before prepare(): no figure known yet, no step saved. */
static stage_ctx stage_ctx_of(kr_ft_run *run, kr_ft_stage *sg) {
    stage_ctx c = { .run = run, .sg = sg, .saved_steps = -1 };
    c.last_loss = c.last_lr = c.last_norm = c.last_val = c.last_val_official = NAN;
    return c;
}

kr_status kr_ft_stage_train(kr_ft_run *run, kr_ft_stage *sg, kr_error *err) {
    stage_ctx c = stage_ctx_of(run, sg);
    kr_status st = prepare(&c, err);
    const int64_t steps_at_start = c.pos.steps;
    c.t0 = kr_now_seconds();
    if (st == KR_OK) {
        cJSON *o = kr_ft_log_event("stage_start");
        cJSON_AddStringToObject(o, "stage", sg->name);
        cJSON_AddStringToObject(o, "start", c.start_dir);
        if (sg->target == KR_TRAIN_PREDICTOR)
            cJSON_AddStringToObject(o, "tokenizer", sg->tokenizer);
        cJSON_AddNumberToObject(o, "epochs", sg->epochs);
        cJSON_AddNumberToObject(o, "steps_per_epoch", (double)sg->steps_per_epoch);
        cJSON_AddNumberToObject(o, "total_steps", (double)sg->total_steps);
        cJSON_AddNumberToObject(o, "train_windows", (double)sg->train_windows);
        cJSON_AddNumberToObject(o, "val_windows", (double)c.n_val);
        cJSON_AddNumberToObject(o, "window_rows", c.rows);
        cJSON_AddNumberToObject(o, "batch_size", run->cfg->batch_size);
        cJSON_AddNumberToObject(o, "resumed_at_step", (double)c.pos.steps);
        kr_ft_log_write(run->log, o, NULL);
        kr_finetune_progress p;
        progress_base(&c, &p, KR_FT_STAGE_START);
        kr_ft_emit(run, &p);
    }
    while (st == KR_OK && c.pos.epoch < sg->epochs) {
        if ((st = kr_order_train(run->ds, (uint64_t)run->cfg->seed, c.pos.epoch, c.order, err)) !=
            KR_OK)
            break;
        while (st == KR_OK && c.pos.batch < sg->steps_per_epoch && !run->stop_requested) {
            if ((st = train_step(&c, c.pos.batch, err)) != KR_OK) break;
            kr_finetune_progress p;
            progress_base(&c, &p, KR_FT_STEP);
            p.eta_seconds = eta(&c, steps_at_start);
            kr_ft_emit(run, &p);
            const int64_t every = run->cfg->checkpoint_every;
            if (every > 0 && c.pos.steps % every == 0 && c.pos.batch < sg->steps_per_epoch)
                st = save_state(&c, err);
        }
        if (st != KR_OK) break;
        if (run->stop_requested) {
            /* Where it stands, resumable: the state, and the weights as they are. */
            if ((st = save_state(&c, err)) == KR_OK) st = save_model(&c, sg->last, err);
            if (st == KR_OK) {
                cJSON *o = kr_ft_log_event("stop");
                cJSON_AddStringToObject(o, "stage", sg->name);
                cJSON_AddNumberToObject(o, "step", (double)c.pos.steps);
                kr_ft_log_write(run->log, o, NULL);
                st = kr_error_set(err, KR_ERR_CANCELLED,
                                  "%s stage stopped at step %lld of %lld; a checkpoint is in %s "
                                  "(continue with --resume)",
                                  sg->name, (long long)c.pos.steps, (long long)sg->total_steps,
                                  sg->ckpt);
            }
            break;
        }
        st = end_of_epoch(&c, err);
    }
    if (st == KR_ERR_NUMERIC) {
        /* Nothing was written for the bad step: say which checkpoint is the last good one. */
        char msg[sizeof err->message], where[KR_FINETUNE_PATH_MAX + 64];
        if (c.saved_steps >= 0)
            snprintf(where, sizeof where, "the last checkpoint (step %lld) is kept in %s",
                     (long long)c.saved_steps, sg->ckpt);
        else
            snprintf(where, sizeof where, "no checkpoint was written yet");
        snprintf(msg, sizeof msg, "%s; %s", err ? err->message : "", where);
        kr_error_set(err, KR_ERR_NUMERIC, "%s", msg);
        cJSON *o = kr_ft_log_event("error");
        cJSON_AddStringToObject(o, "stage", sg->name);
        cJSON_AddStringToObject(o, "message", msg);
        kr_ft_log_write(run->log, o, NULL);
    }
    if (st == KR_OK) {
        c.pos.done = 1;
        st = kr_ft_progress_write(sg->ckpt, &c.pos, NULL, err);
    }
    if (st == KR_OK) {
        cJSON *o = kr_ft_log_event("stage_done");
        cJSON_AddStringToObject(o, "stage", sg->name);
        cJSON_AddNumberToObject(o, "steps", (double)c.pos.steps);
        cJSON_AddNumberToObject(o, "best_val_loss", c.pos.best_val_loss);
        cJSON_AddNumberToObject(o, "seconds", kr_now_seconds() - c.t0);
        kr_ft_log_write(run->log, o, NULL);
        kr_finetune_progress p;
        progress_base(&c, &p, KR_FT_STAGE_DONE);
        kr_ft_emit(run, &p);
    }
    if (sg->target == KR_TRAIN_TOKENIZER)
        run->result->tokenizer_best_val_loss = c.pos.best_val_loss;
    else
        run->result->predictor_best_val_loss = c.pos.best_val_loss;
    release(&c);
    return st;
}

kr_status kr_ft_stage_eval(kr_ft_run *run, kr_ft_stage *sg, double *val, double *val_official,
                           kr_error *err) {
    stage_ctx c = stage_ctx_of(run, sg);
    c.t0 = kr_now_seconds();
    kr_status st = prepare(&c, err);
    if (st == KR_OK) st = validate(&c, val, val_official, err);
    release(&c);
    return st;
}
