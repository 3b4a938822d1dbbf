/*
 * model/model — the kr_model handle of the public API: a tokenizer and a predictor loaded
 * from their checkpoint directories, plus the thread pool their forward passes run on.
 * The engine uses the fields directly; the pool has one driver at a time, so concurrent
 * forecasts on one model serialise on `lock`.
 */
#ifndef KR_MODEL_MODEL_H
#define KR_MODEL_MODEL_H

#include <pthread.h>

#include "base/threadpool.h"
#include "kronos.h"
#include "model/weights.h"

struct kr_model {
    kr_tokenizer_weights *tok;
    kr_predictor_weights *pred;
    kr_pool *pool;
    pthread_mutex_t lock;
    kr_model_info info;
};

#endif
