/*
 * engine/forecast_internal — the kr_forecast result layout and the forecast job (validated,
 * normalised inputs and the result they fill) that the context runs.
 */
#ifndef KR_ENGINE_FORECAST_INTERNAL_H
#define KR_ENGINE_FORECAST_INTERNAL_H

#include "engine/generate.h"
#include "kronos.h"

struct kr_forecast {
    int pred_len, paths, lookback;
    int norm_rows; /* leading history rows the statistics came from (kr_forecast_norm_rows) */
    int64_t *timestamps; /* [pred_len] */
    double *mean; /* [pred_len][6] */
    double *path_values; /* [paths][pred_len][6] or NULL */
    int32_t *gen_s1, *gen_s2; /* [paths][pred_len] */
    int32_t *hist_s1, *hist_s2; /* [lookback] */
    float *pred_norm; /* [paths][pred_len][6] */
    float x_mean[6], x_std[6];
    kr_forecast_stats stats;
};

/* Per-series inputs in the reference's float32 form. */
typedef struct kr_prepared {
    int L;
    int norm_rows; /* of L, the leading rows mean and std were taken over */
    float *x; /* [L][6] raw */
    float *x_norm; /* [L][6] */
    float *stamps; /* [L + pred_len][5] */
    int64_t *future; /* [pred_len] */
    float mean[6], std[6];
    int prenormalized; /* x is the caller's normalised input: no statistics, no denormalising */
} kr_prepared;

/* One series' forecast from request to result: validated and normalised inputs, the
 * generator's input/output views and the result they fill. */
typedef struct kr_forecast_job {
    kr_forecast_params params; /* validated copy (future timestamps come with the series) */
    kr_prepared pr;
    kr_seq_input in;
    kr_seq_output out;
    kr_forecast *result; /* owned until taken (set to NULL by the taker) */
} kr_forecast_job;

kr_status kr_forecast_check_params(const kr_forecast_params *p, kr_error *err);
/* Validates and prepares series `index` of n_series (errors name the series when n > 1):
 * kr_forecast_job_prepare then kr_forecast_job_alloc_result. */
kr_status kr_forecast_job_init(kr_forecast_job *j, const kr_series *series, int index, int n_series,
                               const kr_forecast_params *params, kr_error *err);
/* The two halves, for a caller that checks the prepared job (j->in.hist_len, j->params) before the
 * result memory (paths x pred_len rows) is allocated. On an error of either, j holds nothing
 * to release. */
kr_status kr_forecast_job_prepare(kr_forecast_job *j, const kr_series *series, int index,
                                  int n_series, const kr_forecast_params *params, kr_error *err);
/* The same with the context's anchors for anchored normalisation (NULL: every window is a
 * first sight, i.e. exact statistics). */
struct kr_norm_anchors;
kr_status kr_forecast_job_prepare_with(kr_forecast_job *j, const kr_series *series, int index,
                                       int n_series, const kr_forecast_params *params,
                                       struct kr_norm_anchors *anchors, kr_error *err);
kr_status kr_forecast_job_alloc_result(kr_forecast_job *j, kr_error *err);
/* After generation: mean, paths, stats into j->result. */
kr_status kr_forecast_job_finish(kr_forecast_job *j, double seconds_total, kr_error *err);
void kr_forecast_job_release(kr_forecast_job *j);

#endif
