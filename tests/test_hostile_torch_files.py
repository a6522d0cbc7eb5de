"""Hostile `pytorch_model.bin` files (#66 findings 3, 4, 5, 6, 10, 11): each is a few bytes to a
few megabytes written here, read in a child bounded in memory and time (`tests/hostile.py`), so
that a reader that grows without bound, hangs or crashes fails the test instead of the machine.
Every refusal is one line naming the file, without a control character from the file."""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
import zipfile
import zlib

import pytest

from hostile import one_line_error, read_bounded
from t5rank.checkpoints.torch_pickle import LEGACY_MAGIC, LEGACY_PROTOCOL
from test_torch_checkpoints import (fake_torch, hf_directory, write_torch_legacy,  # noqa: F401
                                    write_torch_zip)

READ = ("from t5rank.checkpoints.torch_pickle import open_torch_file\n"
        "shapes, read = open_torch_file(PATH)\n"
        "for name in shapes:\n"
        "    read(name)\n")
MEMORY = 512 << 20  # the reader and numpy take ~150 MB of it


def _binunicode(text: str) -> bytes:
  data = text.encode()
  return b"X" + struct.pack("<I", len(data)) + data


def _nested_lists(levels: int, width: int) -> bytes:
  """Opcodes pushing one tuple that holds a list of `width` references to a list of `width`
  references ... `levels` deep: a few bytes a level, whose repr() is width**levels strings."""
  out = b"(" + _binunicode("x" * 20) + b"q\x00"  # MARK; memo 0: a string
  for level in range(1, levels + 1):  # EMPTY_LIST, MARK, BINGET x width, APPENDS, BINPUT
    out += b"](" + (b"h" + bytes([level - 1])) * width + b"e" + b"q" + bytes([level])
  return out + b"t"  # TUPLE: the string and every level


def test_a_value_whose_repr_explodes_is_quoted_in_bounded_memory(tmp_path):
  """Finding 3: 6 levels of 100 references (a repr of 100**6 strings) as a storage id, and as the
  legacy format's protocol and key list."""
  bomb = _nested_lists(6, 100)
  directory = hf_directory(tmp_path, "zip", b"\x80\x02" + bomb + b"Q.")
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin", memory=MEMORY))
  assert "which is not a torch storage" in line and len(line) < 400
  magic, protocol = pickle.dumps(LEGACY_MAGIC, 2), pickle.dumps(LEGACY_PROTOCOL, 2)
  info = pickle.dumps({"protocol_version": LEGACY_PROTOCOL, "little_endian": True}, 2)
  for where, pickles in (("protocol", [magic, b"\x80\x02" + bomb + b"."]),
                         ("keys", [magic, protocol, info, b"\x80\x02}.",
                                   b"\x80\x02" + bomb + b"."])):
    path = tmp_path / f"legacy_{where}.bin"
    path.write_bytes(b"".join(pickles))
    line = one_line_error(read_bounded(READ, str(path), memory=MEMORY))
    assert ("not a list of keys" if where == "keys" else "legacy PyTorch protocol") in line
    assert len(line) < 400


def test_a_key_whose_hash_never_ends_is_refused_before_it_is_hashed(tmp_path):
  """Finding 4: dict keys of nested tuples, each the pair (previous, previous): hashing the 60th
  takes 2**60 steps; under 800 bytes."""
  tuples = b")q\x00" + b"".join(b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1])
                                 for i in range(60))
  pkl = b"\x80\x02}(" + tuples + b"K\x01u."  # SETITEMS: () -> t1, t2 -> t3, ..., t60 -> 1
  assert len(pkl) < 800
  directory = hf_directory(tmp_path, "zip", pkl)
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin", seconds=20))
  assert "containers nested more than 8 deep" in line  # t9 already: refused as it is built
  shallow = b"\x80\x02}K\x01\x85K\x01s."  # {(1,): 1}: refused before (1,) is hashed
  (tmp_path / "shallow").mkdir()
  directory = hf_directory(tmp_path / "shallow", "zip", shallow)
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin", seconds=20))
  assert "a dict key is (1,), not a name" in line


def test_tuples_nested_200000_deep_are_refused_not_crashed_on(tmp_path):
  """Finding 4: 200,000 nested tuples (one byte each) as a state dict value: a segfault before."""
  pkl = b"\x80\x02}" + _binunicode("t") + b")" + b"\x85" * 200_000 + b"s."
  directory = hf_directory(tmp_path, "zip", pkl)
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin", seconds=20))
  assert "containers nested more than 8 deep" in line


def _stream_member(archive: zipfile.ZipFile, name: str, size: int) -> None:
  """A deflated member of `size` zero bytes, written in chunks (the test never holds it)."""
  info = zipfile.ZipInfo(name)
  info.compress_type = zipfile.ZIP_DEFLATED
  with archive.open(info, "w", force_zip64=True) as member:
    chunk = bytes(1 << 24)
    for start in range(0, size, len(chunk)):
      member.write(chunk[:min(len(chunk), size - start)])


def test_a_compressed_storage_is_read_as_a_stream_of_its_declared_size(tmp_path, fake_torch):
  """Finding 5: a storage the pickle says holds 12 floats, deflated to a member of 700 MB (a few
  hundred kB on disk), is refused from its declared size; data.pkl past its cap likewise."""
  path = tmp_path / "bomb.bin"
  with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
    archive.writestr("archive/data.pkl", fake_torch({"t": ("0", 12, 0, (12,), (1,))}))
    _stream_member(archive, "archive/data/0", 700 << 20)
  assert path.stat().st_size < 4 << 20
  line = one_line_error(read_bounded(READ, str(path), memory=MEMORY))
  assert "storage '0' declares 734003200 bytes, its tensors say 48" in line
  path = tmp_path / "pickle_bomb.bin"
  with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
    _stream_member(archive, "archive/data.pkl", 300 << 20)
  line = one_line_error(read_bounded(READ, str(path), memory=MEMORY))
  assert "member 'archive/data.pkl' declares 314572800 bytes, more than the" in line


def _header(raw: bytes, signature: bytes, name_at: int, name: bytes) -> int:
  """The offset of the zip header with `signature` whose file name (at `name_at`) is `name`."""
  at = raw.index(signature)
  while raw[at + name_at:at + name_at + len(name)] != name:
    at = raw.index(signature, at + 4)
  return at


@pytest.mark.parametrize("damage, complaint", [
    ("encrypted", "is encrypted"),
    ("method", "compressed by method 99, which t5rank does not read"),
    ("checksum", "cannot be read"),
])
def test_encrypted_unknown_and_damaged_members_are_one_line(tmp_path, fake_torch, damage,
                                                            complaint):
  """Finding 5: the flags and the method of a member (local header and central directory alike),
  and a wrong CRC of a deflated storage."""
  path = tmp_path / "damaged.bin"
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("archive/data.pkl", fake_torch({"t": ("0", 12, 0, (12,), (1,))}))
    archive.writestr("archive/data/0", bytes(range(48)), compress_type=zipfile.ZIP_DEFLATED)
  raw = bytearray(path.read_bytes())
  local = _header(raw, b"PK\x03\x04", 30, b"archive/data/0")
  central = _header(raw, b"PK\x01\x02", 46, b"archive/data/0")
  if damage == "encrypted":
    raw[local + 6] |= 1
    raw[central + 8] |= 1
  elif damage == "method":
    raw[local + 8:local + 10] = struct.pack("<H", 99)
    raw[central + 10:central + 12] = struct.pack("<H", 99)
  else:
    crc = struct.unpack("<I", raw[local + 14:local + 18])[0] ^ 0xFFFF
    raw[local + 14:local + 18] = struct.pack("<I", crc)
    raw[central + 16:central + 20] = struct.pack("<I", crc)
  path.write_bytes(bytes(raw))
  line = one_line_error(read_bounded(READ, str(path), memory=MEMORY))
  assert str(path) in line and complaint in line


@pytest.mark.parametrize("shape, stride, complaint", [
    ((10 ** 12,), (0,), "tensor 't' declares 1000000000000 elements, its storage '0' holds 12"),
    ((2, 2), (2 ** 70, 1), "tensor 't' reaches element 1180591620717411303425"),
    ((1,) * 100, (1,) * 100, "tensor 't' has 100 dimensions (at most 16)"),
    ((2 ** 31, 2 ** 31), (0, 0), "tensor 't' declares 4611686018427387904 elements"),
])
def test_sizes_and_strides_torch_never_writes_are_one_line_from_python_and_the_cli(
    tmp_path, fake_torch, shape, stride, complaint):
  """Finding 6: the Python API and `t5rank score` name the file and the tensor."""
  directory = hf_directory(tmp_path, "zip", b"")
  write_torch_zip(f"{directory}/pytorch_model.bin",
                  fake_torch({"t": ("0", 12, 0, shape, stride)}), [("0", bytes(48))])
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin", memory=MEMORY))
  assert f"{directory}/pytorch_model.bin: {complaint}" in line
  (tmp_path / "q.tsv").write_text("1\tq\n")
  (tmp_path / "c.tsv").write_text("d\tt\n")
  (tmp_path / "r.run").write_text("1 Q0 d 1 1.0 bm25\n")
  result = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", directory, "--queries",
       str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
       str(tmp_path / "r.run"), "-o", str(tmp_path / "out.run")],
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
  assert complaint in result.stderr and "pytorch_model.bin" in result.stderr


def test_names_from_the_pickle_are_escaped_and_bounded(tmp_path):
  """Finding 10: a module name that would clear the terminal and paint it red, and one of 5 MB
  (by STACK_GLOBAL, which has no line to cut it)."""
  paint = b"\x80\x02c\x1b[2J\x1b[31mevil\nsystem\n."
  directory = hf_directory(tmp_path, "zip", paint)
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin"))
  assert "\\x1b[2J\\x1b[31mevil.system" in line and "\x1b" not in line
  huge = b"\x80\x04" + _binunicode("m" * (5 << 20)) + _binunicode("f") + b"\x93."
  (tmp_path / "huge").mkdir()
  directory = hf_directory(tmp_path / "huge", "zip", huge)
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin"))
  assert "the pickle asks for mmmm" in line and len(line) < 400


def test_a_state_dict_that_overrides_items_is_refused(tmp_path, fake_torch):
  """Finding 11: BUILD setting an `items` attribute on the state dict (torch sets only
  `_metadata`, which is not read)."""
  pkl = (b"\x80\x02ccollections\nOrderedDict\n)R}" + _binunicode("items") + b"K\x05sb.")
  directory = hf_directory(tmp_path, "zip", pkl)
  line = one_line_error(read_bounded(READ, f"{directory}/pytorch_model.bin"))
  assert "sets the state of the attributes ['items'] of a dict, which torch never does" in line


@pytest.mark.parametrize("info", [b"](K\x01e", b"}X\r\x00\x00\x00little_endianK\x00s"])
def test_a_legacy_system_info_that_is_no_dict_of_flags_is_refused(tmp_path, info):
  """Finding 11: a list where the system-info dict belongs, or little_endian 0 (not a bool: read
  as big-endian before)."""
  path = tmp_path / "legacy.bin"
  with open(path, "wb") as f:
    f.write(pickle.dumps(LEGACY_MAGIC, 2) + pickle.dumps(LEGACY_PROTOCOL, 2))
    f.write(b"\x80\x02" + info + b".\x80\x02}.\x80\x02].")
  line = one_line_error(read_bounded(READ, str(path)))
  assert "the legacy system-info record is" in line and "little_endian true or false" in line


def test_the_checksums_of_well_formed_compressed_storages_still_read(tmp_path, fake_torch):
  """A deflated storage of the right size reads (torch writes stored ones; others may compress)."""
  import numpy as np

  from t5rank.checkpoints.torch_pickle import open_torch_file

  values = np.arange(12, dtype=np.float32)
  path = tmp_path / "deflated.bin"
  with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
    archive.writestr("archive/data.pkl", fake_torch({"t": ("0", 12, 0, (3, 4), (4, 1))}))
    archive.writestr("archive/data/0", values.tobytes())
  shapes, read = open_torch_file(str(path))
  np.testing.assert_array_equal(read("t"), values.reshape(3, 4))
  assert zlib.crc32(values.tobytes())  # the checksum zipfile verified at the member's end
