"""kronos.finetune(): fine-tune a Kronos tokenizer and predictor on candles, on the CPU, with
the kronos C training core (include/kronos/finetune.h) — the pipeline of `kronos finetune`.

    import kronos
    paths = kronos.finetune("config.yaml")                        # the official YAML, as it is
    paths = kronos.finetune({"data": {"data_path": "aapl.csv"},   # or the same as a dict
                             "model_paths": {"base_save_path": "runs/aapl"}},
                            epochs=2, batch_size=16, progress=True)
    paths["predictor_best"]  # a Hugging Face directory: Kronos.from_pretrained loads it

The training runs in the library with the GIL released: other Python threads run meanwhile.
The progress callback (called on the calling thread, GIL held) gets a dict per event; return
True from it to stop: the run then writes a resumable checkpoint (continue with resume=True)
and finetune() raises CancelledError. Ctrl-C does the same and raises KeyboardInterrupt.
"""

import ctypes
import math
import os
import sys

from . import _lib, errors

_EVENTS = ("stage_start", "step", "eval", "saved", "stage_done", "stage_skipped", "info")


def _keys():
    out = []
    for i in range(_lib.kr_finetune_n_keys()):
        k = _lib.kr_finetune_key_at(i).contents
        out.append((k.key.decode(), k.type.decode(), k.flag.decode()))
    return out


def keys():
    """Every config key as "section.key" -> its type ("int", "float", "bool", "string",
    "list")."""
    return {k: t for k, t, _ in _keys()}


def _resolve_short(name, table):
    """A keyword argument's key: "section.key" itself, or a key's last part or its flag
    ("batch_size", "batch-size") when that names one key."""
    if name in table:
        return name
    hits = [k for k, _, flag in _keys()
            if k.split(".", 1)[1] == name or flag == name or flag == name.replace("_", "-")]
    if len(hits) == 1:
        return hits[0]
    raise errors.InvalidArgumentError(
        f"{name}: unknown finetune key" if not hits else
        f"{name}: names several keys ({', '.join(hits)}): write the section too")


def _set(cfg, key, value, table):
    err = _lib.kr_error()
    k = key.encode()
    if table[key] == "list" and isinstance(value, (list, tuple)):
        _lib.check(_lib.kr_finetune_config_set(cfg, k, b"", ctypes.byref(err)), err)
        for item in value:
            _lib.check(_lib.kr_finetune_config_add(cfg, k, os.fsencode(item), ctypes.byref(err)),
                       err)
        return
    if isinstance(value, bool):
        st = _lib.kr_finetune_config_set(cfg, k, b"true" if value else b"false", ctypes.byref(err))
    elif value is None:
        st = _lib.kr_finetune_config_set(cfg, k, b"null", ctypes.byref(err))
    elif isinstance(value, int):
        st = _lib.kr_finetune_config_set(cfg, k, str(value).encode(), ctypes.byref(err))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise errors.InvalidArgumentError(f"{key}: {value} is not a finite number")
        st = _lib.kr_finetune_config_set(cfg, k, repr(value).encode(), ctypes.byref(err))
    elif isinstance(value, (str, os.PathLike)):
        st = _lib.kr_finetune_config_set_string(cfg, k, os.fsencode(value), ctypes.byref(err))
    else:
        raise errors.InvalidArgumentError(
            f"{key}: wrong type: {type(value).__name__} (a number, bool, string or list)")
    _lib.check(st, err)


def _flatten(d, table):
    """{"data": {"lookback_window": 64}} or {"data.lookback_window": 64} -> [(key, value)]."""
    out = []
    for name, value in d.items():
        if not isinstance(name, str):
            raise errors.InvalidArgumentError(f"{name!r}: config keys are strings")
        if isinstance(value, dict):
            if not any(k.startswith(name + ".") for k in table):
                raise errors.InvalidArgumentError(f"{name}: unknown section")
            for sub, v in value.items():
                key = f"{name}.{sub}"
                if key not in table:
                    raise errors.InvalidArgumentError(f"{key}: unknown key")
                if isinstance(v, dict):
                    raise errors.InvalidArgumentError(
                        f"{key}: wrong type: expected a value, got a mapping")
                out.append((key, v))
        elif name in table:
            out.append((name, value))
        else:
            raise errors.InvalidArgumentError(
                f"{name}: unknown key (a section's keys go in a dict, or as 'section.key')")
    return out


def _progress_dict(p):
    d = {"event": _EVENTS[p.event] if 0 <= p.event < len(_EVENTS) else str(p.event),
         "stage": p.stage.decode() if p.stage else None}
    for f in ("epoch", "epochs", "step", "total_steps", "step_in_epoch", "steps_per_epoch",
              "loss", "epoch_loss", "lr", "grad_norm", "val_loss", "val_loss_official", "best_val_loss",
              "tokens_per_second", "elapsed_seconds", "eta_seconds"):
        v = getattr(p, f)
        d[f] = None if isinstance(v, float) and math.isnan(v) else v
    d["path"] = os.fsdecode(p.path) if p.path else None
    d["message"] = p.message.decode("utf-8", "replace") if p.message else None
    return d


class _Printer:
    """progress=True: the CLI's lines on stderr, and its bar when stderr is a terminal."""

    def __init__(self):
        self.tty = sys.stderr.isatty()

    def __call__(self, d):
        ev = d["event"]
        if ev in ("info", "stage_skipped"):
            print(f"kronos finetune: {d['message']}", file=sys.stderr)
        elif ev == "eval":
            print(f"kronos finetune: {d['stage']} epoch {d['epoch']}/{d['epochs']}: validation "
                  f"loss {d['val_loss']}", file=sys.stderr)
        elif ev == "step" and self.tty:
            print(f"\r\033[K[{d['stage']}] epoch {d['epoch']}/{d['epochs']} step {d['step']}/"
                  f"{d['total_steps']} loss {d['loss']:.4f} {d['tokens_per_second']:.0f} tok/s",
                  end="", file=sys.stderr, flush=True)
        elif ev == "stage_done":
            print(f"{chr(13) if self.tty else ''}kronos finetune: {d['stage']} stage done, best "
                  f"validation loss {d['best_val_loss']}", file=sys.stderr)


def finetune(config=None, *, progress=None, **overrides):
    """Runs the fine-tune `config` describes and returns its output paths.

    config: a YAML file path (the official finetune_csv config as it is), a dict (sections of
    keys, or "section.key" entries), or None (defaults: then say what to train on with the
    keyword arguments). Keyword arguments set keys after it: a key's name ("batch_size",
    "epochs", "force", "resume", "data_path", "base_save_path", ...) or "section.key" through
    a dict. progress: None, True (lines on stderr like the CLI) or a callable taking a dict
    (event, stage, epoch, step, loss, val_loss, tokens_per_second, eta_seconds, ...); it may
    return True to stop.

    Returns a dict: base_save_path, tokenizer_best, tokenizer_last, predictor_best,
    predictor_last, log (paths; None for what was not written), tokenizer_best_val_loss,
    predictor_best_val_loss, steps, seconds, tokenizer_ran, predictor_ran.
    Raises a KronosError subclass naming what is wrong (InvalidArgumentError for config
    errors, KronosMemoryError when the run would not fit in memory, NumericError for a loss
    that became NaN, CancelledError when the callback stopped it).
    """
    table = keys()
    err = _lib.kr_error()
    cfg = ctypes.c_void_p()
    _lib.check(_lib.kr_finetune_config_create(ctypes.byref(cfg), ctypes.byref(err)), err)
    try:
        if isinstance(config, (str, os.PathLike)):
            _lib.check(_lib.kr_finetune_config_load_yaml(cfg, os.fsencode(config),
                                                         ctypes.byref(err)), err)
        elif isinstance(config, dict):
            for key, value in _flatten(config, table):
                _set(cfg, key, value, table)
        elif config is not None:
            raise errors.InvalidArgumentError(
                f"config: a YAML path or a dict, not {type(config).__name__}")
        for name, value in overrides.items():
            if isinstance(value, dict):
                raise errors.InvalidArgumentError(f"{name}: pass sections through config")
            _set(cfg, _resolve_short(name, table), value, table)

        user_cb = _Printer() if progress is True else progress
        if user_cb is not None and not callable(user_cb):
            raise errors.InvalidArgumentError("progress: True, None or a callable")
        state = {"interrupted": False, "error": None}

        def on_progress(_user, p):
            try:
                if state["interrupted"] or state["error"]:
                    return 1
                stop = user_cb(_progress_dict(p.contents)) if user_cb else False
                return 1 if stop else 0
            except KeyboardInterrupt:
                state["interrupted"] = True
                return 1
            except BaseException as e:  # noqa: BLE001 - re-raised after the run
                state["error"] = e
                return 1

        cb = _lib.kr_finetune_progress_cb(on_progress)
        res = _lib.kr_finetune_result()
        # ctypes releases the GIL for the call; the callback takes it back for each event.
        st = _lib.kr_finetune_run(cfg, cb, None, ctypes.byref(res), ctypes.byref(err))
        if state["interrupted"]:
            raise KeyboardInterrupt("kronos.finetune stopped: " + err.message.decode(
                "utf-8", "replace"))
        if state["error"] is not None:
            raise state["error"]
        _lib.check(st, err)
        path = lambda b: os.fsdecode(b) if b else None  # noqa: E731
        nan = lambda v: None if math.isnan(v) else v  # noqa: E731
        return {
            "base_save_path": path(res.base_save_path),
            "tokenizer_best": path(res.tokenizer_best),
            "tokenizer_last": path(res.tokenizer_last),
            "predictor_best": path(res.predictor_best),
            "predictor_last": path(res.predictor_last),
            "log": path(res.log_path),
            "tokenizer_best_val_loss": nan(res.tokenizer_best_val_loss),
            "predictor_best_val_loss": nan(res.predictor_best_val_loss),
            "tokenizer_ran": bool(res.tokenizer_ran),
            "predictor_ran": bool(res.predictor_ran),
            "steps": res.steps,
            "seconds": res.seconds,
        }
    finally:
        _lib.kr_finetune_config_free(cfg)
