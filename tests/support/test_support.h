/* Shared helpers for the cmocka tests: fixture paths, file reading, float comparison. */
#ifndef KR_TEST_SUPPORT_H
#define KR_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* 1 in an AddressSanitizer or ThreadSanitizer build (GCC defines __SANITIZE_ADDRESS__ /
 * __SANITIZE_THREAD__, clang has the feature tests). Such a build owns malloc and adds its own
 * shadow memory, so resident-memory bounds and allocation counts are not the program's own. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KR_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KR_TEST_ASAN 1
#endif
#endif
#ifndef KR_TEST_ASAN
#define KR_TEST_ASAN 0
#endif

/* Path under tests/fixtures (static buffer, valid until the next call). */
const char *kr_test_fixture(const char *rel);
/* The one temporary-directory fixture of the tests. kr_test_dir(): the test program's scratch
 * directory, made on first use (mkdtemp under $TMPDIR or /tmp) and removed with everything
 * below it when the program exits (not by forked children; KRONOS_TEST_KEEP_TMP=1 keeps it
 * for a post-mortem). kr_test_fresh_dir(): a new empty directory inside it, for one test or
 * one part of one, so tests never see each other's files. Both strings belong to the fixture
 * (valid until exit): no test frees or removes them, and a test that fails half way leaves
 * nothing behind. NULL only when the directory cannot be made. */
const char *kr_test_dir(void);
const char *kr_test_fresh_dir(void);
/* Removes dir and everything below it (links are removed, never followed); complains on
 * stderr about what it could not remove. */
void kr_test_remove_tree(const char *dir);
/* Writes `len` bytes to path; returns 0 on success. */
int kr_test_write_file(const char *path, const void *data, size_t len);
/* Reads a file into buf (NUL-terminated, truncated to cap - 1); empty if unreadable. */
void kr_test_slurp(const char *path, char *buf, size_t cap);

/* An environment variable for kr_test_in_child: value NULL unsets it. */
typedef struct kr_test_env {
    const char *name, *value;
} kr_test_env;
/* Runs probe() in a forked child after setting env[0 .. n) there, and returns the child's exit
 * code, probe's result (0-255). For what a process decides once, on its first use (the kernel
 * dispatch table): the parent's own choice stays untouched. */
int kr_test_in_child(const kr_test_env *env, int n, int (*probe)(void));

/* Result of running the built `kronos` executable; out/err hold all it printed. */
typedef struct kr_test_run {
    int code; /* exit status, -1 if it did not exit normally */
    char *out;
    char *err;
} kr_test_run;

/* Runs `[env] KR_BINARY_DIR/kronos args` (stdin /dev/null) with stdout and stderr captured in
 * files under dir; env is a prefix like "HF_HOME=/x" or "" (KRONOS_DB is always unset, so a
 * developer's database never leaks into a test). Valid until the next call. */
const kr_test_run *kr_test_kronos(const char *dir, const char *env, const char *args);

/* Max |a-b| over n floats. */
double kr_test_max_abs_diff(const float *a, const float *b, size_t n);

#endif
