/*
 * base/assert — KR_ASSERT(cond): an invariant the code relies on and its comments state (a
 * lock held, the thread that may run a function, a shape, a reference count), checked in
 * debug and sanitizer builds (KR_ASSERTS=1: CMAKE_BUILD_TYPE Debug, KRONOS_SANITIZE,
 * KRONOS_TSAN, KRONOS_FUZZ) and compiled out of Release builds, where it costs nothing and its
 * condition is not evaluated (it must have no side effect).
 *
 * A failed assertion is a bug in kronos, not bad input (bad input gets a kr_status): the
 * message names the condition and the place on stderr and the process aborts, so the sanitizer
 * or the debugger shows where. This is the one abort of the library, and only in those builds.
 */
#ifndef KR_BASE_ASSERT_H
#define KR_BASE_ASSERT_H

#include <pthread.h>

#include "kronos/status.h"

#if defined(KR_ASSERTS) && KR_ASSERTS
#define KR_ASSERT(cond) ((cond) ? (void)0 : kr_assert_failed(#cond, __FILE__, __LINE__, __func__))
/* Whether the calling thread may hold m: trylock fails (EBUSY) while anyone holds it, so a
 * mutex found free was certainly not held by the caller. */
#define KR_ASSERT_LOCKED(m) KR_ASSERT(kr_mutex_is_locked(m))
#else
#define KR_ASSERT(cond) ((void)sizeof(!(cond)))
#define KR_ASSERT_LOCKED(m) ((void)sizeof(m))
#endif

/* Prints "kronos: internal error: assertion `cond` failed at file:line (function)" and aborts. */
KR_PRIVATE void kr_assert_failed(const char *cond, const char *file, int line, const char *func);
/* 1 when m is locked (by any thread); a free mutex is left free. */
KR_PRIVATE int kr_mutex_is_locked(pthread_mutex_t *m);

#endif
