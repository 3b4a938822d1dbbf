/* train/order — see order.h. */
#include "train/order.h"

#include "base/error.h"
#include "base/rng.h"

/* finetune_csv's train loop calls set_epoch_seed(epoch * 10000), and the dataset uses that
 * value as the epoch of its scramble. */
#define KR_OFFICIAL_EPOCH_STRIDE 10000

kr_status kr_order_train(const kr_dataset *ds, uint64_t seed, int64_t epoch, kr_window_ref *out,
                         kr_error *err) {
    if (epoch < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "order: epoch %lld", (long long)epoch);
    const int64_t n = kr_dataset_n_windows(ds, KR_SPLIT_TRAIN);
    /* The shuffled sample indices: a permutation of [0, n) from (seed, epoch). */
    for (int64_t i = 0; i < n; i++) out[i] = kr_dataset_window(ds, KR_SPLIT_TRAIN, i);
    for (int64_t i = n - 1; i > 0; i--) {
        uint64_t r = kr_rng_u64(seed, 0x6f72646572ull + (uint64_t)epoch, (uint64_t)i);
        int64_t k = (int64_t)(r % (uint64_t)(i + 1));
        kr_window_ref t = out[i];
        out[i] = out[k];
        out[k] = t;
    }
    /* Each sample index j of a series becomes the window its scramble names. */
    for (int64_t i = 0; i < n; i++) {
        kr_split_range r = kr_dataset_split_range(ds, out[i].series, KR_SPLIT_TRAIN);
        int64_t windows = r.end - r.begin - kr_dataset_window_rows(ds) + 1;
        int64_t j = out[i].start - r.begin;
        out[i].start = r.begin + kr_dataset_scramble(j, epoch * KR_OFFICIAL_EPOCH_STRIDE, windows);
    }
    return KR_OK;
}

void kr_order_eval(const kr_dataset *ds, kr_split split, int64_t max_windows, kr_window_ref *out,
                   int64_t *count) {
    const int64_t n = kr_dataset_n_windows(ds, split);
    int64_t m = max_windows > 0 && max_windows < n ? max_windows : n;
    for (int64_t k = 0; k < m; k++) {
        /* floor(k * n / m) without overflowing: n, m < 2^31 in practice; use double only past. */
        int64_t i =
            n < ((int64_t)1 << 31) ? k * n / m : (int64_t)((double)k * (double)n / (double)m);
        out[k] = kr_dataset_window(ds, split, i);
    }
    *count = m;
}
