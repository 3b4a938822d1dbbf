/* engine/norm_anchor — see norm_anchor.h. */
#include "engine/norm_anchor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/error.h"

#define SLOTS 16384 /* a power of two */

typedef struct slot {
    uint64_t key; /* 0: empty */
    int stat_rows; /* A: the window's length when anchored */
} slot;

struct kr_norm_anchors {
    pthread_mutex_t mu;
    slot s[SLOTS];
    int64_t reused, made;
};

kr_status kr_norm_anchors_create(kr_norm_anchors **out, kr_error *err) {
    kr_norm_anchors *t = calloc(1, sizeof *t);
    if (!t) return kr_error_set(err, KR_ERR_NOMEM, "norm anchors: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return KR_OK;
}

void kr_norm_anchors_free(kr_norm_anchors *t) {
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* A row's identity: its stamp and its six values as given. Never 0 (0 marks an empty slot). */
static uint64_t row_key(const int64_t *timestamps, const double *values, int64_t row) {
    uint64_t h = XXH3_64bits_withSeed(&timestamps[row], sizeof(int64_t), 0x616e63686f72ull);
    h = XXH3_64bits_withSeed(values + row * KR_N_FEATURES, KR_N_FEATURES * sizeof(double), h);
    return h ? h : 1;
}

void kr_norm_anchor_choose(kr_norm_anchors *t, const int64_t *timestamps, const double *values,
                           int64_t n, int lookback, int max_context, int refresh, int *window_rows,
                           int *stat_rows) {
    if (refresh <= 0) refresh = KR_NORM_REFRESH_DEFAULT;
    *window_rows = *stat_rows = lookback;
    if (!t || lookback < 2 || lookback > n) return;
    int64_t newest_start = n - lookback;
    int64_t oldest_start = n - (max_context > lookback ? max_context : lookback);
    if (oldest_start < 0) oldest_start = 0;
    pthread_mutex_lock(&t->mu);
    /* The newest anchor start among the rows given decides: it is the live one (an older one
     * further back was refreshed away). */
    for (int64_t start = newest_start; start >= oldest_start; start--) {
        uint64_t key = row_key(timestamps, values, start);
        const slot *sl = &t->s[key & (SLOTS - 1)];
        if (sl->key != key) continue;
        int64_t window = n - start;
        if (sl->stat_rows >= 2 && sl->stat_rows <= window && window - sl->stat_rows < refresh &&
            window <= max_context) {
            *window_rows = (int)window;
            *stat_rows = sl->stat_rows;
            t->reused++;
            pthread_mutex_unlock(&t->mu);
            return;
        }
        break; /* grown past its refresh or the context: anchor anew */
    }
    uint64_t key = row_key(timestamps, values, newest_start);
    t->s[key & (SLOTS - 1)] = (slot){ key, lookback };
    t->made++;
    pthread_mutex_unlock(&t->mu);
}

void kr_norm_anchor_counts(kr_norm_anchors *t, int64_t *reused, int64_t *made) {
    pthread_mutex_lock(&t->mu);
    *reused = t->reused;
    *made = t->made;
    pthread_mutex_unlock(&t->mu);
}
