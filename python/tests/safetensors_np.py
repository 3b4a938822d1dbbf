"""Reads a .safetensors file with numpy (8-byte little-endian header length, JSON header, raw
little-endian data), for the golden fixtures."""

import json
import struct

import numpy as np

_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        a = np.frombuffer(blob[8 + n + begin:8 + n + end], dtype=_DTYPES[t["dtype"]])
        out[name] = a.reshape(t["shape"])
    return out
