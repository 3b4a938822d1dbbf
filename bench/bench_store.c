/*
 * bench_store — how fast the candle store takes and gives candles, on either backend (not part
 * of ctest): where the database becomes the bottleneck of a scaled-out deployment
 * (docs/scaling.md).
 *
 *   bench_store --db FILE|postgresql://... [--symbols 200] [--history 2000] [--bars 5]
 *               [--reads 2000] [--read-rows 512]
 *
 * 1. bulk: one upsert of `history` candles per symbol (an initial ingest), rows/s;
 * 2. per bar: every symbol gets one new candle per bar, one upsert (transaction) each, as a
 *    feed writes at a bar close: upserts/s;
 * 3. reads: the newest `read-rows` candles of a random symbol, each through a fresh handle
 *    (as the server opens one per request; PostgreSQL's come from the connection pool),
 *    reads/s.
 * Output: one Markdown table row per phase. The store should be empty (a new file or database).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "store/store.h"

static kr_candles *make(int64_t start, int64_t n, double base) {
    kr_candles *c = calloc(1, sizeof *c);
    c->n = n;
    c->timestamps = malloc((size_t)n * sizeof *c->timestamps);
    c->values = malloc((size_t)n * KR_N_FEATURES * sizeof *c->values);
    c->has_volume = c->has_amount = 1;
    for (int64_t i = 0; i < n; i++) {
        c->timestamps[i] = 1704067200 + (start + i) * 300; /* 5-minute bars */
        double close = base + 0.01 * (double)((start + i) % 97);
        double *v = c->values + i * KR_N_FEATURES;
        v[0] = close - 0.01;
        v[1] = close + 0.02;
        v[2] = close - 0.02;
        v[3] = close;
        v[4] = 1000.0;
        v[5] = 1000.0 * close;
    }
    return c;
}

static int fail(const char *what, const kr_error *err) {
    fprintf(stderr, "bench_store: %s: %s\n", what, err->message);
    return 1;
}

int main(int argc, char **argv) {
    const char *db = NULL;
    int symbols = 200, history = 2000, bars = 5, reads = 2000, read_rows = 512;
    static const struct option longopts[] = {
        { "db", required_argument, NULL, 'd' },
        { "symbols", required_argument, NULL, 's' },
        { "history", required_argument, NULL, 'H' },
        { "bars", required_argument, NULL, 'b' },
        { "reads", required_argument, NULL, 'r' },
        { "read-rows", required_argument, NULL, 'R' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 's': symbols = atoi(optarg); break;
        case 'H': history = atoi(optarg); break;
        case 'b': bars = atoi(optarg); break;
        case 'r': reads = atoi(optarg); break;
        case 'R': read_rows = atoi(optarg); break;
        default:
            fputs("usage: bench_store --db FILE|URL [--symbols N] [--history N] [--bars N] "
                  "[--reads N] [--read-rows N]\n",
                  stderr);
            return 2;
        }
    }
    if (!db || symbols < 1 || history < 1 || bars < 1 || reads < 1 || read_rows < 1) {
        fputs("bench_store: --db is required; counts must be positive\n", stderr);
        return 2;
    }
    char shown[1024];
    kr_store_display_name(db, shown, sizeof shown);
    const char *backend = kr_store_is_url(db) ? "PostgreSQL" : "SQLite";
    kr_error err = { 0 };
    kr_store *s = NULL;
    if (kr_store_open(db, &s, &err) != KR_OK) return fail("open", &err);

    double t0 = kr_now_seconds();
    for (int i = 0; i < symbols; i++) {
        char sym[32];
        snprintf(sym, sizeof sym, "S%04d", i);
        kr_candles *cs = make(0, history, 10.0 + i);
        kr_status st = kr_store_upsert(s, sym, "5m", cs, &err);
        kr_candles_free(cs);
        if (st != KR_OK) return fail("bulk upsert", &err);
    }
    double bulk_s = kr_now_seconds() - t0;

    t0 = kr_now_seconds();
    for (int b = 0; b < bars; b++)
        for (int i = 0; i < symbols; i++) {
            char sym[32];
            snprintf(sym, sizeof sym, "S%04d", i);
            kr_candles *cs = make(history + b, 1, 10.0 + i);
            kr_status st = kr_store_upsert(s, sym, "5m", cs, &err);
            kr_candles_free(cs);
            if (st != KR_OK) return fail("per-bar upsert", &err);
        }
    double bar_s = kr_now_seconds() - t0;
    kr_store_close(s);

    unsigned long long x = 88172645463325252ULL;
    t0 = kr_now_seconds();
    for (int r = 0; r < reads; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char sym[32];
        snprintf(sym, sizeof sym, "S%04d", (int)(x % (unsigned long long)symbols));
        kr_candles *cs = NULL;
        if (kr_store_open(db, &s, &err) != KR_OK ||
            kr_store_read(s, sym, "5m", read_rows, &cs, &err) != KR_OK)
            return fail("read", &err);
        kr_candles_free(cs);
        kr_store_close(s);
    }
    double read_s = kr_now_seconds() - t0;

    printf("| store | phase | operations | seconds | rate |\n|---|---|---:|---:|---:|\n");
    printf("| %s | bulk ingest (%d symbols x %d candles, one upsert each) | %d | %.2f | %.0f "
           "candles/s |\n",
           backend, symbols, history, symbols, bulk_s, (double)symbols * history / bulk_s);
    printf("| %s | one new bar per symbol (%d bars x %d symbols, one upsert each) | %d | %.2f | "
           "%.0f upserts/s |\n",
           backend, bars, symbols, bars * symbols, bar_s, bars * symbols / bar_s);
    printf("| %s | read the newest %d candles, a handle per read | %d | %.2f | %.0f reads/s |\n",
           backend, read_rows, reads, read_s, reads / read_s);
    fprintf(stderr, "(store: %s)\n", shown);
    return 0;
}
