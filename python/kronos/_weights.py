"""A checkpoint's tensors as read-only numpy arrays (kr_checkpoint_*: the file mapped
read-only), for parameters(), named_parameters(), buffers() and state_dict() on Kronos and
KronosTokenizer, by the official state_dict names."""

import collections
import ctypes
import os
import threading
import weakref

import numpy as np

from . import _lib


class WeightArray(np.ndarray):
    """A numpy array (read-only: a view of the checkpoint's weights) with the few torch
    Parameter members scripts ask of model.parameters(): numel(), dim(), device ("cpu") and
    requires_grad (False). Everything else is numpy's."""

    requires_grad = False
    device = "cpu"

    def numel(self):
        return int(self.size)

    def dim(self):
        return self.ndim


class Tensors:
    """One kr_checkpoint: the arrays keep it (and its mapping) alive."""

    def __init__(self, path):
        err = _lib.kr_error()
        handle = ctypes.c_void_p()
        _lib.check(_lib.kr_checkpoint_open(os.fsencode(path), ctypes.byref(handle),
                                           ctypes.byref(err)), err)
        self._free = weakref.finalize(self, _lib.kr_checkpoint_free, handle)
        self.entries = []  # (name, array, is_buffer)
        for i in range(_lib.kr_checkpoint_tensor_count(handle)):
            status = []
            v = _lib.fill(lambda p, i=i: status.append(_lib.kr_checkpoint_tensor(
                handle, i, p, ctypes.byref(err))), _lib.kr_tensor_view)
            _lib.check(status[0], err)
            self.entries.append((v.name.decode("utf-8", "replace"), self._array(v),
                                 bool(v.is_buffer)))

    def _array(self, v):
        dtype = np.float32 if v.dtype == b"F32" else np.int64
        shape = tuple(v.shape[:v.ndim])
        if v.numel == 0 or not v.data:
            arr = np.zeros(shape, dtype=dtype)
        else:
            ctype = ctypes.c_float if dtype is np.float32 else ctypes.c_int64
            buf = (ctype * v.numel).from_address(v.data)
            buf._owner = self  # the memory is the checkpoint's: keep it while a view lives
            # A read-only buffer underneath: the flag cannot be turned back on (the mapping is
            # PROT_READ, so a write would fault the process).
            arr = np.frombuffer(memoryview(buf).cast("B").toreadonly(), dtype=dtype)
            arr = arr.reshape(shape)
        arr.flags.writeable = False
        return arr.view(WeightArray)


_cache_lock = threading.Lock()


def tensors(checkpoint):
    """The Tensors of a Kronos / KronosTokenizer (opened at the first call, then kept)."""
    with _cache_lock:
        t = checkpoint.__dict__.get("_tensors")
        if t is None:
            t = Tensors(checkpoint.path)
            checkpoint.__dict__["_tensors"] = t
        return t


def _prefixed(prefix, name):
    return f"{prefix}.{name}" if prefix else name


class ParametersMixin:
    """torch.nn.Module's read side over the checkpoint's tensors."""

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, array) of every learned tensor (not the buffers), as torch's
        named_parameters() names them: 'embedding.emb_s1.weight', ..."""
        for name, arr, is_buffer in tensors(self).entries:
            if not is_buffer:
                yield _prefixed(prefix, name), arr

    def parameters(self, recurse=True):
        """The learned tensors as read-only float32 numpy arrays (views of the weights)."""
        for _, arr in self.named_parameters():
            yield arr

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, array) of the buffers: the rotary inv_freq tensors, the BSQ bases."""
        for name, arr, is_buffer in tensors(self).entries:
            if is_buffer:
                yield _prefixed(prefix, name), arr

    def buffers(self, recurse=True):
        for _, arr in self.named_buffers():
            yield arr

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Every tensor of the checkpoint (parameters and buffers) by its state_dict name, as
        read-only numpy arrays, in an OrderedDict (or into `destination`)."""
        out = collections.OrderedDict() if destination is None else destination
        for name, arr, _ in tensors(self).entries:
            out[prefix + name] = arr
        return out
