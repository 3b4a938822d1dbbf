"""ctypes view of libkronos.so: the structures of include/kronos.h and the function prototypes.

Kept in one place so that a change of the C header has one Python counterpart to update; the
layouts are checked at import against the library's own defaults (see _check_layout).
"""

import ctypes
import os

from . import errors

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libkronos.so.0"
# The libraries on top of the core (the fine-tuning pipeline, the backtest): next to it.
_TOOLS_SONAME = "libkronos-tools.so.0"


class kr_error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 512),
                ("field", ctypes.c_char * 64)]


class kr_model_params(ctypes.Structure):
    _fields_ = [("quant", ctypes.c_char_p), ("quant_group", ctypes.c_int),
                ("allow_nonfinite", ctypes.c_int), ("no_mmap", ctypes.c_int)]


class kr_model_info(ctypes.Structure):
    _fields_ = [
        ("d_model", ctypes.c_int), ("n_layers", ctypes.c_int), ("n_heads", ctypes.c_int),
        ("ff_dim", ctypes.c_int), ("tok_d_model", ctypes.c_int), ("tok_n_heads", ctypes.c_int),
        ("tok_ff_dim", ctypes.c_int), ("tok_enc_blocks", ctypes.c_int),
        ("tok_dec_blocks", ctypes.c_int), ("s1_bits", ctypes.c_int), ("s2_bits", ctypes.c_int),
        ("learn_te", ctypes.c_int), ("n_params", ctypes.c_size_t),
        ("weight_bytes", ctypes.c_size_t), ("load_seconds", ctypes.c_double),
        ("quant", ctypes.c_char * 8), ("quant_method", ctypes.c_char * 16),
        ("quant_group", ctypes.c_int), ("quant_seconds", ctypes.c_double),
        ("demo", ctypes.c_int), ("source", ctypes.c_char * 256),
    ]


class kr_series(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_int64), ("timestamps", ctypes.c_void_p), ("values", ctypes.c_void_p),
        ("has_volume", ctypes.c_int), ("has_amount", ctypes.c_int),
        ("future_timestamps", ctypes.c_void_p),
    ]


class kr_forecast_params(ctypes.Structure):
    _fields_ = [
        ("pred_len", ctypes.c_int), ("lookback", ctypes.c_int), ("max_context", ctypes.c_int),
        ("paths", ctypes.c_int), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int),
        ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64), ("window", ctypes.c_int),
        ("clip", ctypes.c_float), ("keep_paths", ctypes.c_int), ("first_path", ctypes.c_int),
        ("prenormalized", ctypes.c_int),
        ("norm", ctypes.c_int), ("norm_refresh", ctypes.c_int),
    ]


class kr_context_params(ctypes.Structure):
    _fields_ = [
        ("n_threads", ctypes.c_int), ("kv_dtype", ctypes.c_char_p),
        ("max_batch_tokens", ctypes.c_int), ("max_running", ctypes.c_int),
        ("max_queue", ctypes.c_int), ("batch_wait_ms", ctypes.c_int),
        ("kv_budget_bytes", ctypes.c_size_t), ("prefix_cache", ctypes.c_int),
        ("static_batching", ctypes.c_int), ("background_share", ctypes.c_double),
        ("background_min_rows", ctypes.c_int), ("background_step_rows", ctypes.c_int),
        ("tune", ctypes.c_int),
        ("target_queue_p95_s", ctypes.c_double), ("target_ttft_p95_s", ctypes.c_double),
        ("abort_callback", ctypes.c_void_p), ("abort_user", ctypes.c_void_p),
        ("log", ctypes.c_void_p), ("log_user", ctypes.c_void_p),
        ("tune_window_s", ctypes.c_double), ("tune_relax_s", ctypes.c_double),
        ("profile", ctypes.c_int), ("backfill", ctypes.c_int),
    ]


class kr_request_params(ctypes.Structure):
    _fields_ = [
        ("deadline_s", ctypes.c_double), ("priority", ctypes.c_int),
        ("on_event", ctypes.c_void_p), ("user", ctypes.c_void_p),
        ("should_abort", ctypes.c_void_p), ("abort_user", ctypes.c_void_p),
        ("wait_for_room", ctypes.c_int), ("static_batch_rows", ctypes.c_int),
        ("batch_wait_ms", ctypes.c_int),
        ("seq_options", ctypes.c_void_p),
    ]


class kr_request_stats(ctypes.Structure):
    _fields_ = [
        ("prefill_tokens", ctypes.c_int64), ("cached_tokens", ctypes.c_int64),
        ("generated_tokens", ctypes.c_int64), ("queue_seconds", ctypes.c_double),
        ("ttft_seconds", ctypes.c_double), ("total_seconds", ctypes.c_double),
    ]


KR_EVENT_STEP = 1


class kr_event(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int), ("id", ctypes.c_uint64), ("index", ctypes.c_int),
        ("step", ctypes.c_int), ("pred_len", ctypes.c_int), ("result", ctypes.c_void_p),
        ("error", kr_error), ("stats", kr_request_stats),
    ]


# kr_event_callback: called on the engine thread (ctypes takes the interpreter's lock for it).
kr_event_callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(kr_event))


KR_TENSOR_MAX_DIMS = 8


class kr_tensor_view(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("stored_dtype", ctypes.c_char_p),
        ("ndim", ctypes.c_int), ("shape", ctypes.c_int64 * KR_TENSOR_MAX_DIMS),
        ("numel", ctypes.c_int64), ("data", ctypes.c_void_p), ("is_buffer", ctypes.c_int),
        ("converted", ctypes.c_int),
    ]


PROFILE_PARTS = ("gemm", "attention", "norm_act", "sampling", "tokenizer_encode",
                 "tokenizer_decode", "other")


class kr_profile_entry(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_double), ("flops", ctypes.c_double),
                ("bytes", ctypes.c_double), ("calls", ctypes.c_int64)]


class kr_step_profile(ctypes.Structure):
    _fields_ = [
        ("enabled", ctypes.c_int), ("seconds_steps", ctypes.c_double),
        ("part", kr_profile_entry * len(PROFILE_PARTS)), ("rerun", kr_profile_entry),
        ("pool_regions", ctypes.c_int64), ("seconds_pool_wait", ctypes.c_double),
    ]

    def as_dict(self):
        """The profile as plain numbers (None when the context ran without it)."""
        if not self.enabled:
            return None
        entry = lambda e: {n: getattr(e, n) for n, _ in e._fields_}
        return {"seconds_steps": self.seconds_steps,
                "parts": {name: entry(self.part[i]) for i, name in enumerate(PROFILE_PARTS)},
                "rerun": entry(self.rerun), "pool_regions": self.pool_regions,
                "seconds_pool_wait": self.seconds_pool_wait}


class kr_forecast_stats(ctypes.Structure):
    _fields_ = [
        ("prefill_tokens", ctypes.c_int64), ("cached_tokens", ctypes.c_int64),
        ("decode_tokens", ctypes.c_int64), ("window_recomputes", ctypes.c_int64),
        ("reused_tokens", ctypes.c_int64),
        ("kv_bytes", ctypes.c_size_t), ("seconds_total", ctypes.c_double),
        ("seconds_prefill", ctypes.c_double), ("seconds_decode", ctypes.c_double),
        ("seconds_tokenizer", ctypes.c_double), ("seconds_queue", ctypes.c_double),
        ("seconds_ttft", ctypes.c_double), ("profile", kr_step_profile),
    ]


class kr_finetune_key(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("type", ctypes.c_char_p), ("flag", ctypes.c_char_p),
                ("default_value", ctypes.c_char_p), ("ignored", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


class kr_finetune_progress(ctypes.Structure):
    _fields_ = [
        ("event", ctypes.c_int), ("stage", ctypes.c_char_p), ("epoch", ctypes.c_int),
        ("epochs", ctypes.c_int), ("step", ctypes.c_int64), ("total_steps", ctypes.c_int64),
        ("step_in_epoch", ctypes.c_int64), ("steps_per_epoch", ctypes.c_int64),
        ("loss", ctypes.c_double), ("epoch_loss", ctypes.c_double), ("lr", ctypes.c_double),
        ("grad_norm", ctypes.c_double),
        ("val_loss", ctypes.c_double), ("val_loss_official", ctypes.c_double),
        ("best_val_loss", ctypes.c_double), ("tokens_per_second", ctypes.c_double),
        ("elapsed_seconds", ctypes.c_double), ("eta_seconds", ctypes.c_double),
        ("path", ctypes.c_char_p), ("message", ctypes.c_char_p),
    ]


FINETUNE_PATH_MAX = 4096


class kr_finetune_result(ctypes.Structure):
    _fields_ = [
        ("base_save_path", ctypes.c_char * FINETUNE_PATH_MAX),
        ("tokenizer_best", ctypes.c_char * FINETUNE_PATH_MAX),
        ("tokenizer_last", ctypes.c_char * FINETUNE_PATH_MAX),
        ("predictor_best", ctypes.c_char * FINETUNE_PATH_MAX),
        ("predictor_last", ctypes.c_char * FINETUNE_PATH_MAX),
        ("log_path", ctypes.c_char * FINETUNE_PATH_MAX),
        ("tokenizer_ran", ctypes.c_int), ("predictor_ran", ctypes.c_int),
        ("tokenizer_best_val_loss", ctypes.c_double), ("predictor_best_val_loss", ctypes.c_double),
        ("steps", ctypes.c_int64), ("stopped", ctypes.c_int), ("seconds", ctypes.c_double),
    ]


def _candidates():
    """Where the library is looked for, first match wins (README "Finding the library")."""
    env = os.environ.get("KRONOS_LIBRARY")
    if env:
        return [("$KRONOS_LIBRARY", env)]
    out = [("bundled", os.path.join(_HERE, _SONAME))]
    # A source checkout: python/kronos -> <repo>/build/release/lib.
    repo = os.path.dirname(os.path.dirname(_HERE))
    for build in ("release", "relwithdebinfo", "debug"):
        out.append(("build tree", os.path.join(repo, "build", build, "lib", _SONAME)))
    out.append(("system loader path", _SONAME))
    return out


def _load():
    tried = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{where}: {path} (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{where}: {e}")
    raise ImportError(
        "kronos: cannot load libkronos.so.0; tried " + "; ".join(tried) +
        ". Build it (cmake --build build/release) or set KRONOS_LIBRARY to its path.")


lib, library_path = _load()

_P = ctypes.POINTER
_c = ctypes.c_void_p
_status = ctypes.c_int


def _proto(name, restype, *argtypes, where=None):
    fn = getattr(lib if where is None else where, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


def _load_tools():
    """libkronos-tools.so.0 from the core library's directory (else the loader path), or the
    reason it is not there. The core stays usable without it: forecasting needs the core only."""
    d = os.path.dirname(library_path)
    path = os.path.join(d, _TOOLS_SONAME) if d else _TOOLS_SONAME
    try:
        return ctypes.CDLL(path), None
    except OSError as e:
        return None, f"kronos: {_TOOLS_SONAME} not found beside {library_path} ({e})"


tools, _tools_missing = _load_tools()


def _tools_proto(name, restype, *argtypes):
    """A function of libkronos-tools; without that library, one raising UnsupportedError."""
    if tools is not None:
        return _proto(name, restype, *argtypes, where=tools)

    def unavailable(*args, **kwargs):
        raise errors.UnsupportedError(_tools_missing)
    return unavailable


kr_version = _proto("kr_version", ctypes.c_char_p)
kr_strerror = _proto("kr_strerror", ctypes.c_char_p, ctypes.c_int)
kr_model_default_params = _proto("kr_model_default_params", kr_model_params)
kr_model_load = _proto("kr_model_load", _status, ctypes.c_char_p, ctypes.c_char_p,
                       _P(kr_model_params), _P(_c), _P(kr_error))
kr_model_free = _proto("kr_model_free", None, _c)
kr_model_get_info = _proto("kr_model_get_info", None, _c, _P(kr_model_info))
kr_forecast_default_params = _proto("kr_forecast_default_params", kr_forecast_params)
kr_context_default_params = _proto("kr_context_default_params", kr_context_params)
kr_context_create = _proto("kr_context_create", _status, _c, _P(kr_context_params), _P(_c),
                           _P(kr_error))
kr_context_free = _proto("kr_context_free", None, _c)
kr_request_default_params = _proto("kr_request_default_params", kr_request_params)
# One batch call since 0.3 (the request parameters, NULL for the defaults, were _ex's before).
kr_forecast_run_batch = _proto("kr_forecast_run_batch", _status, _c, _P(kr_series), ctypes.c_int,
                               _P(kr_forecast_params), _P(kr_request_params), _P(_c),
                               _P(kr_error))
# The library's own abort check, set as should_abort with an int flag as abort_user: the engine
# thread polls it without entering Python (a ctypes callback would take the GIL every step).
kr_abort_flag = ctypes.cast(lib.kr_abort_flag, ctypes.c_void_p).value
kr_forecast_free = _proto("kr_forecast_free", None, _c)
kr_forecast_pred_len = _proto("kr_forecast_pred_len", ctypes.c_int, _c)
kr_forecast_paths = _proto("kr_forecast_paths", ctypes.c_int, _c)
kr_forecast_lookback = _proto("kr_forecast_lookback", ctypes.c_int, _c)
kr_forecast_timestamps = _proto("kr_forecast_timestamps", _P(ctypes.c_int64), _c)
kr_forecast_mean = _proto("kr_forecast_mean", _P(ctypes.c_double), _c)
kr_forecast_path = _proto("kr_forecast_path", _P(ctypes.c_double), _c, ctypes.c_int)
kr_forecast_path_s1 = _proto("kr_forecast_path_s1", _P(ctypes.c_int32), _c, ctypes.c_int)
kr_forecast_path_s2 = _proto("kr_forecast_path_s2", _P(ctypes.c_int32), _c, ctypes.c_int)
kr_forecast_history_s1 = _proto("kr_forecast_history_s1", _P(ctypes.c_int32), _c)
kr_forecast_history_s2 = _proto("kr_forecast_history_s2", _P(ctypes.c_int32), _c)
kr_forecast_quantile = _proto("kr_forecast_quantile", _status, _c, ctypes.c_double,
                              _P(ctypes.c_double), _P(kr_error))
kr_forecast_get_stats = _proto("kr_forecast_get_stats", None, _c, _P(kr_forecast_stats))
kr_calendar_future = _proto("kr_calendar_future", _status, _P(ctypes.c_int64), ctypes.c_int64,
                            ctypes.c_int, _P(ctypes.c_int64), _c, _P(kr_error))
kr_hub_resolve_cached_in = _proto("kr_hub_resolve_cached_in", _status, ctypes.c_char_p,
                                  ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                  ctypes.c_size_t, _P(kr_error))
kr_checkpoint_open = _proto("kr_checkpoint_open", _status, ctypes.c_char_p, _P(_c), _P(kr_error))
kr_checkpoint_free = _proto("kr_checkpoint_free", None, _c)
kr_checkpoint_tensor_count = _proto("kr_checkpoint_tensor_count", ctypes.c_int, _c)
kr_checkpoint_tensor = _proto("kr_checkpoint_tensor", _status, _c, ctypes.c_int,
                              _P(kr_tensor_view), _P(kr_error))
# kronos/finetune.h: the fine-tuning pipeline (kronos.finetune), in libkronos-tools.
kr_finetune_progress_cb = ctypes.CFUNCTYPE(ctypes.c_int, _c, _P(kr_finetune_progress))
kr_finetune_config_create = _tools_proto("kr_finetune_config_create", _status, _P(_c), _P(kr_error))
kr_finetune_config_free = _tools_proto("kr_finetune_config_free", None, _c)
kr_finetune_config_load_yaml = _tools_proto("kr_finetune_config_load_yaml", _status, _c,
                                      ctypes.c_char_p, _P(kr_error))
kr_finetune_config_set = _tools_proto("kr_finetune_config_set", _status, _c, ctypes.c_char_p,
                                ctypes.c_char_p, _P(kr_error))
kr_finetune_config_set_string = _tools_proto("kr_finetune_config_set_string", _status, _c,
                                       ctypes.c_char_p, ctypes.c_char_p, _P(kr_error))
kr_finetune_config_add = _tools_proto("kr_finetune_config_add", _status, _c, ctypes.c_char_p,
                                ctypes.c_char_p, _P(kr_error))
kr_finetune_n_keys = _tools_proto("kr_finetune_n_keys", ctypes.c_int)
kr_finetune_key_at = _tools_proto("kr_finetune_key_at", _P(kr_finetune_key), ctypes.c_int)
kr_finetune_run = _tools_proto("kr_finetune_run", _status, _c, kr_finetune_progress_cb, _c,
                         _P(kr_finetune_result), _P(kr_error))
# Variadic: only the (err, status, "%s", text) form is used (the import-time layout check).
kr_error_set = lib.kr_error_set
kr_error_set.restype = _status


def check(status, err):
    """Raises the KronosError subclass of a failed kr_status, with the C message."""
    if status != 0:
        msg = err.message.decode("utf-8", "replace") or kr_strerror(status).decode()
        raise errors.from_status(status, msg)


# Spare bytes after a structure the library fills in: a C structure grown past this package's
# copy (a library from another version) then lands in them, where it is noticed, instead of past
# the end of the Python allocation.
_SPARE = 1024
_CANARY = 0xA5


def fill(fn, cls, *args):
    """fn(*args, &out) for a structure `cls` the library writes; raises InternalError when the
    library wrote past this package's layout of it."""
    size = ctypes.sizeof(cls)
    buf = (ctypes.c_ubyte * (size + _SPARE))()
    ctypes.memset(buf, _CANARY, len(buf))
    fn(*args, ctypes.cast(buf, _P(cls)))
    if any(b != _CANARY for b in buf[size:]):
        raise errors.InternalError(
            f"kronos: {library_path} wrote more than the {size} bytes of this package's "
            f"{cls.__name__}: the library and the package come from different versions")
    return cls.from_buffer_copy(bytes(buf[:size]))


def _layout_error(what):
    return ImportError(f"kronos: {library_path} does not match this package's structure layouts "
                       f"({what}; a library from another version?)")


def _check_layout():
    # A structure out of step with the header shows up as nonsense in the defaults (the
    # header documents them), long before it corrupts a forecast. The structures the library
    # fills in (kr_error here, kr_model_info and kr_forecast_stats at each call) go through
    # fill(), which notices a C side larger than ours; python/tests/test_layout.py compares
    # every structure's size and field offsets with the C compiler's.
    fp = kr_forecast_default_params()
    cp = kr_context_default_params()
    mp = kr_model_default_params()
    if not (fp.max_context == 512 and fp.paths == 1 and abs(fp.top_p - 0.9) < 1e-6 and
            abs(fp.clip - 5.0) < 1e-6 and fp.first_path == 0 and fp.prenormalized == 0 and
            fp.norm == 0):
        raise _layout_error("kr_forecast_params defaults")
    if not (cp.max_batch_tokens == 4096 and cp.max_running == 64 and cp.max_queue == 256 and
            abs(cp.background_share - 0.5) < 1e-12 and cp.background_min_rows == 8 and
            cp.profile == 1 and cp.backfill == 1):
        raise _layout_error("kr_context_params defaults")
    if not (mp.quant is None and mp.allow_nonfinite == 0 and mp.no_mmap == 0):
        raise _layout_error("kr_model_params defaults")
    rp = kr_request_default_params()
    if not (rp.deadline_s == 0 and rp.priority == 0 and rp.should_abort is None and
            rp.wait_for_room == 1 and rp.static_batch_rows == 0):
        raise _layout_error("kr_request_params defaults")
    # kr_error: a message longer than the buffer is cut at its size, so the bytes written end
    # where our copy ends.
    err = fill(lambda p: kr_error_set(p, -3, b"%s", b"x" * 4096), kr_error)
    if (err.status != -3 or len(err.message) != kr_error.message.size - 1 or
            err.field != b""):
        raise _layout_error("kr_error")


_check_layout()
version = kr_version().decode()
