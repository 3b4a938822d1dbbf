/*
 * train/order — which windows each batch of an epoch holds.
 *
 * Training (the official finetune_csv loader, ../shared/golden/train/README.md): an epoch has
 * one sample per training window. The data loader shuffles the sample indices (here a
 * Fisher-Yates shuffle driven by base/rng from (seed, epoch), so an epoch's order is a pure
 * function of the two and a resumed run sees the same batches), and the dataset maps sample j
 * of a series to the window starting at the official scramble
 * (j * 9973 + (e + 1) * 104729) % (max_start + 1) with e = epoch * 10000, as finetune_csv's
 * set_epoch_seed(epoch * 10000) makes it. Batches are consecutive runs of the shuffled order;
 * a last partial batch is dropped (drop_last=True).
 * Validation: every window in natural order (start = idx), the last batch partial; or, when
 * limited to max windows, that many spread evenly over them (kronos's option; deterministic).
 */
#ifndef KR_SERIES_ORDER_H
#define KR_SERIES_ORDER_H

#include <stdint.h>

#include "kronos/status.h"
#include "train/dataset.h"

/* The training order of `epoch` (0-based): out[kr_dataset_n_windows(TRAIN)]. */
KR_PRIVATE kr_status kr_order_train(const kr_dataset *ds, uint64_t seed, int64_t epoch,
                                    kr_window_ref *out, kr_error *err);

/* The windows of a validation or test split to score: all of them in natural order, or at
 * most max_windows (> 0) spread evenly (window floor(k * n / max_windows) for k <
 * max_windows). out has room for min(n, max_windows) entries; *count receives how many. */
KR_PRIVATE void kr_order_eval(const kr_dataset *ds, kr_split split, int64_t max_windows,
                              kr_window_ref *out, int64_t *count);

#endif
