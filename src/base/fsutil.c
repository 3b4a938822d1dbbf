/* base/fsutil — see fsutil.h. */
#include "base/fsutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"

/* mkdir -p: creates every missing component of path. */
kr_status kr_mkdir_p(const char *path, kr_error *err) {
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            kr_status rc = kr_error_set(err, KR_ERR_IO, "%s: cannot create directory: %s", p,
                                        strerror(errno));
            free(p);
            return rc;
        }
        p[i] = c;
    }
    struct stat sb;
    int ok = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    free(p);
    return ok ? KR_OK : kr_error_set(err, KR_ERR_IO, "%s: not a directory", path);
}
