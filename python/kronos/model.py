"""Kronos and KronosTokenizer: checkpoint directories, as the official classes' from_pretrained
gives them, and the loaded engine model they become once a KronosPredictor pairs them."""

import ctypes
import json
import os
import re
import threading
import warnings
import weakref

from . import _lib
from ._weights import ParametersMixin
from .errors import InvalidArgumentError, KronosIOError


def hub_cache_dir():
    """The Hugging Face hub cache, with huggingface_hub's (and `kronos pull`'s) precedence."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "huggingface", "hub")
    return os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub")


def _resolve_hub(name, revision, cache_dir):
    # The library's resolver, as `kronos forecast --model NAME` uses it: the revision checked
    # (no "..", no absolute path), the ref's commit checked before it names a directory, and a
    # snapshot counted only when every file of the checkpoint is there (a pull killed halfway
    # leaves one without model.safetensors).
    if not isinstance(revision, str):
        raise InvalidArgumentError(f"from_pretrained: revision must be a string, "
                                   f"got {type(revision).__name__}")
    # A NUL would end the C string early: "main\0x" would resolve as "main".
    for what, v in (("name", name), ("revision", revision)):
        if "\0" in v:
            raise InvalidArgumentError(f"from_pretrained: the {what} {v!r} holds a NUL character")
    err = _lib.kr_error()
    out = ctypes.create_string_buffer(4096)
    cache = os.fsencode(cache_dir or hub_cache_dir())
    status = _lib.kr_hub_resolve_cached_in(cache, name.encode(), revision.encode(), out,
                                           len(out), ctypes.byref(err))
    if status == 0:
        return os.fsdecode(out.value)
    if status == InvalidArgumentError.status:
        _lib.check(status, err)
    msg = err.message.decode("utf-8", "replace")
    raise KronosIOError(f"{msg}; run: kronos pull {name}"
                        + (f" --revision {revision}" if revision != "main" else ""))


def resolve_dir(name_or_dir, part, revision="main", cache_dir=None):
    """A checkpoint directory from a path or an `org/name` already in the hub cache. A directory
    holding predictor/ and tokenizer/ (the bundled demo model's layout) gives its `part`."""
    if not isinstance(name_or_dir, (str, os.PathLike)):
        raise InvalidArgumentError(
            f"from_pretrained: expected a directory or a hub name like 'NeoQuasar/Kronos-small', "
            f"got {type(name_or_dir).__name__}")
    path = os.path.expanduser(os.fspath(name_or_dir))
    if os.path.isdir(path):
        if os.path.isdir(os.path.join(path, part)) and not os.path.exists(
                os.path.join(path, "config.json")):
            path = os.path.join(path, part)
    elif path.count("/") == 1 and not path.startswith((".", "/")):
        path = _resolve_hub(path, revision, cache_dir)
    else:
        raise KronosIOError(f"{path}: no such directory")
    for f in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(path, f)):
            raise KronosIOError(f"{path}: no {f} (a checkpoint directory holds config.json and "
                                "model.safetensors)")
    return os.path.realpath(path)


_device_warned = []
# What names a device (not a dtype) in .to(...): "cuda", "cuda:1", "mps", torch.device("cpu").
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu|xla|hip|npu|meta|vulkan|ipu|hpu)(:\d+)?$", re.I)


def cpu_device(device, stacklevel=2):
    """The device the engine runs on, "cpu", whatever was asked for; a warning (once per
    process) when another one was (a torch.device or its name: "cuda:0", "mps", ...)."""
    if device is None:
        return "cpu"
    name = str(device)
    if name.split(":")[0].strip().lower() != "cpu" and not _device_warned:
        _device_warned.append(name)
        warnings.warn(f"device {name!r} ignored: kronos runs on the CPU (its C engine), with "
                      "the same numbers; .device says 'cpu'", UserWarning,
                      stacklevel=stacklevel + 1)
    return "cpu"


def _kind(config):
    """"tokenizer", "predictor" or None, by the keys only one of them has (as the CLI's
    hint tells them apart: only a tokenizer config has n_enc_layers, only a predictor's
    n_layers)."""
    if "n_enc_layers" in config:
        return "tokenizer"
    if "n_layers" in config:
        return "predictor"
    return None


def _check_kind(cls, path, config):
    # A tokenizer loaded as the predictor (or the reverse) would fail only at the first
    # forecast, with a message about a missing tensor: say what it is now.
    kind = _kind(config)
    if kind is None or kind == cls._part:
        return
    other = "KronosTokenizer" if kind == "tokenizer" else "Kronos"
    raise InvalidArgumentError(
        f"{cls.__name__}.from_pretrained: {path} is a {kind} checkpoint (its config.json has "
        f"{'n_enc_layers' if kind == 'tokenizer' else 'n_layers'}), not a {cls._part}; load "
        f"it with {other}.from_pretrained (are the model and the tokenizer swapped?)")


class _Checkpoint(ParametersMixin):
    """A checkpoint directory. parameters(), named_parameters(), buffers(), named_buffers()
    and state_dict() give its tensors by the official names as read-only numpy arrays (views
    of the weights: the file is mapped read-only; a kronos quantize checkpoint raises
    UnsupportedError)."""
    _part = ""

    def __init__(self, path, config):
        self.path = path
        self.config = config

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, revision="main", cache_dir=None,
                        **_hub_kwargs):
        """A local checkpoint directory, or a hub name (`NeoQuasar/Kronos-small`) already in the
        hub cache (`kronos pull` fetches it; nothing is downloaded here). Keyword arguments of
        huggingface_hub this does not need (token, force_download, ...) are accepted and
        ignored."""
        path = resolve_dir(pretrained_model_name_or_path, cls._part, revision, cache_dir)
        cfg_path = os.path.join(path, "config.json")
        try:
            with open(cfg_path, encoding="utf-8") as f:
                config = json.load(f)
        except ValueError as e:
            raise InvalidArgumentError(f"{cfg_path}: not valid JSON: {e}") from None
        if not isinstance(config, dict):
            raise InvalidArgumentError(f"{cfg_path}: expected a JSON object")
        _check_kind(cls, path, config)
        return cls(path, config)

    # The official classes are torch modules; scripts call these on them.
    def to(self, *args, **kwargs):
        """Returns the checkpoint itself: the engine runs on the CPU (a GPU device asked for
        warns, once per process, as KronosPredictor(device=...) does)."""
        for a in args + tuple(v for k, v in kwargs.items() if k == "device"):
            if _DEVICE.match(str(a)):
                cpu_device(a)
        return self

    def eval(self):
        return self

    def __repr__(self):
        return f"{type(self).__name__}.from_pretrained({self.path!r})"


class Kronos(_Checkpoint):
    """The predictor checkpoint (config.json + model.safetensors)."""
    _part = "predictor"


class KronosTokenizer(_Checkpoint):
    """The tokenizer checkpoint (config.json + model.safetensors)."""
    _part = "tokenizer"


class LoadedModel:
    """A kr_model: immutable weights, shared by every context (and thread) that runs it."""

    def __init__(self, predictor_dir, tokenizer_dir, quant=None):
        params = _lib.kr_model_default_params()
        if quant is not None:
            if not isinstance(quant, str):
                raise InvalidArgumentError(
                    f"quant: expected a string such as 'int8', got {quant!r}")
            params.quant = quant.encode()
        err = _lib.kr_error()
        handle = ctypes.c_void_p()
        st = _lib.kr_model_load(os.fsencode(predictor_dir), os.fsencode(tokenizer_dir),
                                ctypes.byref(params), ctypes.byref(handle), ctypes.byref(err))
        _lib.check(st, err)
        self._handle = handle
        self._free = weakref.finalize(self, _lib.kr_model_free, handle)
        self.predictor_dir, self.tokenizer_dir, self.quant = predictor_dir, tokenizer_dir, quant

    @property
    def handle(self):
        return self._handle

    def info(self):
        """kr_model_info as a dict: shapes, parameter and weight sizes, load time, weight
        format, `demo` (True for a checkpoint that only exercises the software: its
        config.json says intended_use "demo" or "test") and `source` (where the weights come
        from, "" when config.json does not say)."""
        mi = _lib.fill(_lib.kr_model_get_info, _lib.kr_model_info, self._handle)
        out = {name: getattr(mi, name) for name, _ in mi._fields_}
        for k in ("quant", "quant_method", "source"):
            out[k] = out[k].decode("utf-8", "replace")
        out["demo"] = bool(out["demo"])
        return out


_models = weakref.WeakValueDictionary()
_models_lock = threading.Lock()


def forget_after_fork():
    """In a child of os.fork(): the parent's kr_models are left to the child's copy of memory,
    never freed there (the library's state may have been mid-change in another parent thread
    at the fork), and the next load_model loads afresh."""
    global _models, _models_lock
    for m in list(_models.values()):
        m._free.detach()
    _models = weakref.WeakValueDictionary()
    _models_lock = threading.Lock()


def load_model(predictor_dir, tokenizer_dir, quant=None):
    """The process's one LoadedModel of this pair and weight format (loaded on first use)."""
    key = (predictor_dir, tokenizer_dir, quant or "f32")
    with _models_lock:
        m = _models.get(key)
        if m is None:
            m = LoadedModel(predictor_dir, tokenizer_dir, quant)
            _models[key] = m
        return m
