/* model/sampling — see sampling.h. */
#include "model/sampling.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef struct sort_item {
    float v;
    int i;
} sort_item;

kr_status kr_sampler_scratch_init(kr_sampler_scratch *s, int n, kr_arena *arena, kr_error *err) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->scaled = KR_ARENA_NEW(arena, float, n);
    s->probs = KR_ARENA_NEW(arena, float, n);
    s->keep = KR_ARENA_NEW(arena, unsigned char, n);
    s->pairs = KR_ARENA_NEW(arena, sort_item, n);
    s->pairs_tmp = KR_ARENA_NEW(arena, sort_item, n);
    if (!s->scaled || !s->probs || !s->keep || !s->pairs || !s->pairs_tmp)
        return kr_error_set(err, KR_ERR_NOMEM, "sampler: out of memory");
    return KR_OK;
}

/* Sorts it[0..m) descending by value, equal values in the order given (ascending index, as
 * the callers build them), which is the order a comparison sort by (value desc, index asc)
 * gives, so the cumulative sums over it are the same. The values are probabilities: finite
 * and >= +0, whose IEEE bits order like the values, so this is an LSD radix sort on the
 * complemented bits, one byte per pass (stable), skipping a byte every key shares. A comparison
 * sort of the ~900 tokens that top-p keeps on flat logits took ~50 µs per draw. */
static void sort_desc(sort_item *it, int m, sort_item *tmp) {
    uint32_t all_or = 0, all_and = 0xFFFFFFFFu;
    for (int j = 0; j < m; j++) {
        uint32_t key;
        memcpy(&key, &it[j].v, sizeof key);
        key = ~key;
        all_or |= key;
        all_and &= key;
    }
    sort_item *src = it, *dst = tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        if ((((all_or ^ all_and) >> shift) & 0xFFu) == 0) continue; /* one digit for all */
        int count[257] = { 0 };
        for (int j = 0; j < m; j++) {
            uint32_t key;
            memcpy(&key, &src[j].v, sizeof key);
            count[((~key >> shift) & 0xFFu) + 1]++;
        }
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (int j = 0; j < m; j++) {
            uint32_t key;
            memcpy(&key, &src[j].v, sizeof key);
            dst[count[(~key >> shift) & 0xFFu]++] = src[j];
        }
        sort_item *t = src;
        src = dst;
        dst = t;
    }
    if (src != it) memcpy(it, src, (size_t)m * sizeof *it);
}

/* k-th largest of v[0..n) (1-based k) by quickselect on a scratch copy: O(n), no sort. */
static float kth_largest(const float *v, int n, int k, float *tmp) {
    memcpy(tmp, v, (size_t)n * sizeof(float));
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = tmp[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > pivot) i++;
            while (tmp[j] < pivot) j--;
            if (i <= j) {
                float t = tmp[i];
                tmp[i] = tmp[j];
                tmp[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return tmp[want];
}

int kr_sampler_filter(const float *logits, const kr_sampler_params *p, kr_sampler_scratch *s) {
    int n = s->n;
    int overflow = 0;
    for (int i = 0; i < n; i++) {
        s->scaled[i] = logits[i] / p->temperature;
        s->keep[i] = 1;
        overflow |= isinf(s->scaled[i]);
    }
    if (overflow) {
        /* A temperature so small (~1e-38) that logits / T leaves float's range: inf - inf made
         * every probability NaN and the draw fell back to the last token. Its limit is greedy,
         * the mass shared by the top logits: they become 0, the rest -inf. */
        float top = logits[0];
        for (int i = 1; i < n; i++)
            if (logits[i] > top) top = logits[i];
        for (int i = 0; i < n; i++) s->scaled[i] = logits[i] == top ? 0.0f : -INFINITY;
    }
    if (p->top_k > 0) {
        int k = p->top_k < n ? p->top_k : n;
        float kth = kth_largest(s->scaled, n, k, s->probs);
        int kept = 0;
        for (int i = 0; i < n; i++) {
            s->keep[i] = !(s->scaled[i] < kth);
            kept += s->keep[i];
        }
        return kept;
    }
    if (p->top_p < 1.0f) {
        /* softmax, then the sorted cumulative sum: position j is dropped once the sum of the
         * probabilities before it exceeds top_p. Only the head of the sorted order matters, so
         * sort just the tokens above a threshold, lowering it until the cut falls inside. */
        float mx = s->scaled[0], sum = 0.0f;
        for (int i = 1; i < n; i++)
            if (s->scaled[i] > mx) mx = s->scaled[i];
        for (int i = 0; i < n; i++) {
            s->probs[i] = expf(s->scaled[i] - mx);
            sum += s->probs[i];
        }
        sort_item *it = s->pairs;
        for (float thr = 1.0f / 64;; thr /= 64) {
            int m = 0;
            for (int i = 0; i < n; i++)
                if (s->probs[i] >= thr || thr < 1e-30f) it[m++] = (sort_item){ s->probs[i], i };
            sort_desc(it, m, s->pairs_tmp);
            float cum = 0.0f;
            int cut = -1;
            for (int j = 0; j < m; j++) {
                if (j > 0 && cum > p->top_p) {
                    cut = j;
                    break;
                }
                cum += it[j].v / sum;
            }
            if (cut < 0 && cum > p->top_p && m < n) cut = m; /* crosses right after the last */
            if (cut < 0 && m < n) continue;
            if (cut < 0) cut = m;
            for (int i = 0; i < n; i++) s->keep[i] = 0;
            for (int j = 0; j < cut; j++) s->keep[it[j].i] = 1;
            return cut;
        }
    }
    return n;
}

int kr_sampler_draw(const float *logits, const kr_sampler_params *p, double u,
                    kr_sampler_scratch *s) {
    int n = s->n;
    kr_sampler_filter(logits, p, s);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (s->keep[i] && s->scaled[i] > mx) mx = s->scaled[i];
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        float e = s->keep[i] ? expf(s->scaled[i] - mx) : 0.0f;
        s->probs[i] = e;
        total += e;
    }
    double target = u * total, cum = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (!s->keep[i]) continue;
        last = i;
        cum += s->probs[i];
        if (cum > target) return i;
    }
    return last;
}
