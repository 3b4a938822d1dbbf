/* server/models — see models.h. */
#include "server/models.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "engine/context.h"
#include "server/config.h"

struct kr_models {
    pthread_mutex_t mu;
    kr_served *live[KR_SERVER_MAX_MODELS + 1]; /* the names served; [0] is the main model */
    int n_live;
    kr_served *retired[64]; /* replaced or unloaded, freed at their last release */
    int n_retired;
    char default_name[64];
    int max_models;
    size_t kv_share; /* each context's KV budget */
    kr_server_config cfg; /* the server's settings (threads, kv_dtype, scheduler) */
    int loads, unloads;
    unsigned generation;
    kr_metrics *metrics; /* the server's: the ladder's series */
};

static void served_free(kr_served *e) {
    if (!e) return;
    for (int r = 1; r < e->n_rungs; r++) {
        kr_context_free(e->rung[r].ctx);
        kr_model_free(e->rung[r].owned_model);
        kr_metrics_free(e->rung[r].metrics);
    }
    if (!e->main) {
        kr_context_free(e->ctx); /* cancels nothing: its last request has ended */
        kr_model_free(e->owned_model);
        kr_metrics_free(e->metrics);
    }
    free(e);
}

kr_status kr_models_create(const char *main_name, const kr_model *main_model, kr_context *main_ctx,
                           const kr_api_model_desc *main_desc, const kr_server_config *cfg,
                           size_t kv_share, kr_models **out, kr_error *err) {
    kr_models *m = calloc(1, sizeof *m);
    kr_served *e = calloc(1, sizeof *e);
    if (!m || !e) {
        free(m);
        free(e);
        return kr_error_set(err, KR_ERR_NOMEM, "models: out of memory");
    }
    pthread_mutex_init(&m->mu, NULL);
    m->cfg = *cfg;
    m->kv_share = kv_share;
    m->max_models = cfg->max_models > 0 ? cfg->max_models : 1 + cfg->n_models;
    if (m->max_models > KR_SERVER_MAX_MODELS + 1) m->max_models = KR_SERVER_MAX_MODELS + 1;
    snprintf(e->name, sizeof e->name, "%s", main_name);
    e->model = main_model;
    e->ctx = main_ctx;
    e->main = 1;
    e->desc = *main_desc;
    e->desc.name = e->name;
    snprintf(e->quant, sizeof e->quant, "%s", cfg->quant);
    snprintf(e->kv_dtype, sizeof e->kv_dtype, "%s", cfg->kv_dtype);
    e->desc.quant = e->quant;
    e->desc.kv_dtype = e->kv_dtype;
    e->refs = 1;
    e->generation = ++m->generation;
    e->n_rungs = 1;
    snprintf(e->rung[0].precision, sizeof e->rung[0].precision, "%s",
             main_desc->info.quant[0] ? main_desc->info.quant : cfg->quant);
    e->rung[0].model = e->model;
    e->rung[0].ctx = e->ctx;
    e->rung[0].desc = e->desc;
    e->rung[0].desc.precision = e->rung[0].precision;
    m->live[m->n_live++] = e;
    snprintf(m->default_name, sizeof m->default_name, "%s", main_name);
    *out = m;
    return KR_OK;
}

void kr_models_free(kr_models *m) {
    if (!m) return;
    for (int i = 0; i < m->n_live; i++) served_free(m->live[i]);
    for (int i = 0; i < m->n_retired; i++) served_free(m->retired[i]);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int find_live(const kr_models *m, const char *name) {
    for (int i = 0; i < m->n_live; i++)
        if (!strcmp(m->live[i]->name, name)) return i;
    return -1;
}

kr_served *kr_models_acquire(kr_models *m, const char *name) {
    pthread_mutex_lock(&m->mu);
    int i = find_live(m, name && name[0] ? name : m->default_name);
    kr_served *e = i >= 0 ? m->live[i] : NULL;
    if (e) e->refs++;
    pthread_mutex_unlock(&m->mu);
    return e;
}

/* Drops a reference (lock held); returns the entry to free when that was its last one. */
static kr_served *unref_locked(kr_models *m, kr_served *e) {
    if (--e->refs > 0 || !e->retired) return NULL;
    for (int i = 0; i < m->n_retired; i++)
        if (m->retired[i] == e) {
            m->retired[i] = m->retired[--m->n_retired];
            break;
        }
    return e;
}

void kr_models_release(kr_models *m, kr_served *e) {
    if (!e) return;
    pthread_mutex_lock(&m->mu);
    kr_served *dead = unref_locked(m, e);
    pthread_mutex_unlock(&m->mu);
    served_free(dead); /* outside the lock: freeing a context joins its engine thread */
}

/* A directory holding predictor/ (and tokenizer/), or a predictor directory itself. */
static void dirs_of(const kr_model_spec *spec, char *pred, char *tok, size_t cap) {
    char probe[KR_SERVER_PATH_MAX + 32];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/predictor", spec->model);
    int nested = stat(probe, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(pred, cap, "%s%s", spec->model, nested ? "/predictor" : "");
    if (spec->tokenizer[0])
        snprintf(tok, cap, "%s", spec->tokenizer);
    else
        snprintf(tok, cap, "%s%s", spec->model, nested ? "/tokenizer" : "/../tokenizer");
}

/* A rung's precision must have passed the gate: its eval-quant report (--gate FILE --json) says
 * "gates": {"passed": true} for the same weight format (and method, when the rung names one). */
static kr_status check_gate(const kr_server_precision *p, kr_error *err) {
    char *text = NULL;
    size_t n = 0;
    kr_status st = kr_read_file(p->gate_report, (size_t)16 << 20, "gate report", &text, &n, err);
    if (st != KR_OK) return st;
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    const cJSON *gates = cJSON_GetObjectItemCaseSensitive(root, "gates");
    const cJSON *passed = cJSON_GetObjectItemCaseSensitive(gates, "passed");
    const cJSON *quant = cJSON_GetObjectItemCaseSensitive(root, "quant");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(root, "method");
    if (!root || !gates)
        st = kr_error_set(err, KR_ERR_INVALID_ARG,
                          "%s: not an eval-quant report with gates (kronos eval-quant --gate FILE "
                          "--json)",
                          p->gate_report);
    else if (!cJSON_IsString(quant) || strcmp(quant->valuestring, p->quant))
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s: the report is about %s weights, not %s",
                          p->gate_report, cJSON_IsString(quant) ? quant->valuestring : "other",
                          p->quant);
    else if (p->method[0] && (!cJSON_IsString(method) || strcmp(method->valuestring, p->method)))
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s: the report's method is not %s",
                          p->gate_report, p->method);
    else if (!cJSON_IsTrue(passed))
        st = kr_error_set(
            err, KR_ERR_INVALID_ARG, "%s: %s did not pass the gate (%d failed): not served",
            p->gate_report, p->quant,
            (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(gates, "failed")));
    cJSON_Delete(root);
    return st;
}

/* One lower precision of e: its gate, weights (a quantised checkpoint, or the model quantised
 * at load) and engine. */
static kr_status rung_make(kr_models *m, const kr_model_spec *spec, const kr_server_precision *p,
                           kr_served *e, kr_error *err) {
    kr_status st = check_gate(p, err);
    if (st != KR_OK) return st;
    struct kr_served_rung *r = &e->rung[e->n_rungs];
    kr_model_spec src = *spec;
    if (p->model[0]) {
        snprintf(src.model, sizeof src.model, "%s", p->model);
        src.tokenizer[0] = 0;
    }
    char pred[KR_SERVER_PATH_MAX + 16], tok[KR_SERVER_PATH_MAX + 16];
    dirs_of(&src, pred, tok, sizeof pred);
    kr_model_params mp = kr_model_default_params();
    mp.no_mmap = m->cfg.no_mmap;
    mp.allow_nonfinite = m->cfg.allow_nonfinite_weights;
    if (!p->model[0]) mp.quant = p->quant;
    if ((st = kr_model_load(pred, tok, &mp, &r->owned_model, err)) != KR_OK) return st;
    r->model = r->owned_model;
    kr_model_info mi;
    kr_model_get_info(r->model, &mi);
    if (strcmp(mi.quant, p->quant)) {
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s holds %s weights, not %s", p->model,
                          mi.quant, p->quant);
        kr_model_free(r->owned_model);
        r->owned_model = NULL;
        return st;
    }
    if ((st = kr_metrics_create(&r->metrics, err)) == KR_OK) {
        kr_context_params cp = m->cfg.sched;
        cp.n_threads = m->cfg.threads;
        cp.kv_dtype = e->kv_dtype;
        cp.kv_budget_bytes = m->kv_share;
        st = kr_context_create_ex(r->model, &cp, r->metrics, &r->ctx, err);
    }
    if (st != KR_OK) {
        kr_metrics_free(r->metrics);
        kr_model_free(r->owned_model);
        memset(r, 0, sizeof *r);
        return st;
    }
    snprintf(r->quant, sizeof r->quant, "%s", p->quant);
    snprintf(r->precision, sizeof r->precision, "%s%s%s", p->quant,
             mi.quant_method[0] && strcmp(mi.quant_method, "rtn") ? "-" : "",
             mi.quant_method[0] && strcmp(mi.quant_method, "rtn") ? mi.quant_method : "");
    r->desc = e->desc;
    r->desc.info = mi;
    r->desc.quant = r->quant;
    r->desc.precision = r->precision;
    e->n_rungs++;
    return KR_OK;
}

int kr_served_pick(kr_served *e) {
    int r = atomic_load(&e->active);
    if (r < 0 || r >= e->n_rungs) r = 0;
    kr_metric_add(e->rung[r].m_requests, 1);
    return r;
}

void kr_models_set_metrics(kr_models *m, kr_metrics *metrics) { m->metrics = metrics; }

void kr_models_ladder_tick(kr_models *m, double now, const char *floor, double target_queue,
                           void (*log)(void *user, const char *line), void *log_user) {
    const int floor_bits = floor && floor[0] ? kr_precision_bits(floor) : 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_live; i++) {
        kr_served *e = m->live[i];
        if (e->n_rungs < 2) continue;
        int fl = e->n_rungs - 1;
        while (fl > 0 && floor_bits && kr_precision_bits(e->rung[fl].quant) < floor_bits) fl--;
        if (target_queue > 0) e->ladder.target_queue = target_queue;
        const int from = e->ladder.rung;
        int move = kr_ladder_set_floor(&e->ladder, fl, now);
        const char *why = "the profile's precision_floor";
        kr_context_stats st;
        kr_context_get_stats(e->rung[e->ladder.rung].ctx, &st);
        kr_ladder_signals sig = { st.waiting, st.queue_oldest_wait_seconds };
        if (!move) {
            move = kr_ladder_decide(&e->ladder, now, &sig);
            why = move > 0 ? "queue pressure" : "queue relief";
        }
        if (!move) continue;
        atomic_store(&e->active, e->ladder.rung);
        kr_metric_add(move > 0 ? e->m_down : e->m_up, 1);
        kr_metric_set(e->m_rung, e->ladder.rung);
        if (log) {
            char line[320];
            snprintf(line, sizeof line,
                     "ladder: model %s: new requests %s -> %s (%s: oldest waiting %.3f s, %d "
                     "waiting, target %.3f s)",
                     e->name, e->rung[from].precision, e->rung[e->ladder.rung].precision, why,
                     sig.oldest_wait_s, sig.waiting, e->ladder.target_queue);
            log(log_user, line);
        }
    }
    pthread_mutex_unlock(&m->mu);
}

/* Loads the weights and makes a context: everything a new entry needs, outside the lock. */

/* The precision ladder's metrics (one series per served model and direction or precision). */
static const kr_metric_desc k_precision_decisions = {
    "kronos_precision_decisions_total", KR_METRIC_COUNTER,
    "Precision ladder moves of new requests, by model", NULL, 0
};
static const kr_metric_desc k_precision_rung = {
    "kronos_precision_rung", KR_METRIC_GAUGE,
    "The precision new requests get: 0 = the model's own, 1.. its lower precisions", NULL, 0
};
static const kr_metric_desc k_precision_requests = { "kronos_precision_requests_total",
                                                     KR_METRIC_COUNTER,
                                                     "Requests by the precision that served them",
                                                     NULL, 0 };

static kr_status served_make(kr_models *m, const kr_model_spec *spec, kr_served **out,
                             kr_error *err) {
    kr_served *e = calloc(1, sizeof *e);
    if (!e) return kr_error_set(err, KR_ERR_NOMEM, "models: out of memory");
    snprintf(e->name, sizeof e->name, "%s", spec->name);
    char pred[KR_SERVER_PATH_MAX + 16], tok[KR_SERVER_PATH_MAX + 16];
    dirs_of(spec, pred, tok, sizeof pred);
    snprintf(e->model_dir, sizeof e->model_dir, "%s", spec->model);
    snprintf(e->tokenizer_dir, sizeof e->tokenizer_dir, "%s", spec->tokenizer);
    kr_model_params mp = kr_model_default_params();
    mp.no_mmap = m->cfg.no_mmap;
    mp.allow_nonfinite = m->cfg.allow_nonfinite_weights;
    /* Quantised at load (kr_model_params.quant): the new weights are a model of their own. */
    if (spec->quant[0] && strcmp(spec->quant, "f32")) mp.quant = spec->quant;
    kr_status st = kr_model_load(pred, tok, &mp, &e->owned_model, err);
    if (st == KR_OK) st = kr_metrics_create(&e->metrics, err);
    if (st == KR_OK) {
        e->model = e->owned_model;
        snprintf(e->kv_dtype, sizeof e->kv_dtype, "%s",
                 spec->kv_dtype[0] ? spec->kv_dtype : m->cfg.kv_dtype);
        kr_context_params cp = m->cfg.sched;
        cp.n_threads = m->cfg.threads;
        cp.kv_dtype = e->kv_dtype;
        cp.kv_budget_bytes = m->kv_share;
        st = kr_context_create_ex(e->model, &cp, e->metrics, &e->ctx, err);
    }
    if (st != KR_OK) {
        kr_error_prefix(err, "model '%s'", spec->name);
        e->main = 0;
        served_free(e);
        return st;
    }
    kr_model_get_info(e->model, &e->desc.info);
    snprintf(e->quant, sizeof e->quant, "%s", e->desc.info.quant[0] ? e->desc.info.quant : "f32");
    e->desc.name = e->name;
    e->desc.quant = e->quant;
    e->desc.kv_dtype = e->kv_dtype;
    e->refs = 1; /* its name's */
    e->n_rungs = 1;
    snprintf(e->rung[0].precision, sizeof e->rung[0].precision, "%s", e->quant);
    e->rung[0].model = e->model;
    e->rung[0].ctx = e->ctx;
    e->rung[0].desc = e->desc;
    e->rung[0].desc.precision = e->rung[0].precision;
    for (int i = 0; i < spec->n_precisions; i++) {
        if ((st = rung_make(m, spec, &spec->precisions[i], e, err)) != KR_OK) {
            kr_error_prefix(err, "model '%s': precisions[%d]", spec->name, i);
            served_free(e);
            return st;
        }
    }
    kr_ladder_init(&e->ladder, e->n_rungs, m->cfg.sched.target_queue_p95_s,
                   m->cfg.sched.tune_window_s, m->cfg.sched.tune_relax_s);
    if (e->n_rungs > 1 && m->metrics) {
        char lab[160];
        snprintf(lab, sizeof lab, "direction=\"down\",model=\"%s\"", e->name);
        e->m_down = kr_metrics_series(m->metrics, &k_precision_decisions, lab);
        snprintf(lab, sizeof lab, "direction=\"up\",model=\"%s\"", e->name);
        e->m_up = kr_metrics_series(m->metrics, &k_precision_decisions, lab);
        snprintf(lab, sizeof lab, "model=\"%s\"", e->name);
        e->m_rung = kr_metrics_series(m->metrics, &k_precision_rung, lab);
        kr_metric_set(e->m_rung, 0);
        for (int r = 0; r < e->n_rungs; r++) {
            snprintf(lab, sizeof lab, "model=\"%s\",precision=\"%s\"", e->name,
                     e->rung[r].precision);
            e->rung[r].m_requests = kr_metrics_series(m->metrics, &k_precision_requests, lab);
        }
    }
    *out = e;
    return KR_OK;
}

kr_status kr_models_load(kr_models *m, const kr_model_spec *spec, kr_error *err) {
    pthread_mutex_lock(&m->mu);
    int i = find_live(m, spec->name);
    int main_name = i >= 0 && m->live[i]->main;
    int full = i < 0 && m->n_live >= m->max_models;
    pthread_mutex_unlock(&m->mu);
    if (main_name)
        return kr_error_set(err, KR_ERR_UNSUPPORTED,
                            "model '%s' is the server's main model: restart to change it",
                            spec->name);
    if (full)
        return kr_error_set(err, KR_ERR_BUSY,
                            "%d models are served already (max_models): unload one first",
                            m->max_models);
    kr_served *e = NULL;
    kr_status st = served_make(m, spec, &e, err);
    if (st != KR_OK) return st;
    kr_served *dead = NULL;
    pthread_mutex_lock(&m->mu);
    e->generation = ++m->generation;
    i = find_live(m, spec->name);
    if (i >= 0 && m->n_retired >= (int)(sizeof m->retired / sizeof m->retired[0])) {
        st = kr_error_set(err, KR_ERR_BUSY, "model '%s': too many replaced models still draining",
                          spec->name);
    } else if (i >= 0) { /* replace: the old entry drains on its own references */
        kr_served *old = m->live[i];
        old->retired = 1;
        m->retired[m->n_retired++] = old;
        m->live[i] = e;
        dead = unref_locked(m, old);
    } else if (m->n_live < m->max_models) {
        m->live[m->n_live++] = e;
    } else {
        st = kr_error_set(err, KR_ERR_BUSY, "%d models are served already (max_models)",
                          m->max_models);
    }
    if (st == KR_OK) m->loads++;
    pthread_mutex_unlock(&m->mu);
    if (st != KR_OK) {
        served_free(e);
        return st;
    }
    served_free(dead);
    return KR_OK;
}

kr_status kr_models_unload(kr_models *m, const char *name, kr_error *err) {
    pthread_mutex_lock(&m->mu);
    int i = find_live(m, name);
    if (i < 0 || m->live[i]->main ||
        m->n_retired >= (int)(sizeof m->retired / sizeof m->retired[0])) {
        int main_name = i >= 0 && m->live[i]->main;
        pthread_mutex_unlock(&m->mu);
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            main_name ? "model '%s' is the server's main model: it stays"
                            : i < 0   ? "no model '%s' is served"
                                      : "model '%s': too many retired models still draining",
                            name);
    }
    kr_served *old = m->live[i];
    m->live[i] = m->live[--m->n_live];
    old->retired = 1;
    m->retired[m->n_retired++] = old;
    if (!strcmp(m->default_name, name))
        snprintf(m->default_name, sizeof m->default_name, "%s", m->live[0]->name);
    kr_served *dead = unref_locked(m, old);
    m->unloads++;
    pthread_mutex_unlock(&m->mu);
    served_free(dead);
    return KR_OK;
}

static int spec_changed(const kr_served *e, const kr_model_spec *spec, const char *kv_default) {
    const char *kv = spec->kv_dtype[0] ? spec->kv_dtype : kv_default;
    return strcmp(e->model_dir, spec->model) || strcmp(e->tokenizer_dir, spec->tokenizer) ||
           strcmp(e->kv_dtype, kv) || (spec->quant[0] && strcmp(e->quant, spec->quant));
}

kr_status kr_models_apply(kr_models *m, const kr_server_config *cfg, kr_error *err) {
    for (int k = 0; k < cfg->n_models; k++) {
        const kr_model_spec *spec = &cfg->models[k];
        pthread_mutex_lock(&m->mu);
        int i = find_live(m, spec->name);
        int same = i >= 0 && !spec_changed(m->live[i], spec, m->cfg.kv_dtype);
        pthread_mutex_unlock(&m->mu);
        if (same) continue;
        kr_status st = kr_models_load(m, spec, err);
        if (st != KR_OK) return st;
    }
    /* Those no longer listed go (never the main model). */
    for (;;) {
        char gone[64] = "";
        pthread_mutex_lock(&m->mu);
        for (int i = 0; i < m->n_live && !gone[0]; i++) {
            int listed = m->live[i]->main;
            for (int k = 0; k < cfg->n_models && !listed; k++)
                listed = !strcmp(cfg->models[k].name, m->live[i]->name);
            if (!listed) snprintf(gone, sizeof gone, "%s", m->live[i]->name);
        }
        pthread_mutex_unlock(&m->mu);
        if (!gone[0]) break;
        kr_status st = kr_models_unload(m, gone, err);
        if (st != KR_OK) return st;
    }
    pthread_mutex_lock(&m->mu);
    const char *want = cfg->default_model[0] ? cfg->default_model : m->live[0]->name;
    kr_status st = KR_OK;
    if (find_live(m, want) >= 0)
        snprintf(m->default_name, sizeof m->default_name, "%s", want);
    else
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "default_model: no model '%s' is served", want);
    pthread_mutex_unlock(&m->mu);
    return st;
}

void kr_models_each(kr_models *m, void (*fn)(void *user, kr_served *e, int is_default),
                    void *user) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_live; i++)
        fn(user, m->live[i], !strcmp(m->live[i]->name, m->default_name));
    pthread_mutex_unlock(&m->mu);
}

int kr_models_retired(kr_models *m) {
    pthread_mutex_lock(&m->mu);
    int n = m->n_retired;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void kr_models_counts(kr_models *m, int *served, int *loads, int *unloads) {
    pthread_mutex_lock(&m->mu);
    *served = m->n_live;
    *loads = m->loads;
    *unloads = m->unloads;
    pthread_mutex_unlock(&m->mu);
}
