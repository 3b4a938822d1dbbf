"""predict's verbose=True: a progress bar over the engine's decode steps (its STEP events),
drawn by tqdm when it is importable (Debian: python3-tqdm), as the official code's trange
draws one, else by a plain line on stderr."""

import sys
import threading
import time


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class _Line:
    """tqdm's part that predict uses, as one stderr line: redrawn in place on a terminal,
    written once at the end elsewhere (a log gets no stream of carriage returns)."""

    def __init__(self, total, desc, unit):
        self.total, self.desc, self.unit = total, desc, unit
        self.n = 0
        self._start = time.monotonic()
        self._tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self._drawn = -1

    def _text(self):
        return (f"{self.desc}: {self.n}/{self.total} {self.unit}s "
                f"({time.monotonic() - self._start:.1f} s)")

    def update(self, k):
        self.n += k
        pct = 100 * self.n // max(self.total, 1)
        if self._tty and pct != self._drawn:
            self._drawn = pct
            sys.stderr.write("\r" + self._text())
            sys.stderr.flush()

    def close(self):
        sys.stderr.write(("\r" if self._tty else "") + self._text() + "\n")
        sys.stderr.flush()


class Progress:
    """Decode steps done, of pred_len per series. step(key, step) takes the engine's events in
    any order (several series interleave in one batch); the bar moves by the new steps."""

    def __init__(self, pred_len, n_series):
        total = pred_len * n_series
        desc = "kronos forecast" if n_series == 1 else f"kronos forecast ({n_series} series)"
        tqdm = _tqdm()
        if tqdm is not None:
            self._bar = tqdm(total=total, desc=desc, unit="step", file=sys.stderr)
        else:
            self._bar = _Line(total, desc, "step")
        self._done = {}
        self._lock = threading.Lock()

    def step(self, key, step):
        with self._lock:
            new = step - self._done.get(key, 0)
            if new > 0:
                self._done[key] = step
                self._bar.update(new)

    def close(self):
        with self._lock:
            self._bar.close()
