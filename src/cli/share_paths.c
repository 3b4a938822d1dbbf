/* cli/share_paths — see share_paths.h. */
#include "cli/share_paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The directory holding the running executable. */
static int exe_dir(char *out, size_t cap) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return -1;
    *slash = '\0';
    snprintf(out, cap, "%s", buf[0] ? buf : "/");
    return 0;
}

int kr_share_path(const char *rel, char *out, size_t cap) {
    const char *home = getenv("KRONOS_HOME");
    if (home && *home) {
        snprintf(out, cap, "%s/%s", home, rel);
        return 0;
    }
    char dir[PATH_MAX], cand[PATH_MAX + 32];
    if (exe_dir(dir, sizeof dir) != 0) {
        snprintf(out, cap, "%s", rel);
        return -1;
    }
    snprintf(cand, sizeof cand, "%s/../share/kronos", dir); /* installed: <prefix>/bin */
    if (!is_dir(cand)) snprintf(cand, sizeof cand, "%s/share/kronos", dir); /* build tree */
    int found = is_dir(cand);
    snprintf(out, cap, "%s/%s", cand, rel);
    return found ? 0 : -1;
}
