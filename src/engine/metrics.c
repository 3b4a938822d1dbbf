/* engine/metrics — see metrics.h. One mutex guards the registry; updates are short. */
#include "engine/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

enum { M_COUNTER, M_GAUGE, M_HISTOGRAM };

struct kr_metric {
    kr_metrics *owner;
    int kind;
    char *name, *labels, *help;
    double value; /* counter / gauge */
    double *bounds; /* histogram upper bounds */
    int n_bounds;
    uint64_t *buckets; /* [n_bounds + 1] non-cumulative counts, last = +Inf */
    uint64_t *window; /* [n_bounds + 1] since the last window reset */
    double sum;
    uint64_t count;
};

struct kr_metrics {
    pthread_mutex_t lock;
    kr_metric **items;
    int n, cap;
};

const double kr_latency_buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                      0.5,   1.0,    2.5,   5.0,  10.0,  30.0, 60.0 };
const int kr_latency_buckets_n = (int)(sizeof kr_latency_buckets / sizeof kr_latency_buckets[0]);

kr_status kr_metrics_create(kr_metrics **out, kr_error *err) {
    kr_metrics *m = calloc(1, sizeof *m);
    if (!m) return kr_error_set(err, KR_ERR_NOMEM, "metrics: out of memory");
    pthread_mutex_init(&m->lock, NULL);
    *out = m;
    return KR_OK;
}

static void metric_free(kr_metric *x) {
    free(x->name);
    free(x->labels);
    free(x->help);
    free(x->bounds);
    free(x->buckets);
    free(x->window);
    free(x);
}

void kr_metrics_free(kr_metrics *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) metric_free(m->items[i]);
    free(m->items);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static kr_metric *reg(kr_metrics *m, int kind, const char *name, const char *labels,
                      const char *help, const double *bounds, int n_bounds) {
    if (!m || !name) return NULL;
    if (!labels) labels = "";
    pthread_mutex_lock(&m->lock);
    kr_metric *found = NULL;
    for (int i = 0; i < m->n && !found; i++)
        if (!strcmp(m->items[i]->name, name) && !strcmp(m->items[i]->labels, labels))
            found = m->items[i];
    if (!found && m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 32;
        kr_metric **items = realloc(m->items, (size_t)cap * sizeof *items);
        if (items) {
            m->items = items;
            m->cap = cap;
        }
    }
    if (!found && m->n < m->cap) {
        kr_metric *x = calloc(1, sizeof *x);
        if (x) {
            x->owner = m;
            x->kind = kind;
            x->name = strdup(name);
            x->labels = strdup(labels);
            x->help = strdup(help ? help : "");
            if (kind == M_HISTOGRAM) {
                x->n_bounds = n_bounds;
                x->bounds = malloc((size_t)(n_bounds > 0 ? n_bounds : 1) * sizeof(double));
                x->buckets = calloc((size_t)n_bounds + 1, sizeof(uint64_t));
                x->window = calloc((size_t)n_bounds + 1, sizeof(uint64_t));
                if (x->bounds && n_bounds > 0)
                    memcpy(x->bounds, bounds, (size_t)n_bounds * sizeof(double));
            }
            if (!x->name || !x->labels || !x->help ||
                (kind == M_HISTOGRAM && (!x->bounds || !x->buckets || !x->window))) {
                metric_free(x);
            } else {
                m->items[m->n++] = x;
                found = x;
            }
        }
    }
    pthread_mutex_unlock(&m->lock);
    return found;
}

kr_metric *kr_metrics_series(kr_metrics *m, const kr_metric_desc *d, const char *labels) {
    if (!d) return NULL;
    if (!labels) labels = "";
    switch (d->type) {
    case KR_METRIC_COUNTER: return reg(m, M_COUNTER, d->name, labels, d->help, NULL, 0);
    case KR_METRIC_GAUGE: return reg(m, M_GAUGE, d->name, labels, d->help, NULL, 0);
    case KR_METRIC_HISTOGRAM:
        return reg(m, M_HISTOGRAM, d->name, labels, d->help,
                   d->bounds ? d->bounds : kr_latency_buckets,
                   d->bounds ? d->n_bounds : kr_latency_buckets_n);
    }
    return NULL;
}

const kr_metric_desc kr_metric_prefix_queried_tokens = {
    "kronos_prefix_cache_queried_tokens_total", KR_METRIC_COUNTER,
    "Context tokens looked up in the prefix cache", NULL, 0
};
const kr_metric_desc kr_metric_prefix_hit_tokens = { "kronos_prefix_cache_hit_tokens_total",
                                                     KR_METRIC_COUNTER,
                                                     "Context tokens served from the prefix cache",
                                                     NULL, 0 };
const kr_metric_desc kr_metric_tuner_decisions = {
    "kronos_tuner_decisions_total", KR_METRIC_COUNTER,
    "Limit changes made by the tuner, by rule and direction", NULL, 0
};

void kr_metric_add(kr_metric *c, double v) {
    if (!c) return;
    pthread_mutex_lock(&c->owner->lock);
    c->value += v;
    pthread_mutex_unlock(&c->owner->lock);
}

void kr_metric_set(kr_metric *g, double v) {
    if (!g) return;
    pthread_mutex_lock(&g->owner->lock);
    g->value = v;
    pthread_mutex_unlock(&g->owner->lock);
}

void kr_metric_observe(kr_metric *h, double v) {
    if (!h || h->kind != M_HISTOGRAM || isnan(v)) return;
    pthread_mutex_lock(&h->owner->lock);
    int b = 0;
    while (b < h->n_bounds && v > h->bounds[b]) b++;
    h->buckets[b]++;
    h->window[b]++;
    h->sum += v;
    h->count++;
    pthread_mutex_unlock(&h->owner->lock);
}

double kr_metric_value(const kr_metric *c) {
    if (!c) return 0;
    pthread_mutex_lock(&c->owner->lock);
    double v = c->kind == M_HISTOGRAM ? (double)c->count : c->value;
    pthread_mutex_unlock(&c->owner->lock);
    return v;
}

double kr_metric_window_quantile(kr_metric *h, double q) {
    if (!h || h->kind != M_HISTOGRAM) return NAN;
    pthread_mutex_lock(&h->owner->lock);
    uint64_t total = 0;
    for (int b = 0; b <= h->n_bounds; b++) total += h->window[b];
    double r = NAN;
    if (total > 0) {
        double rank = q * (double)total, seen = 0;
        for (int b = 0; b <= h->n_bounds; b++) {
            if (seen + (double)h->window[b] >= rank && h->window[b] > 0) {
                double lo = b == 0 ? 0.0 : h->bounds[b - 1];
                double hi = b < h->n_bounds ? h->bounds[b] : lo * 2; /* +Inf bucket: a guess */
                r = lo + (hi - lo) * ((rank - seen) / (double)h->window[b]);
                break;
            }
            seen += (double)h->window[b];
        }
    }
    pthread_mutex_unlock(&h->owner->lock);
    return r;
}

void kr_metric_window_reset(kr_metric *h) {
    if (!h || h->kind != M_HISTOGRAM) return;
    pthread_mutex_lock(&h->owner->lock);
    memset(h->window, 0, (size_t)(h->n_bounds + 1) * sizeof(uint64_t));
    pthread_mutex_unlock(&h->owner->lock);
}

typedef struct text {
    char *buf;
    size_t len, cap;
    int oom;
} text;

static void emit(text *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = 2 * t->cap + (size_t)n + 1;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->oom = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

static void fmt_value(char *out, size_t n, double v) {
    if (isinf(v))
        snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(out, n, "%.0f", v);
    else
        snprintf(out, n, "%.9g", v);
}

static void render_series(text *t, const kr_metric *x) {
    char v[64];
    const char *sep = x->labels[0] ? "," : "";
    if (x->kind != M_HISTOGRAM) {
        fmt_value(v, sizeof v, x->value);
        if (x->labels[0])
            emit(t, "%s{%s} %s\n", x->name, x->labels, v);
        else
            emit(t, "%s %s\n", x->name, v);
        return;
    }
    uint64_t cum = 0;
    for (int b = 0; b <= x->n_bounds; b++) {
        cum += x->buckets[b];
        char le[64];
        if (b < x->n_bounds)
            fmt_value(le, sizeof le, x->bounds[b]);
        else
            snprintf(le, sizeof le, "+Inf");
        emit(t, "%s_bucket{%s%sle=\"%s\"} %llu\n", x->name, x->labels, sep, le,
             (unsigned long long)cum);
    }
    fmt_value(v, sizeof v, x->sum);
    if (x->labels[0]) {
        emit(t, "%s_sum{%s} %s\n", x->name, x->labels, v);
        emit(t, "%s_count{%s} %llu\n", x->name, x->labels, (unsigned long long)x->count);
    } else {
        emit(t, "%s_sum %s\n", x->name, v);
        emit(t, "%s_count %llu\n", x->name, (unsigned long long)x->count);
    }
}

kr_status kr_metrics_render(kr_metrics *m, char **out, size_t *len, kr_error *err) {
    text t = { malloc(4096), 0, 4096, 0 };
    if (!t.buf) return kr_error_set(err, KR_ERR_NOMEM, "metrics: out of memory");
    t.buf[0] = 0;
    pthread_mutex_lock(&m->lock);
    static const char *kinds[] = { "counter", "gauge", "histogram" };
    /* A family's series must be contiguous: render each name once, with all its series. */
    for (int i = 0; i < m->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(m->items[j]->name, m->items[i]->name);
        if (seen) continue;
        emit(&t, "# HELP %s %s\n# TYPE %s %s\n", m->items[i]->name, m->items[i]->help,
             m->items[i]->name, kinds[m->items[i]->kind]);
        for (int j = i; j < m->n; j++)
            if (!strcmp(m->items[j]->name, m->items[i]->name)) render_series(&t, m->items[j]);
    }
    pthread_mutex_unlock(&m->lock);
    if (t.oom) {
        free(t.buf);
        return kr_error_set(err, KR_ERR_NOMEM, "metrics: out of memory rendering");
    }
    *out = t.buf;
    if (len) *len = t.len;
    return KR_OK;
}
