/* base/fsutil — small filesystem helpers shared by the layers that read and write files. */
#ifndef KR_BASE_FSUTIL_H
#define KR_BASE_FSUTIL_H

#include <stddef.h>

#include "kronos/status.h"
#include "kronos/util.h" /* kr_read_file */

/* mkdir -p: creates every missing component of path (mode 0755); error if path exists and
 * is not a directory. */
kr_status kr_mkdir_p(const char *path, kr_error *err);

/* Opens a file for reading only if it is a regular file (a FIFO, a device or a directory is
 * refused with a message naming the path, never waited on: the open does not block). Returns
 * the descriptor (blocking mode restored) or -1 with err set. *size receives its size. */
KR_PRIVATE int kr_open_regular(const char *path, size_t *size, kr_error *err);

#endif
