"""The pickle of a torch state dict, read without `pickle`: what `t5rank.checkpoints.torch_pickle`
unpickles, in zip and legacy files alike.

    value = unpickle(file, "pytorch_model.bin")   # a dict of TensorRef, or CheckpointError

`_Pickle` reads the opcodes torch writes for a state dict (protocols 2 to 4) and builds the values
itself, so that it can refuse, before anything is built or hashed, a key that is not a string,
containers nested more than MAX_DEPTH deep, integers past MAX_INT_BITS and any other opcode:
memory and time stay proportional to the pickle's size, and a message quotes a value from the file
only through `t5rank.checkpoints.untrusted.quote`. The only globals it admits (`_GLOBALS`) are what
torch writes for a state dict of plain tensors, checked against files written by torch 2.13 (zip
and legacy) and the layout of torch 1.x's legacy files:
  - `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])`
    (and `_rebuild_tensor(storage, offset, size, stride)` of older files): replaced by a function
    that only records where the tensor lies in its storage;
  - the storage types named in persistent ids (`torch.FloatStorage`, `torch.HalfStorage`, ...,
    `torch.storage.UntypedStorage`): replaced by a dtype record that cannot be called;
  - `collections.OrderedDict`: the state dict itself, and the empty backward-hooks argument (its
    `_metadata` attribute, set by BUILD, is not read, and nothing else takes a state).
Any other global is refused when the pickle names it, before anything is called, with one line
naming it; persistent ids become `Storage` records.
"""

from __future__ import annotations

import collections
import dataclasses
import struct
from typing import Any, BinaryIO, Sequence

import ml_dtypes
import numpy as np

from t5rank.checkpoints.tree import CheckpointError, Shape
from t5rank.checkpoints.untrusted import name, quote

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
MAX_INT_BITS = 128  # the legacy magic number has 80


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


def unpickle(file: BinaryIO, source: str) -> Any:
  """One pickle from `file` (read up to its STOP), read by `_Pickle`; its errors as one
  CheckpointError naming `source`."""
  return _Pickle(file, source).load()
