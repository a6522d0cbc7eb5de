"""PyTorch's `pytorch_model.bin` read without torch, and without running its pickle.

    shapes, read = open_torch_file("pytorch_model.bin")   # {name: shape}, read(name) -> np.ndarray

`torch.load` unpickles the file, and a pickle can call any function it names: loading an untrusted
`pytorch_model.bin` with torch can run any code, and even `weights_only=True` can be made to hang
(a dict key whose hash takes 2^60 steps) or crash (tuples nested 200,000 deep). This reader does
not use `pickle` at all: `_Pickle` reads the opcodes torch writes for a state dict (protocols 2 to
4) and builds the values itself, so that it can refuse, before anything is built or hashed, a key
that is not a string, containers nested more than MAX_DEPTH deep, integers past MAX_INT_BITS and
any other opcode; memory and time stay proportional to the pickle's size, and a message quotes a
value from the file only through `t5rank.checkpoints.untrusted.quote`. The globals it admits are
what torch writes for a state dict of plain tensors, checked against files written by torch 2.13
(zip and legacy) and the layout of torch 1.x's legacy files:
  - `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])`
    (and `_rebuild_tensor(storage, offset, size, stride)` of older files): replaced by a function
    that only records where the tensor lies in its storage;
  - the storage types named in persistent ids (`torch.FloatStorage`, `torch.HalfStorage`, ...,
    `torch.storage.UntypedStorage`): replaced by a dtype record that cannot be called;
  - `collections.OrderedDict`: the state dict itself, and the empty backward-hooks argument (its
    `_metadata` attribute, set by BUILD, is not read, and nothing else takes a state).
Any other global is refused when the pickle names it, before anything is called, with one line
naming it. Storages come from `persistent_load` as (key, dtype, element count); each tensor's
extent (at most MAX_DIMS dimensions, no more elements than its storage) is checked when the file is
opened, and its bytes are read (memory-mapped where the file stores them uncompressed, as torch
does; a compressed member read as a stream, exactly its declared size) only when a tensor is.

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
import math
import os
import struct
import zipfile
from typing import Any, BinaryIO, Callable, Sequence

import ml_dtypes
import numpy as np

from t5rank.checkpoints.tree import CheckpointError, Shape
from t5rank.checkpoints.untrusted import name, quote

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


# Bounds on a pickle: a state dict is a dict of tensors, each rebuilt from a tuple holding a
# persistent id and tuples of sizes and strides, beside a `_metadata` dict two levels deep; the
# legacy format's system-info record is two levels deep too.
MAX_DEPTH = 8  # containers inside containers
MAX_DIMS = 16  # dimensions of a tensor
MAX_INT_BITS = 128  # the legacy magic number has 80
MAX_PICKLE_BYTES = 256 << 20  # data.pkl of a zip file (a 200,000-tensor state dict: ~40 MB)


class _Refused(Exception):
  """What the reader refuses, before `_Pickle.load` adds the file's name."""


def _int(data: bytes) -> int:
  value = int.from_bytes(data, "little", signed=True)
  if value.bit_length() > MAX_INT_BITS:
    raise _Refused(f"an integer of {value.bit_length()} bits")
  return value


class _Pickle:
  """One pickle read opcode by opcode and built here, never by `pickle`: only the opcodes torch
  writes for a state dict (protocols 2 to 4), only `_GLOBALS`, only string keys, containers at
  most MAX_DEPTH deep. Nothing is hashed but strings and ints, nothing is formatted whole, nothing
  recurses: memory and time stay proportional to the pickle's bytes whatever they hold."""

  def __init__(self, file: BinaryIO, source: str):
    self.file, self.source = file, source
    self.stack: list[Any] = []
    self.marks: list[int] = []
    self.memo: dict[int, Any] = {}
    self.depths: dict[int, int] = {}  # id of a container built here -> its depth
    self.keep: list[Any] = []  # every container built, so that no id is reused

  def read(self, n: int) -> bytes:
    data = self.file.read(n)
    if len(data) < n:
      raise _Refused("the pickle is cut short (truncated?)")
    return data

  def depth(self, value: Any) -> int:
    return self.depths.get(id(value), 0) if isinstance(value, (tuple, list, dict)) else 0

  def container(self, value: Any, items: Sequence[Any]) -> Any:
    depth = 1 + max((self.depth(item) for item in items), default=0)
    if depth > MAX_DEPTH:
      raise _Refused(f"containers nested more than {MAX_DEPTH} deep; a state dict has 2")
    self.depths[id(value)] = depth
    self.keep.append(value)
    return value

  def grow(self, target: Any, items: Sequence[Any]) -> None:
    """`target`'s depth after `items` went into it."""
    depth = 1 + max((self.depth(item) for item in items), default=0)
    if depth > self.depths.get(id(target), 1):
      if depth > MAX_DEPTH:
        raise _Refused(f"containers nested more than {MAX_DEPTH} deep; a state dict has 2")
      self.depths[id(target)] = depth

  def pop_mark(self) -> list[Any]:
    if not self.marks:
      raise _Refused("a MARK is missing")
    start = self.marks.pop()
    items = self.stack[start:]
    del self.stack[start:]
    return items

  def pop(self) -> Any:
    if not self.stack:
      raise _Refused("the pickle's stack is empty")
    return self.stack.pop()

  def global_(self, module: str, attribute: str) -> Any:
    if (module, attribute) not in _GLOBALS:
      raise CheckpointError(f"{self.source}: the pickle asks for {name(module)}."
                            f"{name(attribute)}; t5rank reads only torch tensors and never runs "
                            "other code")
    return _GLOBALS[(module, attribute)]

  def set_items(self, target: Any, items: list[Any]) -> None:
    if not isinstance(target, dict) or len(items) % 2:
      raise _Refused("items are set on something that is not a dict")
    for key in items[::2]:
      if type(key) is not str:  # refused before it is hashed
        raise _Refused(f"a dict key is {quote(key)}, not a name")
    for key, value in zip(items[::2], items[1::2]):
      dict.__setitem__(target, key, value)
    self.grow(target, items[1::2])

  def reduce(self, function: Any, args: Any) -> Any:
    if not isinstance(args, tuple):
      raise _Refused("a call's arguments are not a tuple")
    if isinstance(function, _Rebuild):
      return function(*args)
    if function is collections.OrderedDict and args == ():
      return self.container(collections.OrderedDict(), ())
    raise _Refused(f"the pickle calls {quote(function)}, which torch never calls in a state dict")

  def build(self, target: Any, state: Any) -> None:
    if isinstance(target, dict) and isinstance(state, dict) and set(state) <= {"_metadata"}:
      return  # a state dict's `_metadata` attribute: not read, never set
    what = (f"the attributes {quote(list(state))} of a dict"
            if isinstance(target, dict) and isinstance(state, dict) else type(target).__name__)
    raise TypeError(f"the pickle sets the state of {what}, which torch never does")

  def load(self) -> Any:
    """The pickle's value; CheckpointError (one line naming the file) for anything refused."""
    try:
      return self._run()
    except CheckpointError:
      raise
    except (_Refused, TypeError, ValueError, UnicodeDecodeError, struct.error) as e:
      raise CheckpointError(f"{self.source}: not a readable PyTorch checkpoint ({e})") from None

  def _run(self) -> Any:  # noqa: C901  (one branch per opcode)
    stack, read = self.stack, self.read
    while True:
      op = read(1)
      if op == b"\x80":  # PROTO
        if read(1)[0] > 5:
          raise _Refused("an unknown pickle protocol")
      elif op == b"\x95":  # FRAME: its length only announces what follows
        read(8)
      elif op == b".":  # STOP
        if len(stack) != 1 or self.marks:
          raise _Refused("the pickle ends with a damaged stack")
        return stack[0]
      elif op == b"(":  # MARK
        self.marks.append(len(stack))
      elif op == b"N":
        stack.append(None)
      elif op in (b"\x88", b"\x89"):  # NEWTRUE, NEWFALSE
        stack.append(op == b"\x88")
      elif op == b"J":  # BININT
        stack.append(struct.unpack("<i", read(4))[0])
      elif op == b"K":  # BININT1
        stack.append(read(1)[0])
      elif op == b"M":  # BININT2
        stack.append(struct.unpack("<H", read(2))[0])
      elif op == b"\x8a":  # LONG1
        stack.append(_int(read(read(1)[0])))
      elif op == b"G":  # BINFLOAT
        stack.append(struct.unpack(">d", read(8))[0])
      elif op in (b"X", b"\x8c", b"\x8d"):  # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        size = {b"X": "<I", b"\x8c": "<B", b"\x8d": "<Q"}[op]
        stack.append(read(struct.unpack(size, read(struct.calcsize(size)))[0]).decode("utf-8"))
      elif op == b"c":  # GLOBAL
        module = self.file.readline(1024)
        name = self.file.readline(1024)
        if not (module.endswith(b"\n") and name.endswith(b"\n")):
          raise _Refused("a GLOBAL's names are cut short or too long")
        stack.append(self.global_(module[:-1].decode("utf-8"), name[:-1].decode("utf-8")))
      elif op == b"\x93":  # STACK_GLOBAL
        name, module = self.pop(), self.pop()
        if type(module) is not str or type(name) is not str:
          raise _Refused("a STACK_GLOBAL's names are not strings")
        stack.append(self.global_(module, name))
      elif op in (b"q", b"r", b"\x94"):  # BINPUT, LONG_BINPUT, MEMOIZE
        index = (read(1)[0] if op == b"q" else struct.unpack("<I", read(4))[0] if op == b"r"
                 else len(self.memo))
        if not stack:
          raise _Refused("the pickle's stack is empty")
        self.memo[index] = stack[-1]
      elif op in (b"h", b"j"):  # BINGET, LONG_BINGET
        index = read(1)[0] if op == b"h" else struct.unpack("<I", read(4))[0]
        if index not in self.memo:
          raise _Refused("the pickle refers to a value it never stored")
        stack.append(self.memo[index])
      elif op == b")":  # EMPTY_TUPLE
        stack.append(())
      elif op in (b"\x85", b"\x86", b"\x87", b"t"):  # TUPLE1, TUPLE2, TUPLE3, TUPLE
        if op == b"t":
          items = self.pop_mark()
        else:
          n = {b"\x85": 1, b"\x86": 2, b"\x87": 3}[op]
          if len(stack) < n:
            raise _Refused("the pickle's stack is empty")
          items = stack[-n:]
          del stack[-n:]
        stack.append(self.container(tuple(items), items))
      elif op == b"]":  # EMPTY_LIST
        stack.append(self.container([], ()))
      elif op in (b"a", b"e"):  # APPEND, APPENDS
        items = [self.pop()] if op == b"a" else self.pop_mark()
        target = stack[-1] if stack else None
        if type(target) is not list:
          raise _Refused("items are appended to something that is not a list")
        target.extend(items)
        self.grow(target, items)
      elif op == b"}":  # EMPTY_DICT
        stack.append(self.container({}, ()))
      elif op in (b"s", b"u"):  # SETITEM, SETITEMS
        items = [*reversed([self.pop(), self.pop()])] if op == b"s" else self.pop_mark()
        if not stack:
          raise _Refused("the pickle's stack is empty")
        self.set_items(stack[-1], items)
      elif op == b"Q":  # BINPERSID
        stack.append(self.persistent_load(self.pop()))
      elif op == b"R":  # REDUCE
        args = self.pop()
        stack.append(self.reduce(self.pop(), args))
      elif op == b"b":  # BUILD
        state = self.pop()
        if not stack:
          raise _Refused("the pickle's stack is empty")
        self.build(stack[-1], state)
      else:
        raise _Refused(f"opcode {op!r}, which torch does not write for a state dict")

  def persistent_load(self, pid: Any) -> Storage:
    # zip: ('storage', type, key, location, numel); legacy adds a view of another storage, which
    # torch writes None for the storages of tensors (a tensor's own offset says where it starts).
    if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"
            and isinstance(pid[1], StorageType) and isinstance(pid[2], str)
            and type(pid[4]) is int and pid[4] >= 0):
      raise CheckpointError(f"{self.source}: the pickle refers to {quote(pid)}, which is not a "
                            "torch storage")
    if len(pid) == 6 and pid[5] is not None:
      raise CheckpointError(f"{self.source}: storage {quote(pid[2])} is a view of another storage "
                            f"{quote(pid[5])}; t5rank reads state dicts of tensors, whose "
                            "storages are no views")
    return Storage(pid[2], pid[1].dtype, pid[4])


def _unpickle(file: BinaryIO, source: str) -> Any:
  """One pickle from `file`, read by `_Pickle`; its errors as one CheckpointError."""
  return _Pickle(file, source).load()


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
