/*
 * speculative — what exact self-speculative decoding would buy (not part of ctest; results in
 * bench/results/speed-2026-12-03-b.md). A measurement harness, not the engine: one path of
 * one series, a window that never slides (lookback + pred_len <= max_context).
 *
 * A decode step streams every predictor weight for one row, so on a CPU its time is set by
 * memory bandwidth, not FLOPs. Here a quantised copy of the model drafts K tokens (its own KV
 * cache, the same counter-based draws); one f32 pass over K + 1 rows scores them; the draws
 * accept drafts up to the first one f32 would not have drawn and add f32's own draw there.
 * Every token and every s1 logit must equal plain decoding's bit for bit (the kernels are
 * row-deterministic; attention over a chunk equals attention row by row), and plain decoding
 * must equal the engine's forecast (kr_forecast_run, same seed): both are checked on every
 * window, and the tool fails when either differs.
 *
 * Per K it reports the tokens one f32 pass yields along the real generated path, the draft
 * passes per token, and the wall time of plain and speculative decoding (prefills excluded,
 * and with them), medians over repeats, the two interleaved.
 *
 *   speculative [--model DIR | --shape S] [--draft bf16|int8|fp8|q4] [--data CSV]
 *               [--windows N] [--lookback N] [--pred-len N] [--k LIST] [--repeat N]
 *               [--seed S] [--threads N]
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/timeutil.h"
#include "engine/context.h"
#include "engine/forecast_internal.h"
#include "kernels/kernels.h"
#include "bench_model.h"
#include "kronos.h"
#include "series/candles.h"
#include "model/model.h"
#include "model/predictor.h"
#include "model/sampling.h"
#include "model/tokenizer.h"

#define MAX_K 8

static void die(const char *what, const kr_error *err) {
    fprintf(stderr, "speculative: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

/* One window's run of one decoder (plain: k = 0). */
typedef struct run_out {
    int32_t *s1, *s2; /* [pred_len] generated tokens */
    float *logits; /* [pred_len][V1] the s1 logits each token was drawn from */
    int f32_passes, draft_passes; /* decode passes after the prefills */
    double seconds, seconds_decode, seconds_draft; /* seconds_draft: within decode */
} run_out;

typedef struct task {
    const kr_model *draft;
    const kr_forecast_job *job;
    int L, P, k; /* k = 0: plain decoding */
    int draft_alone; /* plain decoding with the draft's weights (its cost, not compared) */
    kr_sampler_params sp;
    uint64_t seed;
    run_out *out;
} task;

/* Positions [from, from + n) of the token arrays through pw, on top of kv rows [0, from). */
static kr_status forward_rows(const kr_engine *eng, const kr_predictor_weights *pw, kr_kv_store *kv,
                              int from, int n, const int32_t *s1, const int32_t *s2,
                              const float *stamps, float *ctx, kr_error *err) {
    kr_chunk ch = { .n = n, .pos0 = from, .out = kv, .out_start = from };
    if (from > 0) ch.past[ch.n_past++] = (kr_kv_ref){ kv, 0, from };
    return kr_predictor_forward(pw, &eng->ex, &ch, 1, s1 + from, s2 + from,
                                stamps + (size_t)from * 5, NULL, ctx, err);
}

typedef struct sampler {
    kr_sampler_scratch s1, s2;
    float *logits2;
} sampler;

/* Generation step `step`'s draw from s1 logits and the context row at the window's end, the
 * s2 query seeing kv rows [0, visible): what sample_paths does for path 0. */
static kr_status draw(const kr_engine *eng, const kr_predictor_weights *pw, const task *t,
                      sampler *sm, const float *logits, const float *ctx_row, kr_kv_store *kv,
                      int visible, int step, int32_t *o1, int32_t *o2, kr_error *err) {
    double u1 = kr_rng_uniform(t->seed, 0, 2ull * (uint64_t)step);
    double u2 = kr_rng_uniform(t->seed, 0, 2ull * (uint64_t)step + 1);
    int32_t s1 = kr_sampler_draw(logits, &t->sp, u1, &sm->s1);
    kr_kv_view v = { .n = 1 };
    v.ref[0] = (kr_kv_ref){ kv, 0, visible };
    kr_status st = kr_predictor_s2_logits(pw, &eng->ex, 1, &s1, ctx_row, pw->cfg.d_model, &v,
                                          sm->logits2, err);
    if (st != KR_OK) return st;
    *o1 = s1;
    *o2 = kr_sampler_draw(sm->logits2, &t->sp, u2, &sm->s2);
    return KR_OK;
}

static kr_status run_task(void *user, const kr_engine *eng, kr_error *err) {
    task *t = user;
    const kr_predictor_weights *pw = t->draft_alone ? t->draft->pred : eng->model->pred,
                               *dw = t->draft && !t->draft_alone ? t->draft->pred : NULL;
    int L = t->L, P = t->P, T = L + P, d = pw->cfg.d_model, V1 = 1 << pw->cfg.s1_bits,
        V2 = 1 << pw->cfg.s2_bits, rows = t->k + 1 > L ? t->k + 1 : L;
    run_out *o = t->out;
    const float *stamps = t->job->pr.stamps;
    kr_arena *arena = NULL;
    kr_kv_store kv = { 0 }, dkv = { 0 };
    int32_t *tok1 = malloc((size_t)T * 4), *tok2 = malloc((size_t)T * 4);
    float *ctx = malloc((size_t)rows * (size_t)d * 4), *lg = malloc((size_t)rows * (size_t)V1 * 4);
    sampler sm;
    kr_status st = tok1 && tok2 && ctx && lg ? kr_arena_create(0, &arena, err)
                                             : kr_error_set(err, KR_ERR_NOMEM, "out of memory");
    if (st == KR_OK) st = kr_sampler_scratch_init(&sm.s1, V1, arena, err);
    if (st == KR_OK) st = kr_sampler_scratch_init(&sm.s2, V2, arena, err);
    if (st == KR_OK && !(sm.logits2 = KR_ARENA_NEW(arena, float, V2)))
        st = kr_error_set(err, KR_ERR_NOMEM, "out of memory");
    if (st == KR_OK)
        st = kr_tokenizer_encode(eng->model->tok, &eng->ex, t->job->pr.x_norm, L, tok1, tok2, NULL,
                                 err);
    if (st == KR_OK) st = kr_kv_store_init(&kv, kr_predictor_store_layers(pw), d, T, err);
    if (st == KR_OK && dw) st = kr_kv_store_init(&dkv, kr_predictor_store_layers(dw), d, T, err);
    double t0 = kr_now_seconds();
    /* The prefills: f32's window gives step 0's draw; the draft's, its own window rows. */
    if (st == KR_OK) st = forward_rows(eng, pw, &kv, 0, L, tok1, tok2, stamps, ctx, err);
    if (st == KR_OK)
        st = kr_predictor_s1_logits(pw, &eng->ex, ctx + (size_t)(L - 1) * d, 1, d, lg, err);
    if (st == KR_OK) {
        memcpy(o->logits, lg, (size_t)V1 * 4);
        st = draw(eng, pw, t, &sm, lg, ctx + (size_t)(L - 1) * d, &kv, L, 0, &tok1[L], &tok2[L],
                  err);
    }
    float *dctx = NULL;
    if (st == KR_OK && dw) {
        if (!(dctx = malloc((size_t)L * (size_t)d * 4)))
            st = kr_error_set(err, KR_ERR_NOMEM, "out of memory");
        if (st == KR_OK) st = forward_rows(eng, dw, &dkv, 0, L, tok1, tok2, stamps, dctx, err);
    }
    double t1 = kr_now_seconds();
    int i = 1, draft_valid = L; /* draft kv rows whose input tokens are the true ones */
    o->f32_passes = o->draft_passes = 0;
    o->seconds_draft = 0;
    while (st == KR_OK && i < P) {
        int k = dw ? (t->k < P - 1 - i ? t->k : P - 1 - i) : 0;
        /* Draft tokens for steps i .. i + k - 1, written after the true ones. */
        double td = kr_now_seconds();
        for (int j = 0; st == KR_OK && j < k; j++) {
            int from = draft_valid, n = L + i + j - from;
            st = forward_rows(eng, dw, &dkv, from, n, tok1, tok2, stamps, dctx, err);
            const float *row = dctx + (size_t)(n - 1) * d;
            if (st == KR_OK) st = kr_predictor_s1_logits(dw, &eng->ex, row, 1, d, lg, err);
            if (st == KR_OK)
                st = draw(eng, dw, t, &sm, lg, row, &dkv, L + i + j, i + j, &tok1[L + i + j],
                          &tok2[L + i + j], err);
            draft_valid = L + i + j;
            o->draft_passes++;
        }
        o->seconds_draft += kr_now_seconds() - td;
        /* One f32 pass over the last true token and the k drafts: logits of steps i .. i + k. */
        if (st == KR_OK)
            st = forward_rows(eng, pw, &kv, L + i - 1, k + 1, tok1, tok2, stamps, ctx, err);
        if (st == KR_OK) st = kr_predictor_s1_logits(pw, &eng->ex, ctx, k + 1, d, lg, err);
        o->f32_passes++;
        int gained = 0;
        for (int j = 0; st == KR_OK && j <= k; j++) {
            int s = i + j;
            int32_t proposed1 = tok1[L + s], proposed2 = tok2[L + s];
            memcpy(o->logits + (size_t)s * V1, lg + (size_t)j * V1, (size_t)V1 * 4);
            st = draw(eng, pw, t, &sm, lg + (size_t)j * V1, ctx + (size_t)j * d, &kv, L + s, s,
                      &tok1[L + s], &tok2[L + s], err);
            gained = j + 1;
            if (j == k || tok1[L + s] != proposed1 || tok2[L + s] != proposed2) break;
        }
        i += gained;
        if (draft_valid > L + i - 1) draft_valid = L + i - 1;
    }
    double t2 = kr_now_seconds();
    o->seconds = t2 - t0;
    o->seconds_decode = t2 - t1;
    if (st == KR_OK) {
        memcpy(o->s1, tok1 + L, (size_t)P * 4);
        memcpy(o->s2, tok2 + L, (size_t)P * 4);
    }
    kr_kv_store_release(&kv);
    kr_kv_store_release(&dkv);
    kr_arena_free(arena);
    free(tok1);
    free(tok2);
    free(ctx);
    free(lg);
    free(dctx);
    return st;
}

static int parse_k_list(const char *s, int *ks) {
    int n = 0;
    for (const char *p = s; *p && n < 16;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > MAX_K) return -1;
        ks[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) return -1;
    }
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },    { "shape", required_argument, NULL, 's' },
        { "draft", required_argument, NULL, 'q' },    { "data", required_argument, NULL, 'd' },
        { "windows", required_argument, NULL, 'w' },  { "lookback", required_argument, NULL, 'l' },
        { "pred-len", required_argument, NULL, 'n' }, { "k", required_argument, NULL, 'k' },
        { "repeat", required_argument, NULL, 'r' },   { "seed", required_argument, NULL, 'S' },
        { "threads", required_argument, NULL, 'j' },  { NULL, 0, NULL, 0 },
    };
    const char *model_dir = NULL, *shape = NULL, *draft_fmt = "int8",
               *file = KR_SOURCE_DIR "/data/XSHG_5min_600977.csv";
    int windows = 4, L = 392, P = 120, repeat = 3, threads = 0, ks[16] = { 2, 4, 8 }, n_k = 3, c;
    uint64_t seed = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 's': shape = optarg; break;
        case 'q': draft_fmt = optarg; break;
        case 'd': file = optarg; break;
        case 'w': windows = atoi(optarg); break;
        case 'l': L = atoi(optarg); break;
        case 'n': P = atoi(optarg); break;
        case 'k': n_k = parse_k_list(optarg, ks); break;
        case 'r': repeat = atoi(optarg); break;
        case 'S': seed = strtoull(optarg, NULL, 10); break;
        case 'j': threads = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: speculative [--model DIR | --shape S] [--draft FMT] "
                            "[--data CSV] [--windows N] [--lookback N] [--pred-len N] "
                            "[--k LIST] [--repeat N] [--seed S] [--threads N]\n");
            return 2;
        }
    }
    if (windows < 1 || L < 2 || P < 2 || L + P > 512 || repeat < 1 || n_k < 1) {
        fprintf(stderr,
                "speculative: need windows >= 1, lookback >= 2, pred_len >= 2, "
                "lookback + pred_len <= 512, repeat >= 1, k in 1..%d\n",
                MAX_K);
        return 2;
    }
    kr_error err = { 0 };
    bench_model_dirs md;
    if (bench_model_dirs_resolve(model_dir, shape, &md, &err) != KR_OK) die("gen-random", &err);
    const char *pred = md.predictor, *tok = md.tokenizer;
    kr_model *m = NULL, *dm = NULL;
    if (kr_model_load(pred, tok, NULL, &m, &err) != KR_OK) die("load", &err);
    kr_model_params mp = kr_model_default_params();
    mp.quant = draft_fmt;
    if (kr_model_load(pred, tok, &mp, &dm, &err) != KR_OK) die("load draft", &err);
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = threads;
    cp.prefix_cache = 0;
    kr_context *ctx = NULL;
    if (kr_context_create(m, &cp, &ctx, &err) != KR_OK) die("context", &err);
    kr_candles *data = NULL;
    if (kr_candles_read_csv(file, &data, &err) != KR_OK) die(file, &err);
    if (data->n < L + 1) die(file, &(kr_error){ .message = "too few rows" });
    kr_model_info mi;
    kr_model_get_info(m, &mi);
    int V1 = 1 << mi.s1_bits;

    printf("speculative: %s (d_model %d, %d layers), draft %s, %s, isa %s, threads %d (0: all "
           "CPUs); %d "
           "windows of %d rows, pred_len %d, %d repeats, seed %llu\n\n",
           shape ? shape : md.root, mi.d_model, mi.n_layers, draft_fmt, file,
           kr_isa_name(kr_isa_active()), threads, windows, L, P, repeat, (unsigned long long)seed);
    /* Per decoder (0: plain, then each K): summed over windows, median over repeats. */
    int n_dec = 2 + n_k; /* plain, each K, the draft alone */
    double *sec = calloc((size_t)n_dec * repeat, sizeof(double));
    double *sec_dec = calloc((size_t)n_dec * repeat, sizeof(double));
    double *sec_draft = calloc((size_t)n_dec * repeat, sizeof(double));
    long *f32_passes = calloc((size_t)n_dec, sizeof(long)),
         *draft_passes = calloc((size_t)n_dec, sizeof(long));
    run_out ref = { 0 }, o = { 0 };
    ref.s1 = malloc((size_t)P * 4);
    ref.s2 = malloc((size_t)P * 4);
    ref.logits = malloc((size_t)P * V1 * 4);
    o.s1 = malloc((size_t)P * 4);
    o.s2 = malloc((size_t)P * 4);
    o.logits = malloc((size_t)P * V1 * 4);
    long tokens = 0;
    for (int w = 0; w < windows; w++) {
        int64_t end = windows == 1 ? data->n : L + (data->n - L) * w / (windows - 1);
        kr_series s = kr_candles_slice(data, end - L, L);
        kr_forecast_params fp = kr_forecast_default_params();
        fp.lookback = L;
        fp.pred_len = P;
        fp.paths = 1;
        fp.seed = seed;
        fp.keep_paths = 1;
        kr_forecast *f = NULL;
        if (kr_forecast_run(ctx, &s, &fp, &f, &err) != KR_OK) die("forecast", &err);
        kr_forecast_job job;
        if (kr_forecast_job_init(&job, &s, 0, 1, &fp, &err) != KR_OK) die("job", &err);
        for (int r = 0; r < repeat; r++)
            for (int dec = 0; dec < n_dec; dec++) {
                int alone = dec == n_dec - 1, k = dec && !alone ? ks[dec - 1] : 0;
                task t = { .draft = dec ? dm : NULL,
                           .job = &job,
                           .L = L,
                           .P = P,
                           .k = k,
                           .draft_alone = alone,
                           .sp = { fp.temperature, fp.top_k, fp.top_p },
                           .seed = seed,
                           .out = dec ? &o : &ref };
                if (kr_context_run_task(ctx, run_task, &t, &err) != KR_OK) die("run", &err);
                sec[dec * repeat + r] += t.out->seconds;
                sec_dec[dec * repeat + r] += t.out->seconds_decode;
                sec_draft[dec * repeat + r] += t.out->seconds_draft;
                if (r == 0) {
                    f32_passes[dec] += t.out->f32_passes;
                    draft_passes[dec] += t.out->draft_passes;
                }
                if (!dec) {
                    if (memcmp(ref.s1, f->gen_s1, (size_t)P * 4) ||
                        memcmp(ref.s2, f->gen_s2, (size_t)P * 4)) {
                        fprintf(stderr,
                                "speculative: window %d: plain decoding's tokens differ "
                                "from the engine's forecast\n",
                                w);
                        return 1;
                    }
                } else if (!alone && (memcmp(o.s1, ref.s1, (size_t)P * 4) ||
                                      memcmp(o.s2, ref.s2, (size_t)P * 4) ||
                                      memcmp(o.logits, ref.logits, (size_t)P * V1 * 4))) {
                    fprintf(stderr,
                            "speculative: window %d, k %d: tokens or logits differ from "
                            "plain decoding\n",
                            w, k);
                    return 1;
                }
            }
        tokens += P - 1;
        kr_forecast_job_release(&job);
        kr_forecast_free(f);
    }
    printf("Tokens and s1 logits: bit-identical to plain decoding for every K; plain decoding's "
           "tokens identical to kr_forecast_run's, on all %d windows.\n\n",
           windows);
    printf("| decoder | tokens per f32 pass | draft passes per token | decode s | of which "
           "drafting s | vs plain | with prefills s | vs plain |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    double plain = median(sec_dec, repeat), plain_all = median(sec, repeat);
    for (int dec = 0; dec < n_dec; dec++) {
        double s_dec = median(sec_dec + dec * repeat, repeat),
               s_all = median(sec + dec * repeat, repeat);
        char name[32];
        if (dec == n_dec - 1)
            snprintf(name, sizeof name, "%s alone (not exact)", draft_fmt);
        else if (dec)
            snprintf(name, sizeof name, "K = %d", ks[dec - 1]);
        else
            snprintf(name, sizeof name, "plain");
        printf("| %s | %.2f | %.2f | %.3f | %.3f | %.2fx | %.3f | %.2fx |\n", name,
               (double)tokens / (double)f32_passes[dec], (double)draft_passes[dec] / (double)tokens,
               s_dec, median(sec_draft + dec * repeat, repeat), plain / s_dec, s_all,
               plain_all / s_all);
    }
    printf("\n(decode: the steps after the prefills, %ld tokens; sums over the windows, medians of "
           "%d interleaved repeats)\n",
           tokens, repeat);
    free(sec);
    free(sec_dec);
    free(sec_draft);
    free(f32_passes);
    free(draft_passes);
    free(ref.s1);
    free(ref.s2);
    free(ref.logits);
    free(o.s1);
    free(o.s2);
    free(o.logits);
    kr_candles_free(data);
    kr_context_free(ctx);
    kr_model_free(m);
    kr_model_free(dm);
    return 0;
}
