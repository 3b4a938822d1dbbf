/*
 * store/store_sqlite_none — the SQLite backend's stand-in in a build without it
 * (-DKRONOS_WITH_SQLITE=OFF): a store file is refused, naming the option, and everything else
 * of the store (its names, rows, ranges and the PostgreSQL backend) works as ever.
 */
#include "base/error.h"
#include "store/store_backend.h"

static kr_status unavailable(const char *path, kr_error *err) {
    return kr_error_set(err, KR_ERR_UNSUPPORTED,
                        "%s: built without SQLite (KRONOS_WITH_SQLITE=OFF): only a PostgreSQL "
                        "store (--db postgresql://...) can be opened",
                        path && *path ? path : "database");
}

static kr_status open_none(kr_store *s, const char *target, kr_error *err) {
    (void)s;
    return unavailable(target, err);
}

static void close_none(kr_store *s) { (void)s; }

kr_status kr_store_sqlite_check_writable(const char *path, kr_error *err) {
    return unavailable(path, err);
}

kr_status kr_store_sqlite_check_writable_limited(const char *path, long long full_check_bytes,
                                                 kr_error *err) {
    (void)full_check_bytes;
    return unavailable(path, err);
}

/* Only open is ever called: it fails, so no handle reaches the other operations. */
const kr_store_ops kr_store_sqlite_ops = { .open = open_none, .close = close_none };
