/* base/version — the library's version string (CMake's project version, which kronos.h's
 * KRONOS_VERSION must equal: tests/test_install checks it). */
#include "kronos/status.h"

#ifndef KRONOS_VERSION_STRING
#error "KRONOS_VERSION_STRING is defined by src/base/CMakeLists.txt"
#endif

KR_API const char *kr_version(void);
const char *kr_version(void) { return KRONOS_VERSION_STRING; }
