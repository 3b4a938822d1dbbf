/*
 * store/store_pg_none — the PostgreSQL backend's stand-in in a build without libpq
 * (-DKRONOS_WITH_PG=OFF): a postgresql:// target is refused, naming the option.
 */
#include "base/error.h"
#include "store/store_backend.h"

static kr_status open_none(kr_store *s, const char *target, kr_error *err) {
    (void)target;
    return kr_error_set(err, KR_ERR_UNSUPPORTED,
                        "%s: built without PostgreSQL (KRONOS_WITH_PG=OFF): use a store file",
                        s->path[0] ? s->path : "database");
}

static void close_none(kr_store *s) { (void)s; }

/* Only open is ever called: it fails, so no handle reaches the other operations. */
const kr_store_ops kr_store_pg_ops = { .open = open_none, .close = close_none };
