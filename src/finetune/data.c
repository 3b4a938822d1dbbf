/* finetune/data — see data.h. */
#include "finetune/data.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/error.h"
#include "kronos/store.h"
#include "base/fsutil.h"
#include "common/candles_json.h"
#include "kronos/util.h"

/* Candle files are read whole; the CLI's limit for one input. */
#define KR_FT_MAX_FILE_BYTES ((size_t)1 << 30)

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && !strcasecmp(s + n - m, suffix);
}

static void note_dropped(const kr_candles *c, const char *label, kr_ft_note_fn note, void *user) {
    if (!note || !c->amount_dropped[0]) return;
    char line[600];
    snprintf(line, sizeof line,
             "%s: column '%s' ignored: without a volume column, volume and amount are both 0 "
             "(the reference's rule)",
             label, c->amount_dropped);
    note(user, line);
}

static kr_status add_candles(kr_dataset *ds, const char *label, const kr_candles *c,
                             kr_ft_note_fn note, void *user, kr_error *err) {
    note_dropped(c, label, note, user);
    kr_series s = kr_candles_series(c);
    kr_status st = kr_dataset_add(ds, label, &s, err);
    if (st == KR_OK && note) {
        int i = kr_dataset_n_series(ds) - 1;
        int64_t w = 0;
        for (int k = 0; k < KR_N_SPLITS; k++) {
            kr_split_range r = kr_dataset_split_range(ds, i, (kr_split)k);
            int64_t m = r.end - r.begin - kr_dataset_window_rows(ds) + 1;
            w += m > 0 ? m : 0;
        }
        if (w == 0) {
            char line[600];
            snprintf(line, sizeof line,
                     "%s: %lld rows give no window of %d rows in any split: not used", label,
                     (long long)c->n, kr_dataset_window_rows(ds));
            note(user, line);
        }
    }
    return st;
}

static kr_status load_file(kr_dataset *ds, const char *path, kr_ft_note_fn note, void *user,
                           kr_error *err) {
    kr_candles *c = NULL;
    kr_status st;
    if (has_suffix(path, ".json")) {
        char *text = NULL;
        size_t len = 0;
        st = kr_read_file(path, KR_FT_MAX_FILE_BYTES, "candle file", &text, &len, err);
        if (st == KR_OK) st = kr_candles_parse_text(text, len, path, &c, err);
        free(text);
    } else
        st = kr_candles_read_csv(path, &c, err);
    if (st == KR_OK) st = add_candles(ds, path, c, note, user, err);
    kr_candles_free(c);
    return st;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static kr_status load_dir(kr_dataset *ds, const char *dir, kr_ft_note_fn note, void *user,
                          kr_error *err) {
    DIR *d = opendir(dir);
    if (!d) return kr_error_set(err, KR_ERR_IO, "%s: cannot read the directory", dir);
    char **names = NULL;
    int n = 0;
    kr_status st = KR_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' ||
            !(has_suffix(e->d_name, ".csv") || has_suffix(e->d_name, ".json")))
            continue;
        char **grown = realloc(names, (size_t)(n + 1) * sizeof *grown);
        if (grown) names = grown;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = grown ? malloc(len) : NULL;
        if (!path) {
            st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        snprintf(path, len, "%s/%s", dir, e->d_name);
        names[n++] = path;
    }
    closedir(d);
    if (st == KR_OK && n == 0)
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no .csv or .json candle files in it", dir);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        struct stat sb;
        /* Only regular files (a FIFO named x.csv is never waited on). */
        if (st == KR_OK && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode))
            st = load_file(ds, names[i], note, user, err);
        free(names[i]);
    }
    free(names);
    return st;
}

static kr_status load_stored(const kr_finetune_config *cfg, kr_dataset *ds, kr_ft_note_fn note,
                             void *user, kr_error *err) {
    char path[4096];
    kr_status st =
        kr_store_resolve_path(cfg->db && *cfg->db ? cfg->db : NULL, path, sizeof path, err);
    if (st != KR_OK) return st;
    kr_store *store = NULL;
    if ((st = kr_store_open_existing(path, &store, err)) != KR_OK) return st;
    kr_store_entry *list = NULL;
    int64_t n = 0;
    st = kr_store_list(store, NULL, &list, &n, err);
    const char *interval = cfg->interval && *cfg->interval ? cfg->interval : NULL;
    for (int64_t i = 0; st == KR_OK && i < n; i++) {
        const kr_store_entry *e = &list[i];
        int wanted = cfg->all_symbols;
        for (int k = 0; !wanted && k < cfg->symbols.n; k++)
            wanted = !strcasecmp(cfg->symbols.items[k], e->symbol);
        if (!wanted) continue;
        if (interval && kr_store_find_entry(e, 1, NULL, interval) == NULL) continue;
        kr_candles *c = NULL;
        if ((st = kr_store_read(store, e->symbol, e->interval, 0, &c, err)) != KR_OK) break;
        char label[2 * KR_STORE_NAME_MAX + 8];
        snprintf(label, sizeof label, "%s %s", e->symbol, e->interval);
        st = add_candles(ds, label, c, note, user, err);
        kr_candles_free(c);
    }
    /* Every symbol asked for must be there (with the interval, when one was given), once. */
    for (int k = 0; st == KR_OK && k < cfg->symbols.n; k++) {
        const char *sym = cfg->symbols.items[k];
        int found = 0;
        for (int64_t i = 0; i < n; i++)
            if (!strcasecmp(sym, list[i].symbol) &&
                (!interval || kr_store_find_entry(&list[i], 1, NULL, interval)))
                found++;
        if (!found)
            st = kr_error_set(err, KR_ERR_INVALID_ARG, "symbol %s%s%s: not in the store %s", sym,
                              interval ? " at interval " : "", interval ? interval : "", path);
        else if (found > 1 && !interval)
            st = kr_error_set(err, KR_ERR_INVALID_ARG,
                              "symbol %s: the store holds %d intervals of it: choose one with "
                              "kronos.interval (--interval)",
                              sym, found);
    }
    free(list);
    kr_store_close(store);
    return st;
}

kr_status kr_ft_load_data(const kr_finetune_config *cfg, kr_dataset *ds, kr_ft_note_fn note,
                          void *user, kr_error *err) {
    for (int i = 0; i < cfg->data_path.n; i++) {
        const char *p = cfg->data_path.items[i];
        struct stat sb;
        if (stat(p, &sb) != 0)
            return kr_error_set(err, KR_ERR_IO, "data.data_path: %s: no such file or directory", p);
        kr_status st = S_ISDIR(sb.st_mode) ? load_dir(ds, p, note, user, err)
                                           : load_file(ds, p, note, user, err);
        if (st != KR_OK) return st;
    }
    if (cfg->symbols.n || cfg->all_symbols) {
        kr_status st = load_stored(cfg, ds, note, user, err);
        if (st != KR_OK) return st;
    }
    if (kr_dataset_n_series(ds) == 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "no data: set data.data_path (--data FILE|DIR) or kronos.symbols "
                            "(--symbol, --all) with kronos.db");
    return KR_OK;
}
