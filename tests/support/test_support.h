/* Shared helpers for the cmocka tests: fixture paths, file reading, float comparison. */
#ifndef KR_TEST_SUPPORT_H
#define KR_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Path under tests/fixtures (static buffer, valid until the next call). */
const char *kr_test_fixture(const char *rel);
/* Fresh empty temp directory (mkdtemp under $TMPDIR or /tmp); caller owns the string. */
char *kr_test_tmpdir(void);
/* Writes `len` bytes to path; returns 0 on success. */
int kr_test_write_file(const char *path, const void *data, size_t len);
/* Max |a-b| over n floats. */
double kr_test_max_abs_diff(const float *a, const float *b, size_t n);

#endif
