/* finetune/state — see state.h. */
#include "finetune/state.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"

#define PROGRESS_FORMAT "kronos-finetune-progress"

static double num_or_nan(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int get_i64(const cJSON *o, const char *key, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)) return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

kr_status kr_ft_progress_read(const char *dir, kr_ft_progress_file *p, int *exists, kr_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/progress.json", dir);
    memset(p, 0, sizeof *p);
    *exists = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) return kr_error_set(err, KR_ERR_IO, "%s: no checkpoint", path);
    *exists = 1;
    char *text = NULL;
    size_t len = 0;
    kr_status st = kr_read_file(path, (size_t)1 << 20, "checkpoint progress", &text, &len, err);
    if (st != KR_OK) return st;
    cJSON *o = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(o, "state_file");
    int64_t epoch = 0, batch = 0, rows = 0, bs = 0, seed = 0;
    int ok = o && cJSON_IsString(fmt) && !strcmp(fmt->valuestring, PROGRESS_FORMAT) &&
             cJSON_IsString(sf) && strlen(sf->valuestring) < sizeof p->state_file &&
             !strchr(sf->valuestring, '/') && get_i64(o, "epoch", &epoch) == 0 &&
             get_i64(o, "batch", &batch) == 0 && get_i64(o, "steps", &p->steps) == 0 &&
             get_i64(o, "steps_per_epoch", &p->steps_per_epoch) == 0 &&
             get_i64(o, "total_steps", &p->total_steps) == 0 &&
             get_i64(o, "train_windows", &p->train_windows) == 0 &&
             get_i64(o, "batch_size", &bs) == 0 && get_i64(o, "window_rows", &rows) == 0 &&
             get_i64(o, "seed", &seed) == 0 && epoch >= 0 && epoch < (1 << 30) && batch >= 0;
    if (ok) {
        p->done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "done"));
        p->epoch = (int)epoch;
        p->batch = batch;
        p->batch_size = (int)bs;
        p->window_rows = (int)rows;
        p->seed = (uint64_t)seed;
        p->best_val_loss = num_or_nan(o, "best_val_loss");
        p->last_val_loss = num_or_nan(o, "last_val_loss");
        snprintf(p->state_file, sizeof p->state_file, "%s", sf->valuestring);
    }
    cJSON_Delete(o);
    if (!ok) return kr_error_set(err, KR_ERR_FORMAT, "%s: not a kronos finetune checkpoint", path);
    return KR_OK;
}

kr_status kr_ft_progress_write(const char *dir, const kr_ft_progress_file *p, const char *previous,
                               kr_error *err) {
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/progress.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cJSON *o = cJSON_CreateObject();
    if (!o) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    cJSON_AddStringToObject(o, "format", PROGRESS_FORMAT);
    cJSON_AddBoolToObject(o, "done", p->done);
    cJSON_AddNumberToObject(o, "epoch", p->epoch);
    cJSON_AddNumberToObject(o, "batch", (double)p->batch);
    cJSON_AddNumberToObject(o, "steps", (double)p->steps);
    if (isfinite(p->best_val_loss)) cJSON_AddNumberToObject(o, "best_val_loss", p->best_val_loss);
    if (isfinite(p->last_val_loss)) cJSON_AddNumberToObject(o, "last_val_loss", p->last_val_loss);
    cJSON_AddNumberToObject(o, "steps_per_epoch", (double)p->steps_per_epoch);
    cJSON_AddNumberToObject(o, "total_steps", (double)p->total_steps);
    cJSON_AddNumberToObject(o, "train_windows", (double)p->train_windows);
    cJSON_AddNumberToObject(o, "batch_size", p->batch_size);
    cJSON_AddNumberToObject(o, "window_rows", p->window_rows);
    /* Seeds are written as JSON numbers; beyond 2^53 they would round: keep them exact. */
    cJSON_AddNumberToObject(o, "seed", (double)(int64_t)p->seed);
    cJSON_AddStringToObject(o, "state_file", p->state_file);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    kr_status st = KR_OK;
    FILE *f = fopen(tmp, "wb");
    size_t len = strlen(text);
    if (!f || fwrite(text, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0)
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    if (f && fclose(f) != 0 && st == KR_OK)
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    free(text);
    if (st == KR_OK && rename(tmp, path) != 0)
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot replace: %s", path, strerror(errno));
    if (st != KR_OK) {
        unlink(tmp);
        return st;
    }
    if (previous && *previous && strcmp(previous, p->state_file)) {
        char old[4200];
        snprintf(old, sizeof old, "%s/%s", dir, previous);
        unlink(old); /* a leftover is harmless: the next write names its own */
    }
    return KR_OK;
}

int kr_ft_dir_nonempty(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return 0;
    if (!S_ISDIR(sb.st_mode)) return -1;
    DIR *d = opendir(path);
    if (!d) return 1; /* unreadable: treat as holding something */
    struct dirent *e;
    int any = 0;
    while (!any && (e = readdir(d))) any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return any;
}

kr_status kr_ft_remove_tree(const char *path, kr_error *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? KR_OK
                               : kr_error_set(err, KR_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return kr_error_set(err, KR_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        struct dirent *e;
        kr_status st = KR_OK;
        while (st == KR_OK && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *child = malloc(n);
            if (!child) {
                st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            snprintf(child, n, "%s/%s", path, e->d_name);
            st = kr_ft_remove_tree(child, err);
            free(child);
        }
        closedir(d);
        if (st != KR_OK) return st;
        if (rmdir(path) != 0)
            return kr_error_set(err, KR_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return KR_OK;
    }
    if (unlink(path) != 0)
        return kr_error_set(err, KR_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return KR_OK;
}

kr_status kr_ft_copy_file(const char *from, const char *to, kr_error *err) {
    char *text = NULL;
    size_t len = 0;
    kr_status st = kr_read_file(from, (size_t)1 << 20, "config", &text, &len, err);
    if (st != KR_OK) return st;
    FILE *f = fopen(to, "wb");
    if (!f || fwrite(text, 1, len, f) != len)
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot write: %s", to, strerror(errno));
    if (f && fclose(f) != 0 && st == KR_OK)
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot write: %s", to, strerror(errno));
    free(text);
    return st;
}

int kr_ft_is_checkpoint(const char *dir) {
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}
