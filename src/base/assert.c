/* base/assert — see assert.h. */
#include "base/assert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void kr_assert_failed(const char *cond, const char *file, int line, const char *func) {
    fprintf(stderr, "kronos: internal error: assertion `%s` failed at %s:%d (%s)\n", cond, file,
            line, func);
    fflush(stderr);
    abort();
}

int kr_mutex_is_locked(pthread_mutex_t *m) {
    const int rc = pthread_mutex_trylock(m);
    if (rc == 0) {
        pthread_mutex_unlock(m);
        return 0;
    }
    return rc == EBUSY;
}
