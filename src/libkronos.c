/* libkronos.so is the layers' objects, linked whole (CMakeLists.txt); CMake needs one source
 * of its own for the target, and this one records which header version it was built with. */
#include "kronos.h"

const char kr_library_header_version[] = "kronos " KRONOS_VERSION;
