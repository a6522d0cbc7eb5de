"""PyTorch's `pytorch_model.bin` read without torch, and without running its pickle.

    shapes, read = open_torch_file("pytorch_model.bin")   # {name: shape}, read(name) -> np.ndarray

`torch.load` unpickles the file, and a pickle can call any function it names: loading an untrusted
`pytorch_model.bin` with torch can run any code, and even `weights_only=True` can be made to hang
(a dict key whose hash takes 2^60 steps) or crash (tuples nested 200,000 deep). The pickle is read
by `t5rank.checkpoints.restricted_pickle`, which does not use `pickle`, runs nothing and stays
bounded in memory and time; here are the file layouts around it. Storages come from the pickle's
persistent ids as (key, dtype, element count); each tensor's extent (at most MAX_DIMS dimensions,
no more elements than its storage) is checked when the file is opened, and its bytes are read
(memory-mapped where the file stores them uncompressed, as torch does; a compressed member read as
a stream, exactly its declared size, its checksum checked) only when a tensor is.

Two layouts:
  - zip (torch >= 1.6): `ARCHIVE/data.pkl` is the pickled state dict, `ARCHIVE/data/KEY` each
    storage's raw bytes, `ARCHIVE/byteorder` "little" or "big" (absent: little);
  - legacy (`torch.save(..., _use_new_zipfile_serialization=False)`, torch < 1.6): five pickles in
    a row (magic number, protocol version 1001, system info with `little_endian`, the state dict,
    the list of storage keys), then each listed storage as an 8-byte element count and its bytes.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zipfile
from typing import Any, Callable

import numpy as np

from t5rank.checkpoints.restricted_pickle import Storage, TensorRef, unpickle as _unpickle
from t5rank.checkpoints.tree import CheckpointError, Shape
from t5rank.checkpoints.untrusted import quote

MAX_DIMS = 16  # dimensions of a tensor
MAX_PICKLE_BYTES = 256 << 20  # data.pkl of a zip file (a 200,000-tensor state dict: ~40 MB)

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
LEGACY_PROTOCOL = 1001


def _state_dict(value: Any, source: str) -> dict[str, TensorRef]:
  """The unpickled object as {name: TensorRef}, refusing anything else (every tensor's extent
  checked against its storage: `_check_extent`)."""
  if not isinstance(value, dict):
    raise CheckpointError(f"{source}: holds {quote(value)}, not a state dict of tensors")
  for name, tensor in dict.items(value):
    if not isinstance(tensor, TensorRef):
      raise CheckpointError(f"{source}: {quote(name)} is {quote(tensor)}, not a tensor; t5rank "
                            "reads state dicts of tensors")
    _check_extent(source, name, tensor)
  return dict(dict.items(value))


def _check_extent(source: str, name: str, tensor: TensorRef) -> None:
  """Refuses a tensor whose size, stride or offset cannot be what torch writes: more than
  MAX_DIMS dimensions, a negative number, more elements than its storage holds, or an element
  past its storage's end (Python's integers: no overflow)."""
  shape, stride, storage = tensor.shape, tensor.stride, tensor.storage
  problem = None
  if len(shape) > MAX_DIMS:
    problem = f"has {len(shape)} dimensions (at most {MAX_DIMS})"
  elif any(n < 0 for n in shape) or any(s < 0 for s in stride) or tensor.offset < 0:
    problem = "has a negative size, stride or offset"
  elif 0 not in shape:
    count = math.prod(shape)
    last = tensor.offset + sum((n - 1) * s for n, s in zip(shape, stride))
    if count > storage.numel:
      problem = (f"declares {count} elements, its storage {quote(storage.key)} holds "
                 f"{storage.numel}")
    elif last >= storage.numel:
      problem = f"reaches element {last}, its storage {quote(storage.key)} holds {storage.numel}"
  if problem:
    raise CheckpointError(f"{source}: tensor {quote(name)} {problem}; not a tensor torch writes")


# --- the two layouts: each gives the state dict and a reader of one storage's elements ---------

def _open_zip(path: str) -> tuple[dict[str, TensorRef], Callable[[Storage], np.ndarray]]:
  with zipfile.ZipFile(path) as archive:
    members = {info.filename: info for info in archive.infolist()}
    pickles = [name for name in members if name.count("/") == 1 and name.endswith("/data.pkl")]
    if len(pickles) != 1:
      raise CheckpointError(f"{path}: a zip file without one ARCHIVE/data.pkl; not a PyTorch "
                            "checkpoint")
    for info in members.values():
      _check_member(path, info)
    prefix = pickles[0][:-len("data.pkl")]
    byteorder = "little"  # older torch wrote no such record
    if prefix + "byteorder" in members:
      byteorder = _read_member(archive, path, members[prefix + "byteorder"], 16).decode(
          errors="replace")
    if byteorder not in ("little", "big"):
      raise CheckpointError(f"{path}: byteorder {quote(byteorder)}; expected 'little' or 'big'")
    data = _read_member(archive, path, members[pickles[0]], MAX_PICKLE_BYTES)
    state = _state_dict(_unpickle(io.BytesIO(data), path), path)
  order = "<" if byteorder == "little" else ">"

  def read_storage(storage: Storage) -> np.ndarray:
    info = members.get(f"{prefix}data/{storage.key}")
    dtype = storage.dtype.newbyteorder(order)
    if info is None:
      raise CheckpointError(f"{path}: storage {quote(storage.key)} is missing (no "
                            f"{quote(prefix + 'data/' + storage.key)})")
    if info.file_size < storage.numel * dtype.itemsize:
      raise CheckpointError(f"{path}: storage {quote(storage.key)} holds {info.file_size} bytes, "
                            f"its tensors need {storage.numel * dtype.itemsize}")
    if info.compress_type == zipfile.ZIP_STORED:  # as torch writes it: map it in place
      with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
      if len(header) < 30:
        raise CheckpointError(f"{path}: truncated: the entry of storage {quote(storage.key)} is "
                              "cut")
      name_length, extra_length = struct.unpack("<HH", header[26:30])
      start = info.header_offset + 30 + name_length + extra_length
      if start + storage.numel * dtype.itemsize > os.path.getsize(path):
        raise CheckpointError(f"{path}: truncated: storage {quote(storage.key)} ends past the "
                              "file")
      return _memmap(path, dtype, start, storage.numel)
    if info.file_size != storage.numel * dtype.itemsize:  # compressed: exactly what it declares
      raise CheckpointError(f"{path}: storage {quote(storage.key)} declares {info.file_size} "
                            f"bytes, its tensors say {storage.numel * dtype.itemsize}")
    with zipfile.ZipFile(path) as archive:
      data = _read_member(archive, path, info, info.file_size)
    return np.frombuffer(data, dtype, storage.numel)

  return state, read_storage


_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def _check_member(path: str, info: zipfile.ZipInfo) -> None:
  """Refuses an encrypted member or one compressed in a way zipfile cannot read."""
  if info.flag_bits & 0x1:
    raise CheckpointError(f"{path}: member {quote(info.filename)} is encrypted; torch writes no "
                          "encrypted files")
  if info.compress_type not in _COMPRESSIONS:
    raise CheckpointError(f"{path}: member {quote(info.filename)} is compressed by method "
                          f"{info.compress_type}, which t5rank does not read")


def _read_member(archive: zipfile.ZipFile, path: str, info: zipfile.ZipInfo, limit: int) -> bytes:
  """The bytes of `info`, read as a stream and at most `limit` of them (a member declaring more is
  refused before anything is read; zipfile stops at the declared size whatever the compressed
  stream holds), its checksum checked."""
  if info.file_size > limit:
    raise CheckpointError(f"{path}: member {quote(info.filename)} declares {info.file_size} "
                          f"bytes, more than the {limit} t5rank reads for it")
  chunks, size = [], 0
  try:
    with archive.open(info) as stream:
      while True:
        chunk = stream.read(1 << 20)
        if not chunk:
          break
        size += len(chunk)
        if size > limit:
          raise CheckpointError(f"{path}: member {quote(info.filename)} holds more than the "
                                f"{limit} bytes it may")
        chunks.append(chunk)
  except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as e:
    raise CheckpointError(f"{path}: member {quote(info.filename)} cannot be read ({quote(str(e))}"
                          "); not a readable PyTorch checkpoint") from None
  except Exception as e:  # zlib.error, lzma.LZMAError: a damaged compressed stream
    raise CheckpointError(f"{path}: member {quote(info.filename)} is damaged "
                          f"({type(e).__name__}); not a readable PyTorch checkpoint") from None
  return b"".join(chunks)


def _open_legacy(path: str) -> tuple[dict[str, TensorRef], Callable[[Storage], np.ndarray]]:
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    if _unpickle(f, path) != LEGACY_MAGIC:
      raise CheckpointError(f"{path}: neither a zip file nor a legacy PyTorch checkpoint (no "
                            "magic number); not a PyTorch checkpoint")
    protocol = _unpickle(f, path)
    if protocol != LEGACY_PROTOCOL:
      raise CheckpointError(f"{path}: legacy PyTorch protocol {quote(protocol)}; t5rank reads "
                            f"{LEGACY_PROTOCOL}")
    info = _unpickle(f, path)
    endian = dict.get(info, "little_endian", True) if isinstance(info, dict) else None
    if type(endian) is not bool:
      raise CheckpointError(f"{path}: the legacy system-info record is {quote(info)}, not a dict "
                            "saying little_endian true or false")
    order = "<" if endian else ">"
    state = _state_dict(_unpickle(f, path), path)
    keys = _unpickle(f, path)
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
      raise CheckpointError(f"{path}: the storage key list is {quote(keys)}, not a list of keys")
    dtypes = {t.storage.key: t.storage.dtype.newbyteorder(order) for t in state.values()}
    where = {}  # key -> (first byte, element count)
    for key in keys:  # each: an 8-byte element count, then the elements
      if key not in dtypes:
        raise CheckpointError(f"{path}: storage {quote(key)} is listed but no tensor says its "
                              "type")
      start = f.tell() + 8
      count_bytes = f.read(8)
      count = struct.unpack(f"{order}q", count_bytes)[0] if len(count_bytes) == 8 else -1
      end = start + count * dtypes[key].itemsize
      if count < 0 or end > size:
        raise CheckpointError(f"{path}: truncated: storage {quote(key)} ends past the file's "
                              f"{size} bytes")
      where[key] = (start, count)
      f.seek(end)

  def read_storage(storage: Storage) -> np.ndarray:
    if storage.key not in where:
      raise CheckpointError(f"{path}: storage {quote(storage.key)} is missing from the file")
    start, count = where[storage.key]
    return _memmap(path, dtypes[storage.key], start, count)

  return state, read_storage


def _memmap(path: str, dtype: np.dtype, start: int, count: int) -> np.ndarray:
  if count == 0:
    return np.zeros(0, dtype)
  return np.memmap(path, dtype, mode="r", offset=start, shape=(count,))


def _values(path: str, name: str, tensor: TensorRef, elements: np.ndarray) -> np.ndarray:
  """The tensor's values, copied out of its storage's `elements` (its extent was checked against
  the storage's declared size by `_check_extent`; here against the elements the file holds)."""
  if 0 in tensor.shape:
    return np.zeros(tensor.shape, elements.dtype)
  last = tensor.offset + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride))
  if last >= elements.size:
    raise CheckpointError(f"{path}: tensor {quote(name)} reaches element {last}, its storage "
                          f"{quote(tensor.storage.key)} holds {elements.size}")
  strides = tuple(s * elements.itemsize for s in tensor.stride)
  view = np.lib.stride_tricks.as_strided(elements[tensor.offset:], tensor.shape, strides,
                                         writeable=False)
  return np.array(view, dtype=elements.dtype.newbyteorder("="))


def open_torch_file(path: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  """Shapes of the tensors in the PyTorch state-dict file `path` (zip or legacy layout, module
  docstring), and a reader of one tensor by name (a numpy array of its stored dtype; bfloat16 as
  ml_dtypes.bfloat16). Anything but a state dict of tensors raises a one-line CheckpointError
  naming the file; nothing in the pickle is run."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path} not found")
  try:
    if zipfile.is_zipfile(path):
      state, read_storage = _open_zip(path)
    else:
      with open(path, "rb") as f:
        looks_zipped = f.read(4) == b"PK\x03\x04"
      if looks_zipped:
        raise CheckpointError(f"{path}: a damaged zip file (truncated?); not a readable PyTorch "
                              "checkpoint")
      state, read_storage = _open_legacy(path)
  except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as e:
    raise CheckpointError(f"{path}: a damaged zip file ({quote(str(e))}); not a readable "
                          "PyTorch checkpoint") from None

  def read(name: str) -> np.ndarray:
    tensor = state[name]
    return _values(path, name, tensor, read_storage(tensor.storage))

  return {name: tensor.shape for name, tensor in state.items()}, read
