/*
 * store/store — the market-data store: candles per (symbol, interval) in one SQLite file
 * (the embedded default) or a PostgreSQL database (a postgresql:// or postgres:// URL, which
 * several `kronos serve` replicas share), so `kronos ingest` writes once and `kronos analyze`
 * (and the server) read many times. Both backends hold the same tables with the same meaning;
 * the backend is chosen by the target's scheme (store/store_backend.h).
 *
 * PostgreSQL: the URL is libpq's (postgresql://user:secret@host:5432/db?sslmode=require,
 * or a Unix socket: postgresql:///db?host=/run/postgresql). Messages name it with the password
 * replaced by *** (kr_store_display_name). MVCC: a read sees the last committed upsert and never
 * waits for a writer; upserts of one symbol are serialised by a transaction-scoped advisory
 * lock (of different symbols they run in parallel), a writer waiting longer than the busy
 * timeout fails with KR_ERR_BUSY, writing nothing. The schema version is kept in a table
 * kronos_schema(version, applied_at), one row per applied migration, checked at every open; a
 * version newer than this build's is refused. Connections are kept for reuse by the process
 * (kr_store_close returns an idle one to a small pool), so a handle per request stays cheap.
 * A handle opened with a deadline (kr_store_open_until: a server's request) waits for the
 * database only until then, in poll() on the socket: a frozen server fails the call with
 * KR_ERR_TIMEOUT and its connection is closed, never pooled.
 *
 * SQLite file: WAL journal (readers never block the writer, nor the writer them), a busy timeout
 * for the short exclusive moments, schema versioned with PRAGMA user_version. Tables:
 *   symbols(symbol, interval, first_ts, last_ts, rows, updated_at)   one row per series
 *   candles(symbol, interval, ts, open, high, low, close, volume, amount,
 *           has_volume, has_amount)                                  PRIMARY KEY(symbol, interval, ts)
 *   markets(symbol, market)       the exchange calendar of a symbol (series/calendar.h), if set
 * Timestamps are the naive seconds since 1970 used everywhere in kronos (series/candles.h).
 *
 * Symbols match without regard to case ("aapl" reads and extends the stored "AAPL"): a
 * symbol is stored with the spelling of its first upsert.
 *
 * Names: a symbol or interval is 1..32 characters of [A-Za-z0-9._-^=] ("600977.SH", "^GSPC",
 * "EURUSD=X", "BRK-B"); an interval is also a count and a unit: s, m, min, h, d, w, mo
 * ("5m", "5min", "1h", "1d", "1w").
 *
 * Threads: a kr_store handle is used by one thread at a time; open one handle per thread (or
 * process) for concurrency, which WAL makes safe: opening and reading never wait for a writer
 * (a read sees the last committed upsert), a second writer waits for the first (busy timeout,
 * 10 s by default) and then fails with KR_ERR_BUSY, writing nothing.
 */
#ifndef KR_MARKET_STORE_H
#define KR_MARKET_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/store.h"
#include "series/candles.h"

#define KR_STORE_SCHEMA_VERSION 2 /* 2: markets(symbol, market); version 1 files are upgraded */

/* The store's API is public (kronos/store.h); this header documents the file format. */

#endif
