/*
 * series/sniff — what a file that is not candle text is, by its first bytes, so a model file,
 * a spreadsheet or a picture given as candles is named as such ("this is not a CSV/JSON candle
 * file (it looks like an Excel workbook)") instead of failing deep in the CSV reader with a
 * quoting error or a header of binary junk.
 */
#include <stdint.h>
#include <string.h>

#include "kronos/series.h"

static int starts(const unsigned char *d, size_t len, const char *magic, size_t n) {
    return len >= n && memcmp(d, magic, n) == 0;
}

/* A safetensors file: an 8-byte little-endian header length, then that many bytes of JSON. */
static int is_safetensors(const unsigned char *d, size_t len) {
    if (len < 10 || d[8] != '{') return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | d[i];
    return n >= 2 && n < ((uint64_t)100 << 20);
}

const char *kr_data_binary_kind(const void *data, size_t len) {
    const unsigned char *d = data;
    if (!d || len == 0) return NULL;
    if (is_safetensors(d, len)) return "a safetensors model file";
    if (starts(d, len, "PK\x03\x04", 4) || starts(d, len, "PK\x05\x06", 4))
        return "a zip archive (an Excel .xlsx workbook, a .npz or a PyTorch checkpoint are zip "
               "files)";
    if (starts(d, len, "\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", 8))
        return "an old Excel .xls workbook (OLE2)";
    if (starts(d, len, "\x89PNG\r\n\x1a\n", 8)) return "a PNG image";
    if (starts(d, len, "\xFF\xD8\xFF", 3)) return "a JPEG image";
    if (starts(d, len, "GIF8", 4)) return "a GIF image";
    if (starts(d, len, "%PDF", 4)) return "a PDF document";
    if (starts(d, len, "\x1F\x8B", 2)) return "gzip-compressed data (decompress it first)";
    if (starts(d, len, "BZh", 3) && len > 3 && d[3] >= '1' && d[3] <= '9')
        return "bzip2-compressed data (decompress it first)";
    if (starts(d, len,
               "\xFD"
               "7zXZ",
               5))
        return "xz-compressed data (decompress it first)";
    if (starts(d, len, "PAR1", 4)) return "a Parquet file (write it as CSV: df.to_csv)";
    if (starts(d, len, "SQLite format 3", 16)) return "an SQLite database";
    if (starts(d, len, "\x93NUMPY", 6)) return "a NumPy .npy array";
    if (starts(d, len,
               "\x7F"
               "ELF",
               4))
        return "an executable";
    if (starts(d, len, "\x80\x02", 2) || starts(d, len, "\x80\x04", 2)) return "a Python pickle";
    if (starts(d, len, "\xFF\xFE", 2) || starts(d, len, "\xFE\xFF", 2))
        return "UTF-16 text (save it as UTF-8 CSV)";
    /* Text has no NUL bytes; any in the first 4 KiB means binary data of some other kind. */
    const size_t n = len < 4096 ? len : 4096;
    if (memchr(d, 0, n)) return "binary data";
    return NULL;
}
