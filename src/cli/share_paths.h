/*
 * cli/share_paths — where the binary finds what it ships with (the demo model, the example
 * candles, the web page): $KRONOS_HOME if set, else relative to the executable itself —
 * <prefix>/bin/kronos reads <prefix>/share/kronos/... when installed, and the build tree
 * mirrors that layout next to the uninstalled binary (<build>/share/kronos). Never a path
 * compiled in, so an installed binary does not depend on the source or build tree.
 */
#ifndef KR_CLI_SHARE_PATHS_H
#define KR_CLI_SHARE_PATHS_H

#include <stddef.h>

/* Writes <share dir>/<rel> into out (cap bytes). Returns 0, or -1 when no share directory is
 * found (out then holds the path tried, for the message). */
int kr_share_path(const char *rel, char *out, size_t cap);

#endif
