"""PyTorch's `pytorch_model.bin` read without torch, and without running its pickle.

    shapes, read = open_torch_file("pytorch_model.bin")   # {name: shape}, read(name) -> np.ndarray

`torch.load` unpickles the file, and a pickle can call any function it names: loading an untrusted
`pytorch_model.bin` with torch can run any code. This reader unpickles with `find_class` restricted
to what torch writes for a state dict of plain tensors, checked against files written by torch 2.13
(zip and legacy) and the layout of torch 1.x's legacy files:
  - `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])`
    (and `_rebuild_tensor(storage, offset, size, stride)` of older files): replaced by a function
    that only records where the tensor lies in its storage;
  - the storage types named in persistent ids (`torch.FloatStorage`, `torch.HalfStorage`, ...,
    `torch.storage.UntypedStorage`): replaced by a dtype record that cannot be called;
  - `collections.OrderedDict`: the state dict itself, and the empty backward-hooks argument.
Any other global is refused when the pickle names it, before anything is called, with one line
naming it. Storages come from `persistent_load` as (key, dtype, element count); their bytes are
read from the file (memory-mapped where the file stores them uncompressed) only when a tensor is.

Two layouts:
  - zip (torch >= 1.6): `ARCHIVE/data.pkl` is the pickled state dict, `ARCHIVE/data/KEY` each
    storage's raw bytes, `ARCHIVE/byteorder` "little" or "big" (absent: little);
  - legacy (`torch.save(..., _use_new_zipfile_serialization=False)`, torch < 1.6): five pickles in
    a row (magic number, protocol version 1001, system info with `little_endian`, the state dict,
    the list of storage keys), then each listed storage as an 8-byte element count and its bytes.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import os
import pickle
import struct
import zipfile
from typing import Any, BinaryIO, Callable

import ml_dtypes
import numpy as np

from t5rank.checkpoints.tree import CheckpointError, Shape

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
LEGACY_PROTOCOL = 1001

# torch's storage type -> numpy dtype of one element (UntypedStorage holds bytes).
_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_, "UntypedStorage": np.uint8,
}


class _Sealed:
  """What the pickle's BUILD opcode may not change: the records `find_class` hands out are shared
  by every load, so a pickle that tries to set their state is refused."""

  def __setstate__(self, state: Any) -> None:
    raise TypeError(f"the pickle sets the state of {type(self).__name__}, which torch never does")


@dataclasses.dataclass(frozen=True)
class StorageType(_Sealed):
  """A torch storage type named in the pickle; a record, not a callable."""
  name: str
  dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class Storage:
  """A storage the pickle refers to by persistent id: `numel` elements of `dtype` under `key`."""
  key: str
  dtype: np.dtype
  numel: int


@dataclasses.dataclass(frozen=True)
class TensorRef:
  """Where a tensor lies in its storage, in elements: what `_rebuild_tensor_v2` is given."""
  storage: Storage
  offset: int
  shape: Shape
  stride: Shape


def _is_ints(value: Any) -> bool:
  return isinstance(value, tuple) and all(type(v) is int for v in value)


def _rebuild_tensor(storage: Any, offset: Any, shape: Any, stride: Any, *rest: Any) -> TensorRef:
  """Stands in for torch's `_rebuild_tensor` and `_rebuild_tensor_v2` (whose further arguments,
  requires_grad, backward hooks and metadata, say nothing about the values)."""
  if not (isinstance(storage, Storage) and type(offset) is int and _is_ints(shape)
          and _is_ints(stride) and len(shape) == len(stride)):
    raise TypeError("a tensor is rebuilt from arguments that are not (storage, offset, size, "
                    "stride)")
  return TensorRef(storage, offset, shape, stride)


class _Rebuild(_Sealed):
  """`_rebuild_tensor` as the pickle sees it: callable, its state sealed."""

  def __call__(self, *args: Any) -> TensorRef:
    return _rebuild_tensor(*args)


_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _Rebuild(),
    ("torch._utils", "_rebuild_tensor"): _Rebuild(),
    ("collections", "OrderedDict"): collections.OrderedDict,
    **{(module, name): StorageType(name, np.dtype(dtype))
       for name, dtype in _STORAGE_DTYPES.items()
       for module in (("torch", "torch.storage") if name == "UntypedStorage" else ("torch",))},
}


class _RestrictedUnpickler(pickle.Unpickler):
  """An unpickler that admits only `_GLOBALS` and turns persistent ids into `Storage` records."""

  def __init__(self, file: BinaryIO, source: str):
    super().__init__(file, encoding="utf-8")
    self.source = source

  def find_class(self, module: str, name: str) -> Any:
    if (module, name) not in _GLOBALS:
      raise CheckpointError(f"{self.source}: the pickle asks for {module}.{name}; t5rank reads "
                            "only torch tensors and never runs other code")
    return _GLOBALS[(module, name)]

  def persistent_load(self, pid: Any) -> Storage:
    # zip: ('storage', type, key, location, numel); legacy adds a view of another storage, which
    # torch writes None for the storages of tensors (a tensor's own offset says where it starts).
    if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"
            and isinstance(pid[1], StorageType) and isinstance(pid[2], str)
            and type(pid[4]) is int and pid[4] >= 0):
      raise CheckpointError(f"{self.source}: the pickle refers to {_short(pid)}, which is not a "
                            "torch storage")
    if len(pid) == 6 and pid[5] is not None:
      raise CheckpointError(f"{self.source}: storage {pid[2]!r} is a view of another storage "
                            f"{_short(pid[5])}; t5rank reads state dicts of tensors, whose "
                            "storages are no views")
    return Storage(pid[2], pid[1].dtype, pid[4])


def _short(value: Any) -> str:
  text = repr(value)
  return text if len(text) <= 80 else text[:77] + "..."


def _unpickle(file: BinaryIO, source: str) -> Any:
  """One pickle from `file`, read by `_RestrictedUnpickler`; its errors as one CheckpointError."""
  try:
    return _RestrictedUnpickler(file, source).load()
  except CheckpointError:
    raise
  except Exception as e:  # a damaged pickle: EOFError, UnpicklingError, a call of a non-callable
    raise CheckpointError(f"{source}: not a readable PyTorch checkpoint ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else 'no detail'})") from None


def _state_dict(value: Any, source: str) -> dict[str, TensorRef]:
  """The unpickled object as {name: TensorRef}, refusing anything else."""
  if not isinstance(value, dict):
    raise CheckpointError(f"{source}: holds a {type(value).__name__}, not a state dict of tensors")
  for name, tensor in value.items():
    if not isinstance(name, str):
      raise CheckpointError(f"{source}: a state dict key is {_short(name)}, not a name")
    if not isinstance(tensor, TensorRef):
      raise CheckpointError(f"{source}: {name!r} is a {type(tensor).__name__}, not a tensor; "
                            "t5rank reads state dicts of tensors")
  return dict(value)


# --- the two layouts: each gives the state dict and a reader of one storage's elements ---------

def _open_zip(path: str) -> tuple[dict[str, TensorRef], Callable[[Storage], np.ndarray]]:
  with zipfile.ZipFile(path) as archive:
    members = {info.filename: info for info in archive.infolist()}
    pickles = [name for name in members if name.count("/") == 1 and name.endswith("/data.pkl")]
    if len(pickles) != 1:
      raise CheckpointError(f"{path}: a zip file without one ARCHIVE/data.pkl; not a PyTorch "
                            "checkpoint")
    prefix = pickles[0][:-len("data.pkl")]
    byteorder = "little"  # older torch wrote no such record
    if prefix + "byteorder" in members:
      byteorder = archive.read(prefix + "byteorder").decode(errors="replace")
    if byteorder not in ("little", "big"):
      raise CheckpointError(f"{path}: byteorder {byteorder!r}; expected 'little' or 'big'")
    state = _state_dict(_unpickle(io.BytesIO(archive.read(pickles[0])), path), path)
  order = "<" if byteorder == "little" else ">"

  def read_storage(storage: Storage) -> np.ndarray:
    info = members.get(f"{prefix}data/{storage.key}")
    dtype = storage.dtype.newbyteorder(order)
    if info is None:
      raise CheckpointError(f"{path}: storage {storage.key!r} is missing (no {prefix}data/"
                            f"{storage.key})")
    if info.file_size < storage.numel * dtype.itemsize:
      raise CheckpointError(f"{path}: storage {storage.key!r} holds {info.file_size} bytes, its "
                            f"tensors need {storage.numel * dtype.itemsize}")
    if info.compress_type == zipfile.ZIP_STORED:  # as torch writes it: map it in place
      with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
      if len(header) < 30:
        raise CheckpointError(f"{path}: truncated: the entry of storage {storage.key!r} is cut")
      name_length, extra_length = struct.unpack("<HH", header[26:30])
      start = info.header_offset + 30 + name_length + extra_length
      if start + storage.numel * dtype.itemsize > os.path.getsize(path):
        raise CheckpointError(f"{path}: truncated: storage {storage.key!r} ends past the file")
      return _memmap(path, dtype, start, storage.numel)
    with zipfile.ZipFile(path) as archive:
      return np.frombuffer(archive.read(info), dtype, storage.numel)

  return state, read_storage


def _open_legacy(path: str) -> tuple[dict[str, TensorRef], Callable[[Storage], np.ndarray]]:
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    if _unpickle(f, path) != LEGACY_MAGIC:
      raise CheckpointError(f"{path}: neither a zip file nor a legacy PyTorch checkpoint (no "
                            "magic number); not a PyTorch checkpoint")
    protocol = _unpickle(f, path)
    if protocol != LEGACY_PROTOCOL:
      raise CheckpointError(f"{path}: legacy PyTorch protocol {_short(protocol)}; t5rank reads "
                            f"{LEGACY_PROTOCOL}")
    info = _unpickle(f, path)
    order = "<" if isinstance(info, dict) and info.get("little_endian", True) else ">"
    state = _state_dict(_unpickle(f, path), path)
    keys = _unpickle(f, path)
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
      raise CheckpointError(f"{path}: the storage key list is {_short(keys)}, not a list of keys")
    dtypes = {t.storage.key: t.storage.dtype.newbyteorder(order) for t in state.values()}
    where = {}  # key -> (first byte, element count)
    for key in keys:  # each: an 8-byte element count, then the elements
      if key not in dtypes:
        raise CheckpointError(f"{path}: storage {key!r} is listed but no tensor says its type")
      start = f.tell() + 8
      count_bytes = f.read(8)
      count = struct.unpack(f"{order}q", count_bytes)[0] if len(count_bytes) == 8 else -1
      end = start + count * dtypes[key].itemsize
      if count < 0 or end > size:
        raise CheckpointError(f"{path}: truncated: storage {key!r} ends past the file's {size} "
                              "bytes")
      where[key] = (start, count)
      f.seek(end)

  def read_storage(storage: Storage) -> np.ndarray:
    if storage.key not in where:
      raise CheckpointError(f"{path}: storage {storage.key!r} is missing from the file")
    start, count = where[storage.key]
    return _memmap(path, dtypes[storage.key], start, count)

  return state, read_storage


def _memmap(path: str, dtype: np.dtype, start: int, count: int) -> np.ndarray:
  if count == 0:
    return np.zeros(0, dtype)
  return np.memmap(path, dtype, mode="r", offset=start, shape=(count,))


def _values(path: str, tensor: TensorRef, elements: np.ndarray) -> np.ndarray:
  """The tensor's values, copied out of its storage's `elements`, after checking that every
  element its offset, shape and stride reach lies inside the storage."""
  storage = tensor.storage
  if any(n < 0 for n in tensor.shape) or any(s < 0 for s in tensor.stride) or tensor.offset < 0:
    raise CheckpointError(f"{path}: a tensor of storage {storage.key!r} has a negative size, "
                          "stride or offset")
  if 0 in tensor.shape:
    return np.zeros(tensor.shape, elements.dtype)
  last = tensor.offset + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride))
  if last >= elements.size:
    raise CheckpointError(f"{path}: a tensor of storage {storage.key!r} reaches element {last}, "
                          f"the storage has {elements.size}")
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
  except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
    raise CheckpointError(f"{path}: a damaged zip file ({e}); not a readable PyTorch "
                          "checkpoint") from None

  def read(name: str) -> np.ndarray:
    tensor = state[name]
    return _values(path, tensor, read_storage(tensor.storage))

  return {name: tensor.shape for name, tensor in state.items()}, read
