/* base/fsutil — small filesystem helpers shared by the layers that write directories. */
#ifndef KR_BASE_FSUTIL_H
#define KR_BASE_FSUTIL_H

#include "kronos.h"

/* mkdir -p: creates every missing component of path (mode 0755); error if path exists and
 * is not a directory. */
kr_status kr_mkdir_p(const char *path, kr_error *err);

#endif
