/*
 * common/candles_input — one candle input of a front end (`kronos forecast --input`, `kronos
 * ingest FILE`): a file or standard input, CSV or JSON, read the same way whichever command asks.
 */
#ifndef KR_COMMON_CANDLES_INPUT_H
#define KR_COMMON_CANDLES_INPUT_H

#include <stddef.h>
#include <stdio.h>

#include "kronos.h"
#include "kronos/series.h"

/* The most bytes one candle input may hold (a file or standard input): 1 GiB. */
#define KR_CANDLE_INPUT_MAX ((size_t)1 << 30)

/* Reads one candle input: "-" is standard input; JSON (a .json name, or text that starts with
 * '{' or '[' past a BOM and blanks) goes through the JSON candle reader (every layout the HTTP
 * API takes, pandas frames included: common/candles_json.h), anything else through the CSV
 * reader. Errors name the file ("stdin" for "-"), line or field. Caller owns *out
 * (kr_candles_free). */
KR_PRIVATE kr_status kr_candles_load(const char *path, kr_candles **out, kr_error *err);

/* Reads all of stream (at most max bytes) into a NUL-terminated buffer the caller frees; what
 * names it in errors ("standard input"). */
KR_PRIVATE kr_status kr_read_stream(FILE *stream, size_t max, const char *what, char **out,
                                    size_t *len, kr_error *err);

/* A whole regular text file of at most max_bytes, for a front end's other inputs (a watch list,
 * an API key file): base/fsutil's kr_read_file, whose rules (a FIFO, a device or a directory
 * refused without blocking; what names the file's role in messages) every input shares. */
KR_PRIVATE kr_status kr_input_read_file(const char *path, size_t max_bytes, const char *what,
                                        char **out, size_t *len, kr_error *err);

#endif
