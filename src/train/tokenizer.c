/*
 * train/tokenizer — KronosTokenizer.forward in train mode and its loss, forward and backward:
 *
 *   z = quant_embed(encoder(embed(x)));  zn = z / max(|z|, 1e-12)
 *   quantized = (zn + (sign(zn) − zn).detach()) / √20        straight-through: d/dzn = 1/√20
 *   z_pre = head(decoder(post_quant_embed_pre(quantized[:, :s1_bits])))
 *   z_all = head(decoder(post_quant_embed(quantized)))        (the same decoder, run twice)
 *   loss = (mse(z_pre, x) + mse(z_all, x) + bsq_loss) / 2
 *
 * bsq_loss is BinarySphericalQuantizer.forward's with its defaults (soft entropy, analytical
 * per-sample entropy, l2_norm, inv_temperature 1): with p = σ(−4·zn/√20·inv_temperature),
 *   commit      = beta · mean over rows of Σ_dims (quantized − zn)²
 *   per-sample  = mean over rows of Σ_dims H(p, 1 − p)
 *   codebook    = Σ_dims H(mean over rows of p, mean over rows of 1 − p)
 *   bsq_loss    = commit + zeta · (gamma0 · per-sample − gamma · codebook) / inv_temperature
 * with H(q) = −Σ q·log(q + 1e-8). The reference's analytical branch replaces the group
 * probabilities before averaging them, so its "codebook" entropy is per bit, and group_size
 * only has to divide the code length (an observation of model/module.py that the golden
 * fixtures confirm).
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "train/linalg.h"
#include "train/trainer_internal.h"

#define BSQ_NORM_EPS 1e-12f
#define BSQ_LOG_EPS 1e-8

enum { SITE_ENC0 = 1024, SITE_DEC0 = 2048 };

static uint64_t site_stream(uint64_t micro, int site) {
    return kr_mix64((micro << 14) ^ (uint64_t)site ^ 0x746f6b5f64726f70ull);
}

void tr_tokenizer_layout(kr_trainer *tr, tr_slab *s, int M) {
    tr_tokenizer *tk = &tr->tk;
    const kr_tokenizer_config *c = &tr->tcfg;
    const size_t d = (size_t)c->d_model, ff = (size_t)c->ff_dim, m = (size_t)M;
    const size_t q = (size_t)(c->s1_bits + c->s2_bits);
    float **streams[3] = { tk->enc_stream, tk->dec_stream[0], tk->dec_stream[1] };
    tr_block_acts *acts[3] = { tk->enc_acts, tk->dec_acts[0], tk->dec_acts[1] };
    int counts[3] = { tk->n_enc, tk->n_dec, tk->n_dec };
    for (int k = 0; k < 3; k++) tr_take_stack(s, counts[k], m, d, ff, streams[k], acts[k]);
    float *z = tr_take(s, m * q), *zn = tr_take(s, m * q), *nrm = tr_take(s, m);
    float *quant = tr_take(s, m * q), *qpre = tr_take(s, m * (size_t)c->s1_bits);
    float *o0 = tr_take(s, m * (size_t)c->d_in), *o1 = tr_take(s, m * (size_t)c->d_in);
    float *dz = tr_take(s, m * q), *dq2 = tr_take(s, m * q);
    float *dqpre = tr_take(s, m * (size_t)c->s1_bits), *dx = tr_take(s, m * d);
    double *rows = (double *)tr_take(s, 2 * 3 * m);
    if (!s->base) return;
    tk->z = z;
    tk->zn = zn;
    tk->znorm = nrm;
    tk->quant = quant;
    tk->qpre = qpre;
    tk->out[0] = o0;
    tk->out[1] = o1;
    tk->dz = dz;
    tk->dq2 = dq2;
    tk->dqpre = dqpre;
    tk->dx = dx;
    tk->rows = rows;
}

/* ---------------------------------------------------------------- quantiser */

typedef struct bsq_job {
    kr_trainer *tr;
    int M;
    double k_commit, k_sample, k_code; /* gradient weights (backward) */
    const double *dcode; /* [q] d codebook / d mean p − d codebook / d mean (1 − p) */
} bsq_job;

static float bsq_q_scale(int q) { return (float)(1.0 / sqrt((double)q)); }

static double ent_term(double x) { return -(x * log(x + BSQ_LOG_EPS)); }

/* −d/dx of x·log(x + ε) */
static double ent_grad(double x) { return -(log(x + BSQ_LOG_EPS) + x / (x + BSQ_LOG_EPS)); }

static void bsq_fwd_rows(void *p, int r0, int r1) {
    const bsq_job *j = p;
    tr_tokenizer *tk = &j->tr->tk;
    const int q = j->tr->tcfg.s1_bits + j->tr->tcfg.s2_bits, s1 = j->tr->tcfg.s1_bits;
    const float qs = bsq_q_scale(q), sq = (float)sqrt((double)q);
    const float inv_t = (float)j->tr->hyper.inv_temperature;
    double *commit = tk->rows, *sample = tk->rows + j->M;
    for (int m = r0; m < r1; m++) {
        const float *z = tk->z + (size_t)m * (size_t)q;
        float *zn = tk->zn + (size_t)m * (size_t)q, *qt = tk->quant + (size_t)m * (size_t)q;
        float ss = 0.0f;
        for (int i = 0; i < q; i++) ss += z[i] * z[i];
        float nrm = sqrtf(ss);
        tk->znorm[m] = nrm;
        float den = nrm > BSQ_NORM_EPS ? nrm : BSQ_NORM_EPS;
        double cm = 0.0, se = 0.0;
        for (int i = 0; i < q; i++) {
            float v = z[i] / den;
            zn[i] = v;
            float hat = v > 0.0f ? 1.0f : -1.0f;
            qt[i] = (v + (hat - v)) * qs;
            double diff = (double)qt[i] - (double)v;
            cm += diff * diff;
            float u = (-4.0f * v) / sq * inv_t;
            double pp = (double)(1.0f / (1.0f + expf(-u)));
            se += ent_term(pp) + ent_term(1.0 - pp);
        }
        commit[m] = cm;
        sample[m] = se;
        memcpy(tk->qpre + (size_t)m * (size_t)s1, qt, (size_t)s1 * sizeof(float));
    }
}

/* Gradient of the loss with respect to zn (from the decoders through the straight-through
 * estimator, dq2, plus the commitment and entropy terms), then through the normalisation. */
static void bsq_bwd_rows(void *p, int r0, int r1) {
    const bsq_job *j = p;
    tr_tokenizer *tk = &j->tr->tk;
    const int q = j->tr->tcfg.s1_bits + j->tr->tcfg.s2_bits;
    const float qs = bsq_q_scale(q), sq = (float)sqrt((double)q);
    const float inv_t = (float)j->tr->hyper.inv_temperature;
    for (int m = r0; m < r1; m++) {
        const float *zn = tk->zn + (size_t)m * (size_t)q, *qt = tk->quant + (size_t)m * (size_t)q;
        const float *dq = tk->dq2 + (size_t)m * (size_t)q;
        float *dz = tk->dz + (size_t)m * (size_t)q;
        double dot = 0.0;
        double g[64];
        for (int i = 0; i < q; i++) {
            double gi = (double)dq[i] * (double)qs;
            gi += j->k_commit * 2.0 * ((double)zn[i] - (double)qt[i]);
            float u = (-4.0f * zn[i]) / sq * inv_t;
            double pp = (double)(1.0f / (1.0f + expf(-u)));
            double dp = j->k_sample * (ent_grad(pp) - ent_grad(1.0 - pp)) - j->k_code * j->dcode[i];
            gi += dp * pp * (1.0 - pp) * (-4.0 * (double)inv_t / (double)sq);
            g[i] = gi;
            dot += gi * (double)zn[i];
        }
        float nrm = tk->znorm[m];
        if (nrm > BSQ_NORM_EPS) {
            for (int i = 0; i < q; i++) dz[i] = (float)((g[i] - (double)zn[i] * dot) / nrm);
        } else { /* clamped: zn = z / eps, a plain scale */
            for (int i = 0; i < q; i++) dz[i] = (float)(g[i] / BSQ_NORM_EPS);
        }
    }
}

/* ---------------------------------------------------------------- the pass */

static double mean_of(const double *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0.0;
}

/* Σ (out − x)² over M·d_in values, in order. */
static double sq_err(const float *o, const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)o[i] - (double)x[i];
        s += e * e;
    }
    return s;
}

/* dout ← k·(out − x) in place */
static void mse_grad(float *o, const float *x, size_t n, float k) {
    for (size_t i = 0; i < n; i++) o[i] = k * (o[i] - x[i]);
}

kr_status tr_tokenizer_run(kr_trainer *tr, const kr_train_batch *b, double grad_scale,
                           uint64_t rng_stream, kr_train_losses *out, kr_error *err) {
    (void)rng_stream;
    tr_tokenizer *tk = &tr->tk;
    const kr_tokenizer_config *c = &tr->tcfg;
    kr_pool *pool = tr->pool;
    const int n = b->n, T = b->len, M = n * T, q = c->s1_bits + c->s2_bits;
    const size_t nx = (size_t)M * (size_t)c->d_in;
    const int train = grad_scale != 0.0;
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(b->x[i]))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "training batch: window %zu row %zu feature %zu is not finite",
                                i / ((size_t)T * (size_t)c->d_in), i / (size_t)c->d_in % (size_t)T,
                                i % (size_t)c->d_in);

    const int drop = train && tr->params.use_dropout;
    tr_block_drops ed[64], dd[2][64];
    for (int i = 0; i < tk->n_enc; i++) {
        uint64_t s0 = site_stream(tr->micro, SITE_ENC0 + 3 * i);
        ed[i].attn = (tr_dropout){ drop ? tr->hyper.attn_drop : 0.0f, tr->params.seed, s0 };
        ed[i].resid = (tr_dropout){ drop ? tr->hyper.resid_drop : 0.0f, tr->params.seed, s0 + 1 };
        ed[i].ffn = (tr_dropout){ drop ? tr->hyper.ffn_drop : 0.0f, tr->params.seed, s0 + 2 };
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tk->n_dec; i++) {
            uint64_t s0 = site_stream(tr->micro, SITE_DEC0 + 256 * k + 3 * i);
            dd[k][i].attn = (tr_dropout){ drop ? tr->hyper.attn_drop : 0.0f, tr->params.seed, s0 };
            dd[k][i].resid =
                (tr_dropout){ drop ? tr->hyper.resid_drop : 0.0f, tr->params.seed, s0 + 1 };
            dd[k][i].ffn =
                (tr_dropout){ drop ? tr->hyper.ffn_drop : 0.0f, tr->params.seed, s0 + 2 };
        }

    /* encoder and quantiser */
    tr_linear_fwd(pool, &tk->embed, b->x, M, tk->enc_stream[0]);
    for (int i = 0; i < tk->n_enc; i++)
        tr_block_fwd(pool, &tk->enc[i], &tk->enc_acts[i], n, T, tk->enc_stream[i + 1], &tr->ws,
                     &ed[i]);
    tr_linear_fwd(pool, &tk->quant_embed, tk->enc_stream[tk->n_enc], M, tk->z);
    bsq_job bj = { .tr = tr, .M = M };
    tr_for_rows(pool, TR_PART_LOSS, M, bsq_fwd_rows, &bj);
    /* the codebook entropy's averages over every row, in row order */
    double avg_p[64], avg_q[64];
    const float sq = (float)sqrt((double)q), inv_t = (float)tr->hyper.inv_temperature;
    for (int i = 0; i < q; i++) avg_p[i] = avg_q[i] = 0.0;
    for (int m = 0; m < M; m++)
        for (int i = 0; i < q; i++) {
            float u = (-4.0f * tk->zn[(size_t)m * (size_t)q + (size_t)i]) / sq * inv_t;
            float pp = 1.0f / (1.0f + expf(-u));
            avg_p[i] += pp;
            avg_q[i] += 1.0f - pp;
        }
    double code = 0.0, dcode[64];
    for (int i = 0; i < q; i++) {
        avg_p[i] /= M;
        avg_q[i] /= M;
        code += ent_term(avg_p[i]) + ent_term(avg_q[i]);
        dcode[i] = ent_grad(avg_p[i]) - ent_grad(avg_q[i]);
    }
    const tr_hyper *h = &tr->hyper;
    double commit = h->beta * mean_of(tk->rows, M);
    double sample = mean_of(tk->rows + M, M);
    double bsq = commit + h->zeta * (h->gamma0 * sample - h->gamma * code) / h->inv_temperature;

    /* the two decoder passes: from the s1 half, then from the whole code */
    const tr_lin *post[2] = { &tk->post_pre, &tk->post };
    const float *post_in[2] = { tk->qpre, tk->quant };
    double recon[2];
    for (int k = 0; k < 2; k++) {
        tr_linear_fwd(pool, post[k], post_in[k], M, tk->dec_stream[k][0]);
        for (int i = 0; i < tk->n_dec; i++)
            tr_block_fwd(pool, &tk->dec[i], &tk->dec_acts[k][i], n, T, tk->dec_stream[k][i + 1],
                         &tr->ws, &dd[k][i]);
        tr_linear_fwd(pool, &tk->head, tk->dec_stream[k][tk->n_dec], M, tk->out[k]);
        recon[k] = sq_err(tk->out[k], b->x, nx) / (double)nx;
    }
    memset(out, 0, sizeof *out);
    out->recon_pre = recon[0];
    out->recon = recon[1];
    out->bsq = bsq;
    out->loss = (recon[0] + recon[1] + bsq) / 2.0;
    out->tokens = M;
    if (!train) return KR_OK;

    /* backward: the decoders (pass 1 first, as autograd would), into the quantised code */
    for (int k = 1; k >= 0; k--) {
        mse_grad(tk->out[k], b->x, nx, (float)(grad_scale * 0.5 * 2.0 / (double)nx));
        tr_linear_bwd(pool, &tk->head, tk->out[k], tk->dec_stream[k][tk->n_dec], M, tk->dx, 0);
        for (int i = tk->n_dec - 1; i >= 0; i--)
            tr_block_bwd(pool, &tk->dec[i], &tk->dec_acts[k][i], n, T, tk->dx, &tr->ws, &dd[k][i]);
        tr_linear_bwd(pool, post[k], tk->dx, post_in[k], M, k ? tk->dq2 : tk->dqpre, 0);
    }
    for (int m = 0; m < M; m++)
        for (int i = 0; i < c->s1_bits; i++)
            tk->dq2[(size_t)m * (size_t)q + (size_t)i] +=
                tk->dqpre[(size_t)m * (size_t)c->s1_bits + (size_t)i];
    const double w = grad_scale * 0.5;
    bj.k_commit = w * h->beta / (double)M;
    bj.k_sample = w * h->zeta * h->gamma0 / h->inv_temperature / (double)M;
    bj.k_code = w * h->zeta * h->gamma / h->inv_temperature / (double)M;
    bj.dcode = dcode;
    tr_for_rows(pool, TR_PART_LOSS, M, bsq_bwd_rows, &bj);
    tr_linear_bwd(pool, &tk->quant_embed, tk->dz, tk->enc_stream[tk->n_enc], M, tk->dx, 0);
    for (int i = tk->n_enc - 1; i >= 0; i--)
        tr_block_bwd(pool, &tk->enc[i], &tk->enc_acts[i], n, T, tk->dx, &tr->ws, &ed[i]);
    tr_linear_bwd(pool, &tk->embed, tk->dx, b->x, M, NULL, 0);
    return KR_OK;
}
