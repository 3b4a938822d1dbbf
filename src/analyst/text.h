/*
 * analyst/text — a growable string buffer and the number formats shared by the summary and
 * the Markdown / HTML renderers, so "+1.23%" or "207.57" reads the same everywhere.
 */
#ifndef KR_ANALYST_TEXT_H
#define KR_ANALYST_TEXT_H

#include <stddef.h>

#include "base/error.h"
#include "kronos.h"

typedef struct kr_sb {
    char *data;     /* NUL-terminated; NULL until the first append */
    size_t len, cap;
    int oom;        /* an allocation failed: later appends are ignored */
} kr_sb;

void kr_sb_append(kr_sb *sb, const char *s);
void kr_sb_appendn(kr_sb *sb, const char *s, size_t n);
void kr_sb_appendf(kr_sb *sb, const char *fmt, ...) KR_PRINTF(2, 3);
/* Appends s with & < > " ' escaped for HTML text and attribute values. */
void kr_sb_append_html(kr_sb *sb, const char *s);
/* Hands the text to the caller (who frees it) or reports the allocation failure; the
 * buffer is reset either way. */
kr_status kr_sb_finish(kr_sb *sb, char **out, kr_error *err);
void kr_sb_free(kr_sb *sb);

/* Formatters write into buf (>= 32 bytes) and return it; NaN prints as "n/a". */
/* A price with 2 decimals (more below 1, e.g. 0.001234). */
char *kr_fmt_price(double x, char *buf);
/* A fraction as a signed percentage: 0.0123 -> "+1.23%". */
char *kr_fmt_pct_signed(double frac, char *buf);
/* A fraction as an unsigned percentage with `dec` decimals: 0.56 -> "56%" (dec 0). */
char *kr_fmt_pct(double frac, int dec, char *buf);
/* A plain number with `dec` decimals. */
char *kr_fmt_num(double x, int dec, char *buf);
/* A number with `sig` significant digits (for values of any scale, e.g. MACD). */
char *kr_fmt_sig(double x, int sig, char *buf);
/* A large count compactly: 1234567 -> "1.23M". */
char *kr_fmt_compact(double x, char *buf);

#endif
