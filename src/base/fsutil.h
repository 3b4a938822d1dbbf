/* base/fsutil — small filesystem helpers shared by the layers that read and write files. */
#ifndef KR_BASE_FSUTIL_H
#define KR_BASE_FSUTIL_H

#include <stddef.h>

#include "kronos/status.h"

/* mkdir -p: creates every missing component of path (mode 0755); error if path exists and
 * is not a directory. */
KR_PRIVATE kr_status kr_mkdir_p(const char *path, kr_error *err);

/* Opens a file for reading only if it is a regular file (a FIFO, a device or a directory is
 * refused with a message naming the path, never waited on: the open does not block). Returns
 * the descriptor (blocking mode restored) or -1 with err set. *size receives its size. */
KR_PRIVATE int kr_open_regular(const char *path, size_t *size, kr_error *err);

/* Reads a whole regular file of at most max_bytes into a NUL-terminated buffer the caller
 * frees. A FIFO, a device or a directory is refused without blocking. `what` names the file's
 * role in messages ("config", "API key file"). */
KR_PRIVATE kr_status kr_read_file(const char *path, size_t max_bytes, const char *what, char **out,
                                  size_t *len, kr_error *err);

#endif
