/*
 * train/checkpoint — what a trainer writes: the Hugging Face directory of its model
 * (config.json as it was read + model.safetensors with every parameter and buffer under its
 * state_dict name, f32), and the state file that resumes a run bit for bit.
 *
 * State file (little-endian, written to PATH.tmp, synced, renamed over PATH):
 *   "KRTRAIN1" | u32 version 1 | u32 target | u64 n_floats | u32 n_tensors
 *   n_tensors × { char name[96] | i32 n_dims | i64 shape[4] }
 *   i64 steps | u64 micro | u64 evals | i32 pending | u64 seed
 *   f32 values[n_floats] | gradients | first moments | second moments
 *   u64 XXH64 (seed 0) of every byte before it
 * A load checks the header against the trainer (same kind, same tensors), then the hash over
 * the whole file, before it changes anything.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "model/safetensors.h"
#include "train/trainer_internal.h"

#define STATE_MAGIC "KRTRAIN1"
#define STATE_VERSION 1u

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Writes len bytes to path.tmp, then renames it over path. */
static kr_status write_atomic(const char *path, const void *data, size_t len, kr_error *err) {
    size_t n = strlen(path) + 8;
    char *tmp = malloc(n);
    if (!tmp) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, n, "%s.tmp", path);
    kr_status rc = KR_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = kr_error_set(err, KR_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    } else {
        int ok = fwrite(data, 1, len, f) == len;
        int e = errno;
        if (fclose(f) != 0 && ok) {
            ok = 0;
            e = errno;
        }
        if (!ok || rename(tmp, path) != 0) {
            if (ok) e = errno;
            remove(tmp);
            rc = kr_error_set(err, KR_ERR_IO, "%s: write failed: %s", path, strerror(e));
        }
    }
    free(tmp);
    return rc;
}

kr_status kr_trainer_save(const kr_trainer *tr, const char *dir, kr_error *err) {
    if (!tr || !dir) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_trainer_save: NULL argument");
    kr_status rc = kr_mkdir_p(dir, err);
    if (rc != KR_OK) return rc;
    char *cfg = join(dir, "config.json"), *model = join(dir, "model.safetensors");
    kr_st_writer *w = NULL;
    if (!cfg || !model) rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
    if (rc == KR_OK) rc = kr_st_writer_create(&w, err);
    for (int i = 0; rc == KR_OK && i < tr->n_tensors; i++) {
        const tr_param *p = &tr->tensors[i];
        rc = kr_st_writer_add(w, p->name, KR_DT_F32, p->n_dims, p->shape, tr->p + p->off, err);
    }
    for (int i = 0; rc == KR_OK && i < tr->n_buffers; i++) {
        const tr_buffer *b = &tr->buffers[i];
        rc = kr_st_writer_add(w, b->name, b->is_i64 ? KR_DT_I64 : KR_DT_F32, b->n_dims, b->shape,
                              b->data, err);
    }
    /* the weights first: a directory with a new config.json and old weights never exists */
    if (rc == KR_OK) rc = kr_st_writer_save(w, model, err);
    if (rc == KR_OK) rc = write_atomic(cfg, tr->config_json, tr->config_len, err);
    kr_st_writer_free(w);
    free(cfg);
    free(model);
    return rc;
}

/* ---------------------------------------------------------------- state */

typedef struct state_head {
    uint32_t version, target;
    uint64_t n_floats;
    uint32_t n_tensors;
} state_head;

typedef struct state_counters {
    int64_t steps;
    uint64_t micro, evals;
    int32_t pending;
    uint64_t seed;
} state_counters;

typedef struct wfile {
    FILE *f;
    XXH64_state_t *h;
    int ok;
} wfile;

static void put(wfile *w, const void *p, size_t n) {
    if (!w->ok) return;
    w->ok = fwrite(p, 1, n, w->f) == n;
    XXH64_update(w->h, p, n);
}

kr_status kr_trainer_save_state(const kr_trainer *tr, const char *path, kr_error *err) {
    if (!tr || !path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_trainer_save_state: NULL argument");
    size_t n = strlen(path) + 8;
    char *tmp = malloc(n);
    XXH64_state_t *h = XXH64_createState();
    if (!tmp || !h) {
        free(tmp);
        XXH64_freeState(h);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, n, "%s.tmp", path);
    XXH64_reset(h, 0);
    wfile w = { fopen(tmp, "wb"), h, 1 };
    kr_status rc = KR_OK;
    if (!w.f) {
        rc = kr_error_set(err, KR_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    put(&w, STATE_MAGIC, 8);
    state_head hd = { STATE_VERSION, (uint32_t)tr->params.target, tr->n_floats,
                      (uint32_t)tr->n_tensors };
    put(&w, &hd.version, 4);
    put(&w, &hd.target, 4);
    put(&w, &hd.n_floats, 8);
    put(&w, &hd.n_tensors, 4);
    for (int i = 0; i < tr->n_tensors; i++) {
        const tr_param *p = &tr->tensors[i];
        int32_t nd = p->n_dims;
        put(&w, p->name, TR_NAME_LEN);
        put(&w, &nd, 4);
        put(&w, p->shape, sizeof p->shape);
    }
    state_counters c = { tr->steps, tr->micro, tr->evals, tr->pending, tr->params.seed };
    put(&w, &c.steps, 8);
    put(&w, &c.micro, 8);
    put(&w, &c.evals, 8);
    put(&w, &c.pending, 4);
    put(&w, &c.seed, 8);
    const float *arrays[4] = { tr->p, tr->g, tr->m, tr->v };
    for (int a = 0; a < 4; a++) put(&w, arrays[a], tr->n_floats * sizeof(float));
    uint64_t digest = XXH64_digest(h);
    if (w.ok) w.ok = fwrite(&digest, 1, 8, w.f) == 8;
    int e = errno;
    if (w.ok && (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)) {
        w.ok = 0;
        e = errno;
    }
    if (fclose(w.f) != 0 && w.ok) {
        w.ok = 0;
        e = errno;
    }
    if (!w.ok || rename(tmp, path) != 0) {
        if (w.ok) e = errno;
        remove(tmp);
        rc = kr_error_set(err, KR_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
out:
    free(tmp);
    XXH64_freeState(h);
    return rc;
}

typedef struct rfile {
    FILE *f;
    XXH64_state_t *h;
    int ok;
} rfile;

static void get(rfile *r, void *p, size_t n) {
    if (!r->ok) return;
    r->ok = fread(p, 1, n, r->f) == n;
    if (r->ok && r->h) XXH64_update(r->h, p, n);
}

/* The header and tensor table against tr; counters into *c. */
static kr_status read_header(const kr_trainer *tr, rfile *r, const char *path, state_counters *c,
                             kr_error *err) {
    char magic[8];
    state_head hd;
    get(r, magic, 8);
    get(r, &hd.version, 4);
    get(r, &hd.target, 4);
    get(r, &hd.n_floats, 8);
    get(r, &hd.n_tensors, 4);
    if (!r->ok || memcmp(magic, STATE_MAGIC, 8) != 0)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: not a kronos training state file", path);
    if (hd.version != STATE_VERSION)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: state version %u, expected %u", path,
                            hd.version, STATE_VERSION);
    if (hd.target != (uint32_t)tr->params.target || hd.n_floats != tr->n_floats ||
        hd.n_tensors != (uint32_t)tr->n_tensors)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: the state is of another model (%s, %u tensors) than this trainer "
                            "(%s, %d tensors)",
                            path, hd.target ? "tokenizer" : "predictor", hd.n_tensors,
                            tr->params.target ? "tokenizer" : "predictor", tr->n_tensors);
    for (int i = 0; i < tr->n_tensors; i++) {
        char name[TR_NAME_LEN];
        int32_t nd;
        int64_t shape[4];
        get(r, name, TR_NAME_LEN);
        get(r, &nd, 4);
        get(r, shape, sizeof shape);
        const tr_param *p = &tr->tensors[i];
        if (!r->ok) break;
        name[TR_NAME_LEN - 1] = 0;
        if (strcmp(name, p->name) != 0 || nd != p->n_dims || memcmp(shape, p->shape, sizeof shape))
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: tensor %d is '%s' in the state, '%s' (or of another shape) "
                                "in this trainer",
                                path, i, name, p->name);
    }
    get(r, &c->steps, 8);
    get(r, &c->micro, 8);
    get(r, &c->evals, 8);
    get(r, &c->pending, 4);
    get(r, &c->seed, 8);
    if (!r->ok) return kr_error_set(err, KR_ERR_FORMAT, "%s: truncated", path);
    return KR_OK;
}

kr_status kr_trainer_load_state(kr_trainer *tr, const char *path, kr_error *err) {
    if (!tr || !path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_trainer_load_state: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return kr_error_set(err, KR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    XXH64_state_t *h = XXH64_createState();
    if (!h) {
        fclose(f);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    }
    /* pass 1: header, then the hash over the arrays (read in pieces, nothing changed yet) */
    XXH64_reset(h, 0);
    rfile r = { f, h, 1 };
    state_counters c;
    kr_status rc = read_header(tr, &r, path, &c, err);
    long data_at = ftell(f);
    if (rc == KR_OK) {
        static const size_t piece = 1 << 16;
        float buf[1 << 14];
        size_t left = 4 * tr->n_floats * sizeof(float);
        while (r.ok && left) {
            size_t k = left < piece ? left : piece;
            get(&r, buf, k);
            left -= k;
        }
        uint64_t want = 0, got = XXH64_digest(h);
        r.h = NULL;
        get(&r, &want, 8);
        char extra;
        if (!r.ok)
            rc = kr_error_set(err, KR_ERR_FORMAT, "%s: truncated", path);
        else if (fread(&extra, 1, 1, f) == 1)
            rc = kr_error_set(err, KR_ERR_FORMAT, "%s: trailing bytes after the checksum", path);
        else if (want != got)
            rc = kr_error_set(err, KR_ERR_FORMAT, "%s: checksum mismatch (the file is corrupt)",
                              path);
    }
    /* pass 2: the arrays into the trainer */
    if (rc == KR_OK && fseek(f, data_at, SEEK_SET) != 0)
        rc = kr_error_set(err, KR_ERR_IO, "%s: seek failed: %s", path, strerror(errno));
    if (rc == KR_OK) {
        rfile r2 = { f, NULL, 1 };
        float *arrays[4] = { tr->p, tr->g, tr->m, tr->v };
        for (int a = 0; a < 4; a++) get(&r2, arrays[a], tr->n_floats * sizeof(float));
        if (!r2.ok)
            rc = kr_error_set(err, KR_ERR_IO,
                              "%s: read failed (the trainer's values may be "
                              "partly replaced: load again or recreate it)",
                              path);
    }
    if (rc == KR_OK) {
        tr->steps = c.steps;
        tr->micro = c.micro;
        tr->evals = c.evals;
        tr->pending = c.pending;
        tr->params.seed = c.seed;
    }
    fclose(f);
    XXH64_freeState(h);
    return rc;
}
