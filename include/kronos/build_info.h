/*
 * kronos/build_info.h — what a build of kronos is, for `kronos version` and bug reports: the
 * version, commit, build type, compiler, kernel rows and the run-time versions of the
 * libraries the build's options linked. Part of libkronos-tools (it names libraries the core
 * does not link).
 */
#ifndef KRONOS_BUILD_INFO_H
#define KRONOS_BUILD_INFO_H

#include "kronos.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What this build is (`kronos version`): all strings static. */
typedef struct kr_build_info {
    const char *version; /* kr_version() */
    const char *git_commit; /* the source's commit when it was configured, or "unknown" */
    const char *build_type; /* CMake's: Release, RelWithDebInfo, Debug, ... */
    const char *compiler; /* name and version */
    const char *isa_active; /* the kernels in use now: scalar, avx2, avx512 */
    const char *isa_supported; /* every row this CPU runs: "scalar avx2 avx512" */
    const char *libraries; /* linked libraries with their run-time versions */
} kr_build_info;
KR_API void kr_get_build_info(kr_build_info *out);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_BUILD_INFO_H */
