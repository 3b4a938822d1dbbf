/*
 * eval/bench — times forecasts and compares, in one run, the KV-cached engine with the naive
 * full-recompute path (the reference's algorithm on our kernels) and with the official
 * predictor's figures measured on this machine class (shared anchors).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "engine/context.h"
#include "engine/profile.h"
#include "kernels/kernels.h"
#include "kronos/eval.h"

#define MAX_ROWS 64
#define MAX_REPEAT 1000

typedef struct bench_row {
    int paths;
    const char *mode;
    double seconds, tokens_per_s, gflops, rss_mb, ref_s, kv_mb;
    double floor_s; /* roofline floor (floor_seconds), 0 when not defined for the row */
    int64_t prefill_tokens, decode_tokens, recomputes, reused;
    double sampled; /* tokens sampled: series x paths x pred_len */
    kr_step_profile profile; /* of the last repeat */
} bench_row;

struct kr_bench_report {
    char label[512];
    char kv_dtype[16];
    kr_model_info info;
    int lookback, pred_len, series, threads;
    kr_window_mode window;
    double generated_s;
    const char *isa;
    double peak_gflops; /* f32 FMA peak on `threads` threads: the higher of the readings
                         * before and after the timed rows */
    double bw_gbs; /* read bandwidth from memory on `threads` threads, after the timed rows */
    int n_threads, profile;
    bench_row rows[MAX_ROWS];
    int n_rows;
};

kr_bench_params kr_bench_default_params(void) {
    static const int default_paths[] = { 1, 8 };
    kr_bench_params p = { 0 };
    p.paths = default_paths;
    p.n_paths = 2;
    p.pred_len = 120;
    p.repeat = 3;
    p.window = KR_WINDOW_EXACT;
    p.lookback = 400;
    return p;
}

/* The official KronosPredictor on this machine class (shared/anchors/reference_bench.md,
 * OpenBLAS, 2 threads, lookback 400, pred_len 120): seconds by (shape, paths). */
static double reference_seconds(const char *shape, int lookback, int pred_len, int paths,
                                int series) {
    if (!shape || lookback != 400 || pred_len != 120 || series != 1) return 0;
    if (!strcmp(shape, "small") && paths == 1) return 25.3;
    if (!strcmp(shape, "small") && paths == 8) return 236.9; /* row-loop SDPA shim */
    if (!strcmp(shape, "mini") && paths == 1) return 5.4;
    if (!strcmp(shape, "base") && paths == 1) return 202.3;
    return 0;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The predictor's weight FLOPs (2 per multiply-add), attention left out. */
typedef struct work_model {
    double row; /* every row run: fusion, the blocks' Linears, the dep layer's K/V */
    double token; /* every sampled token: the s1 and s2 heads, the dep layer's Q and output */
    double reused; /* saved by a row whose first stage was kept (fusion, first Q/K/V) */
} work_model;

static work_model work_model_of(const kr_model_info *mi) {
    double d = mi->d_model, ff = mi->ff_dim, v = (double)(1 << mi->s1_bits) + (1 << mi->s2_bits);
    work_model w;
    w.row = 2.0 * (2 * d * d + mi->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d);
    w.token = 2.0 * (d * v + 2 * d * d);
    w.reused = mi->n_layers > 0 ? 2.0 * (2 * d * d + 3 * d * d) : 0;
    return w;
}

/* The weight FLOPs a row's forecasts did. */
static double row_work(const bench_row *rw, const work_model *w) {
    return (double)(rw->prefill_tokens + rw->decode_tokens) * w->row + rw->sampled * w->token -
           (double)rw->reused * w->reused;
}

/* The fastest a KV-cache row with f32 weights and one series could run on this machine: the
 * prefill and window re-run rows' weight FLOPs at the FMA peak (less what kept first stages
 * save), and each decode step no faster than the longer of streaming every weight once at the
 * read bandwidth (they do not fit any cache) and its weight FLOPs at the peak. Attention, the
 * tokenizer and the rest are left out, so no run can beat it; 0 where the model does not hold
 * (quantised weights run at other peaks, several series mix re-runs and decode in one
 * step). */
static double floor_seconds(const kr_bench_report *r, const bench_row *rw, int n_series,
                            const work_model *w) {
    if (strcmp(rw->mode, "kv-cache") || n_series != 1 || strcmp(r->info.quant, "f32") ||
        !(r->peak_gflops > 0) || !(r->bw_gbs > 0) || rw->paths < 1)
        return 0;
    double peak = r->peak_gflops * 1e9, bw = r->bw_gbs * 1e9;
    double steps = (double)rw->decode_tokens / rw->paths;
    double step_compute = rw->paths * (w->row + w->token) / peak;
    double step_stream = (double)r->info.weight_bytes / bw;
    return ((double)rw->prefill_tokens * w->row - (double)rw->reused * w->reused) / peak +
           steps * (step_compute > step_stream ? step_compute : step_stream);
}

static kr_status run_once(kr_context *ctx, const kr_series *s, int n, const kr_forecast_params *p,
                          int naive, double *secs, kr_forecast_stats *stats, kr_error *err) {
    kr_forecast **res = calloc((size_t)n, sizeof *res);
    if (!res) return kr_error_set(err, KR_ERR_NOMEM, "bench: out of memory");
    kr_seq_options opt = { .naive = naive };
    kr_request_params rp = kr_request_default_params();
    rp.seq_options = &opt;
    double t0 = kr_now_seconds();
    kr_status st = kr_forecast_run_batch(ctx, s, n, p, &rp, res, err);
    *secs = kr_now_seconds() - t0;
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < n && st == KR_OK; i++) {
        kr_forecast_stats one;
        kr_forecast_get_stats(res[i], &one);
        stats->prefill_tokens += one.prefill_tokens;
        stats->decode_tokens += one.decode_tokens;
        stats->window_recomputes += one.window_recomputes;
        stats->reused_tokens += one.reused_tokens;
        stats->kv_bytes += one.kv_bytes;
        kr_step_profile_add(&stats->profile, &one.profile);
    }
    for (int i = 0; i < n; i++) kr_forecast_free(res[i]);
    free(res);
    return st;
}

/* Times one (path count, mode) pair: `reps` runs, the median kept. */
static kr_status time_row(kr_context *ctx, const kr_series *series, int n_series,
                          const kr_bench_params *bp, const kr_forecast_params *p, int naive,
                          const work_model *w, bench_row *rw, kr_error *err) {
    int reps = naive ? 1 : bp->repeat;
    double times[MAX_REPEAT];
    kr_forecast_stats stats = { 0 };
    for (int r = 0; r < reps; r++) {
        char what[160];
        snprintf(what, sizeof what, "%s, %d paths: run %d of %d", naive ? "naive" : "kv-cache",
                 p->paths, r + 1, reps);
        if (bp->progress) bp->progress(what, 0, bp->user);
        kr_status st = run_once(ctx, series, n_series, p, naive, &times[r], &stats, err);
        if (bp->progress) bp->progress(what, 1, bp->user);
        if (st != KR_OK) return st;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    rw->paths = p->paths;
    rw->mode = naive ? "naive" : "kv-cache";
    rw->seconds = times[reps / 2];
    rw->tokens_per_s = (double)n_series * p->paths * p->pred_len / rw->seconds;
    rw->rss_mb = peak_rss_mb();
    rw->ref_s = reference_seconds(bp->shape, bp->lookback, p->pred_len, p->paths, n_series);
    rw->prefill_tokens = stats.prefill_tokens;
    rw->decode_tokens = stats.decode_tokens;
    rw->recomputes = stats.window_recomputes;
    rw->reused = stats.reused_tokens;
    rw->sampled = (double)n_series * p->paths * p->pred_len;
    rw->gflops = row_work(rw, w) / rw->seconds / 1e9;
    rw->kv_mb = stats.kv_bytes / 1048576.0;
    rw->profile = stats.profile;
    return KR_OK;
}

kr_status kr_bench_run(kr_context *ctx, const kr_series *series, int n_series,
                       const kr_bench_params *bp, kr_bench_report **out, kr_error *err) {
    *out = NULL;
    if (!ctx || !series || n_series < 1 || !bp || !bp->paths || bp->n_paths < 1 ||
        bp->pred_len < 1 || bp->repeat < 1 || bp->repeat > MAX_REPEAT)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "bench: needs series, 1.. path counts, pred_len >= 1 and repeat in "
                            "1..%d",
                            MAX_REPEAT);
    if (bp->n_paths * (bp->naive ? 2 : 1) > MAX_ROWS)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "bench: at most %d path counts", MAX_ROWS / 2);
    kr_bench_report *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "bench: out of memory");
    kr_model_get_info(kr_context_model(ctx), &r->info);
    snprintf(r->label, sizeof r->label, "%s", bp->label ? bp->label : "model");
    kr_context_stats cs;
    kr_context_get_stats(ctx, &cs);
    snprintf(r->kv_dtype, sizeof r->kv_dtype, "%s", cs.kv_dtype);
    r->lookback = bp->lookback;
    r->pred_len = bp->pred_len;
    r->series = n_series;
    r->threads = bp->threads;
    r->window = bp->window;
    r->generated_s = bp->weights_generated_seconds;
    r->isa = kr_isa_name(kr_isa_active());
    r->n_threads = cs.n_threads;
    r->profile = bp->profile;
    /* Every report names the peak its figures are to be read against. */
    r->peak_gflops = kr_machine_fma_peak(cs.n_threads);
    work_model w = work_model_of(&r->info);
    for (int k = 0; k < bp->n_paths; k++) {
        kr_forecast_params p = kr_forecast_default_params();
        p.lookback = 0; /* each series uses all its rows (the caller cut them) */
        p.pred_len = bp->pred_len;
        p.paths = bp->paths[k];
        p.window = bp->window;
        p.keep_paths = 1;
        for (int naive = 0; naive <= (bp->naive ? 1 : 0); naive++) {
            kr_status st =
                time_row(ctx, series, n_series, bp, &p, naive, &w, &r->rows[r->n_rows], err);
            if (st != KR_OK) {
                free(r);
                return st;
            }
            r->n_rows++;
        }
    }
    /* The bandwidth after the timed rows, so that its 256 MiB buffer is not in their peak RSS;
     * each peak is the higher of two readings: on a shared host a probe that lost a core, or
     * shared the memory bus with a neighbour, reads low (half the FMA peak when the other
     * vCPU was taken for a whole burst; 21-35 GB/s seen from one run to the next). */
    r->bw_gbs = kr_machine_read_bandwidth(cs.n_threads);
    double again = kr_machine_fma_peak(cs.n_threads);
    if (again > r->peak_gflops) r->peak_gflops = again;
    again = kr_machine_read_bandwidth(cs.n_threads);
    if (again > r->bw_gbs) r->bw_gbs = again;
    for (int i = 0; i < r->n_rows; i++)
        r->rows[i].floor_s = floor_seconds(r, &r->rows[i], n_series, &w);
    *out = r;
    return KR_OK;
}

static void write_json(const kr_bench_report *r, FILE *f) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "shape", r->label);
    cJSON_AddStringToObject(root, "isa", r->isa);
    cJSON_AddNumberToObject(root, "threads", r->n_threads);
    cJSON_AddNumberToObject(root, "fma_peak_gflops", r->peak_gflops);
    cJSON_AddNumberToObject(root, "read_bandwidth_gbs", r->bw_gbs);
    cJSON_AddNumberToObject(root, "lookback", r->lookback);
    cJSON_AddNumberToObject(root, "pred_len", r->pred_len);
    cJSON_AddNumberToObject(root, "series", r->series);
    cJSON_AddNumberToObject(root, "model_load_seconds", r->info.load_seconds);
    cJSON_AddNumberToObject(root, "weight_bytes", (double)r->info.weight_bytes);
    cJSON_AddStringToObject(root, "quant", r->info.quant);
    cJSON_AddStringToObject(root, "kv_dtype", r->kv_dtype);
    cJSON_AddNumberToObject(root, "quantize_seconds", r->info.quant_seconds);
    cJSON *arr = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < r->n_rows; i++) {
        const bench_row *rw = &r->rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "paths", rw->paths);
        cJSON_AddStringToObject(o, "mode", rw->mode);
        cJSON_AddNumberToObject(o, "seconds", rw->seconds);
        cJSON_AddNumberToObject(o, "tokens_per_second", rw->tokens_per_s);
        cJSON_AddNumberToObject(o, "gflops", rw->gflops);
        cJSON_AddNumberToObject(o, "peak_rss_mb", rw->rss_mb);
        cJSON_AddNumberToObject(o, "kv_cache_mb", rw->kv_mb);
        cJSON_AddNumberToObject(o, "prefill_tokens", (double)rw->prefill_tokens);
        cJSON_AddNumberToObject(o, "decode_tokens", (double)rw->decode_tokens);
        cJSON_AddNumberToObject(o, "window_recomputes", (double)rw->recomputes);
        cJSON_AddNumberToObject(o, "reused_tokens", (double)rw->reused);
        if (rw->ref_s > 0) cJSON_AddNumberToObject(o, "reference_seconds", rw->ref_s);
        if (rw->floor_s > 0) cJSON_AddNumberToObject(o, "floor_seconds", rw->floor_s);
        if (r->profile) {
            kr_sb sb = { 0 };
            kr_step_profile_json(&sb, &rw->profile);
            char *text = NULL;
            if (kr_sb_finish(&sb, &text, NULL) == KR_OK)
                cJSON_AddItemToObject(o, "profile", cJSON_CreateRaw(text));
            free(text);
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(root);
    fprintf(f, "%s\n", text);
    free(text);
    cJSON_Delete(root);
}

static void write_markdown(const kr_bench_report *r, FILE *f) {
    const kr_model_info *mi = &r->info;
    fprintf(f,
            "kronos bench: shape %s (d_model %d, %d layers, %zu params), lookback %d, "
            "pred_len %d, series %d, %s, isa %s, %d threads (FMA peak %.1f GFLOP/s, read "
            "bandwidth %.1f GB/s, measured now), model load %.1f ms%s\n\n",
            r->label, mi->d_model, mi->n_layers, mi->n_params, r->lookback, r->pred_len, r->series,
            r->window == KR_WINDOW_EXACT ? "exact window" : "rolling window", r->isa, r->n_threads,
            r->peak_gflops, r->bw_gbs, mi->load_seconds * 1e3,
            r->generated_s > 0 ? " (weights generated now)" : "");
    fprintf(f, "weights %s, %.1f MB (quantised at load in %.2f s), KV cache %s\n\n", mi->quant,
            mi->weight_bytes / 1048576.0, mi->quant_seconds, r->kv_dtype);
    fprintf(f, "| paths | path | wall s (median) | tokens/s | ~GFLOP/s | of FMA peak | floor s "
               "(share) | peak RSS MB | KV MB | vs naive | official predictor s | speed-up vs "
               "official |\n");
    fprintf(f, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < r->n_rows; i++) {
        const bench_row *rw = &r->rows[i];
        double naive_s = 0;
        for (int j = 0; j < r->n_rows; j++)
            if (r->rows[j].paths == rw->paths && !strcmp(r->rows[j].mode, "naive"))
                naive_s = r->rows[j].seconds;
        char vs[32] = "", ref[32] = "", up[32] = "", fl[48] = "–";
        if (rw->floor_s > 0)
            snprintf(fl, sizeof fl, "%.2f (%.0f %%)", rw->floor_s,
                     100.0 * rw->floor_s / rw->seconds);
        if (naive_s > 0) snprintf(vs, sizeof vs, "%.1fx", naive_s / rw->seconds);
        if (rw->ref_s > 0) {
            snprintf(ref, sizeof ref, "%.1f", rw->ref_s);
            snprintf(up, sizeof up, "%.0fx", rw->ref_s / rw->seconds);
        }
        fprintf(f, "| %d | %s | %.3f | %.0f | %.1f | %.0f %% | %s | %.0f | %.0f | %s | %s | %s |\n",
                rw->paths, rw->mode, rw->seconds, rw->tokens_per_s, rw->gflops,
                r->peak_gflops > 0 ? 100.0 * rw->gflops / r->peak_gflops : 0.0, fl, rw->rss_mb,
                rw->kv_mb, vs, ref, up);
    }
    for (int i = 0; r->profile && i < r->n_rows; i++) {
        kr_sb sb = { 0 };
        kr_step_profile_markdown(&sb, &r->rows[i].profile, r->peak_gflops);
        char *text = NULL;
        if (kr_sb_finish(&sb, &text, NULL) == KR_OK)
            fprintf(f, "\nStep profile, %d paths, %s (last repeat):\n\n%s", r->rows[i].paths,
                    r->rows[i].mode, text);
        free(text);
    }
}

kr_status kr_bench_write(const kr_bench_report *r, FILE *f, int json, kr_error *err) {
    if (!r || !f) return kr_error_set(err, KR_ERR_INVALID_ARG, "bench: no report or file");
    if (json)
        write_json(r, f);
    else
        write_markdown(r, f);
    if (ferror(f)) return kr_error_set(err, KR_ERR_IO, "bench: writing the report failed");
    return KR_OK;
}

void kr_bench_report_free(kr_bench_report *r) { free(r); }
