/*
 * analyst/text — the number formats shared by the summary and
 * the Markdown / HTML renderers, so "+1.23%" or "207.57" reads the same everywhere.
 */
#ifndef KR_ANALYST_TEXT_H
#define KR_ANALYST_TEXT_H

#include <stddef.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "kronos.h"

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

/* A figure with its Monte Carlo standard error, into buf (>= 64 bytes): a fraction as a
 * percentage "3.77% \u00b1 0.90%" (sign: "+3.83% \u00b1 0.45%"), a probability "81% \u00b1 7 pp"
 * (percentage points). A NaN error prints the figure alone. */
char *kr_fmt_pm_pct(double frac, double se, int dec, int sign, char *buf);
char *kr_fmt_pm_prob(double p, double se, char *buf);
/* The error alone, as those print it: "\u00b1 7 pp" ("\u00b1 <1 pp" below half a point),
 * "\u00b1 0.45%"; "" for NaN. buf holds 32 bytes. */
char *kr_fmt_se_pp(double se, char *buf);
char *kr_fmt_se_pct(double se, int dec, char *buf);
/* A price with its standard error at the price's decimals: "207.57 \u00b1 0.45" (buf >= 64
 * bytes); the error alone "\u00b1 0.45", "\u00b1 <0.01" when it shows as zero (buf >= 32). */
char *kr_fmt_pm_price(double x, double se, char *buf);
char *kr_fmt_se_price(double se, double price, char *buf);

/* Text from outside (a language model, its server) made safe to print anywhere: appends the
 * n bytes of s to out as valid UTF-8 (an invalid, overlong or surrogate sequence becomes
 * U+FFFD), with every control character (C0, DEL, C1, so no terminal escape survives) and
 * every bidirectional override (U+202A..U+202E, U+2066..U+2069) made a space; CR is dropped.
 * keep_lines keeps newlines and tabs (prose); otherwise they become spaces too (one line). */
void kr_text_clean(kr_sb *out, const char *s, size_t n, int keep_lines);
/* Cuts a UTF-8 sequence that a bounded copy (snprintf into a fixed buffer) left incomplete at
 * the end of s. */
void kr_text_cut_partial(char *s);

#endif
