"""1,000 predict calls in a loop do not grow the process's resident memory beyond a small
bound: every kr_forecast is freed after its numbers are copied out."""

import os


def _rss_kb():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def test_thousand_predicts_do_not_leak(predictor, candles):
    df = candles.iloc[:64]
    y = candles.iloc[64:80]["timestamps"]
    kw = dict(pred_len=16, sample_count=4, return_paths=True, quantiles=[0.5])
    for _ in range(100):  # warm-up: arenas, pandas caches, the prefix cache's entry
        predictor.predict(df, None, y, **kw)
    before = _rss_kb()
    for _ in range(1000):
        predictor.predict(df, None, y, **kw)
    grown = _rss_kb() - before
    # A kept result is ~12 KB here (4 paths of 16 candles, tokens, mean, stamps), so a leak
    # would add ~12 MB over the loop.
    assert grown < 3 * 1024, f"RSS grew by {grown} KB over 1000 calls"
