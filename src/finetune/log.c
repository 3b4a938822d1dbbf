/* finetune/log — see log.h. */
#include "finetune/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/fsutil.h"

struct kr_ft_log {
    FILE *f;
    char path[4200];
};

kr_status kr_ft_log_open(const char *dir, kr_ft_log **out, kr_error *err) {
    kr_status st = kr_mkdir_p(dir, err);
    if (st != KR_OK) return st;
    kr_ft_log *log = calloc(1, sizeof *log);
    if (!log) return kr_error_set(err, KR_ERR_NOMEM, "log: out of memory");
    snprintf(log->path, sizeof log->path, "%s/finetune.jsonl", dir);
    log->f = fopen(log->path, "a");
    if (!log->f) {
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot open for appending: %s", log->path,
                          strerror(errno));
        free(log);
        return st;
    }
    *out = log;
    return KR_OK;
}

void kr_ft_log_close(kr_ft_log *log) {
    if (!log) return;
    fclose(log->f);
    free(log);
}

const char *kr_ft_log_path(const kr_ft_log *log) { return log->path; }

cJSON *kr_ft_log_event(const char *event) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "event", event);
    cJSON_AddNumberToObject(o, "time", (double)time(NULL));
    return o;
}

kr_status kr_ft_log_write(kr_ft_log *log, cJSON *obj, kr_error *err) {
    if (!log || !obj) {
        cJSON_Delete(obj);
        return KR_OK;
    }
    char *line = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (!line) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", log->path);
    int bad = fputs(line, log->f) < 0 || fputc('\n', log->f) < 0 || fflush(log->f) != 0;
    free(line);
    if (bad)
        return kr_error_set(err, KR_ERR_IO, "%s: cannot write: %s", log->path, strerror(errno));
    return KR_OK;
}
