"""Hugging Face weights as PyTorch and Flax publish them: `pytorch_model.bin` (torch's zip and
legacy layouts, and shards) read without torch and without running its pickle, and
`flax_model.msgpack`.

tests/golden/weight_formats/ was written by scripts/make_weight_format_goldens.py with torch 2.13,
transformers 4.57.1 and its Flax T5 (goldens.json): the weights of hf_v1_0, hf_v1_1 and
hf5_mt5_untied (an mT5 with its own head) in each format, so that their reference.npz holds what
transformers computes. This test needs neither torch nor transformers. The pickles that would run
code are written here with plain `pickle`, laid out as torch lays out its files.
"""

import collections
import functools
import io
import json
import os
import pickle
import re
import shutil
import sys
import types
import zipfile

import jax
import numpy as np
import pytest

from t5rank.checkpoints import CheckpointError, detect_format
from t5rank.checkpoints.formats import WEIGHT_FILES
from t5rank.checkpoints.torch_pickle import LEGACY_MAGIC, LEGACY_PROTOCOL, open_torch_file
from t5rank.checkpoints.tree import flatten
from t5rank.models.monot5 import score_step
from t5rank.models.network import T5
from t5rank.models.t5_weights import load_checkpoint
from t5rank.models.t5_weights.hf import load_hf_checkpoint

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "golden")
FORMATS_DIR = os.path.join(GOLDEN_DIR, "weight_formats")
with open(os.path.join(FORMATS_DIR, "goldens.json")) as _f:
  GOLDENS = json.load(_f)["goldens"]  # directory -> the golden whose weights and reference it has
TARGET_IDS = (1176, 6136)
ATOL = 1e-5  # as tests/test_hf_numerics.py


def weight_file(directory: str) -> str:
  """The one kind of weight file in a golden directory (an index counts as its format)."""
  kinds = {name for name in WEIGHT_FILES for f in os.listdir(directory)
           if f == name or f == f"{name}.index.json"}
  assert len(kinds) == 1, (directory, kinds)
  return kinds.pop()


# --- the published formats give transformers' outputs -----------------------------------------

def test_every_model_has_every_format():
  expected = {f"{model}_{kind}" for model in ("v1_0", "v1_1", "mt5")
              for kind in ("bin", "bin_legacy", "msgpack")} | {"v1_0_bin_sharded"}
  assert set(GOLDENS) == expected
  heads = {"bin": b"PK\x03\x04", "bin_legacy": b"\x80\x02"}  # a zip; a pickle (PROTO 2)
  for name in GOLDENS:
    directory = os.path.join(FORMATS_DIR, name)
    kind = re.fullmatch(r"(v1_0|v1_1|mt5)_(\w+)", name)[2]
    assert weight_file(directory) == ("flax_model.msgpack" if kind == "msgpack"
                                      else "pytorch_model.bin")
    if kind == "bin_sharded":
      assert os.path.isfile(os.path.join(directory, "pytorch_model.bin.index.json"))
    elif kind in heads:
      with open(os.path.join(directory, "pytorch_model.bin"), "rb") as f:
        assert f.read(4).startswith(heads[kind]), name


@pytest.fixture(scope="module", params=sorted(GOLDENS))
def golden(request):
  directory = os.path.join(FORMATS_DIR, request.param)
  source = os.path.join(GOLDEN_DIR, GOLDENS[request.param])
  assert detect_format(directory) == "hf"
  config, params = load_checkpoint(directory)
  return (request.param, config, params, load_hf_checkpoint(source),
          dict(np.load(os.path.join(source, "reference.npz"))))


def test_weights_are_the_safetensors_goldens_bit_for_bit(golden):
  _, config, params, (source_config, source_params), _ = golden
  assert config == source_config
  ours, theirs = flatten(params), flatten(source_params)
  assert sorted(ours) == sorted(theirs)
  for name in ours:
    assert ours[name].dtype == np.float32 and np.array_equal(ours[name], theirs[name]), name


@functools.cache
def _apply(config):
  return jax.jit(T5(config).apply)


def test_full_logits_match_transformers(golden):
  _, config, params, _, reference = golden
  logits = _apply(config)({"params": params}, reference["input_ids"],
                          reference["decoder_input_ids"])  # (B, T, V)
  np.testing.assert_allclose(np.asarray(logits), reference["logits"], rtol=0, atol=ATOL)


def test_monot5_score_matches_transformers(golden):
  _, config, params, _, reference = golden
  log_p, p = score_step(params, reference["input_ids"], config=config, target_ids=TARGET_IDS)
  np.testing.assert_allclose(np.asarray(log_p), reference["log_p_true"], rtol=0, atol=ATOL)
  np.testing.assert_allclose(np.asarray(p), reference["p_true"], rtol=0, atol=ATOL)
  assert np.ptp(reference["log_p_true"]) > 0.1  # rows that differ: a wrong weight would show


@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_views_dtypes_and_shared_storages(layout):
  # torch.save of views of one (6, 10) storage (transposed, strided, offset) and other dtypes
  shapes, read = open_torch_file(os.path.join(FORMATS_DIR, f"tensors_{layout}.bin"))
  expected = np.load(os.path.join(FORMATS_DIR, "tensors.npz"))
  assert shapes == {name: expected[name].shape for name in expected.files}
  assert expected["strided"].shape == (4, 3) and expected["strided"][0, 1] == 15 / 7
  for name in expected.files:
    value = read(name)
    assert value.dtype == (np.dtype("bfloat16") if name == "bfloat16"
                           else expected[name].dtype), name
    np.testing.assert_array_equal(value.astype(expected[name].dtype), expected[name], name)


# --- the pickle is never run ------------------------------------------------------------------

class Payload:
  """Pickles as a call of `function(argument)`: what a malicious checkpoint carries."""

  def __init__(self, function, argument):
    self.function, self.argument = function, argument

  def __reduce__(self):
    return self.function, (self.argument,)


def write_torch_zip(path, data_pkl: bytes, storages=()) -> None:
  """A zip laid out as torch >= 1.6 writes one."""
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("archive/data.pkl", data_pkl)
    archive.writestr("archive/byteorder", "little")
    archive.writestr("archive/version", "3\n")
    for key, data in storages:
      archive.writestr(f"archive/data/{key}", data)


def write_torch_legacy(path, state_pkl: bytes, magic=LEGACY_MAGIC) -> None:
  """The five pickles of torch's legacy layout (no storages follow an empty key list)."""
  with open(path, "wb") as f:
    for value in (magic, LEGACY_PROTOCOL, {"protocol_version": LEGACY_PROTOCOL,
                                            "little_endian": True}):
      f.write(value if isinstance(value, bytes) else pickle.dumps(value, protocol=2))
    f.write(state_pkl)
    f.write(pickle.dumps([], protocol=2))


def hf_directory(tmp_path, layout: str, state_pkl: bytes, magic=LEGACY_MAGIC) -> str:
  """A Hugging Face directory (the v1.0 golden's config), its pytorch_model.bin holding the
  pickle."""
  directory = tmp_path / "model"
  directory.mkdir()
  shutil.copy(os.path.join(GOLDEN_DIR, "hf_v1_0", "config.json"), directory)
  path = directory / "pytorch_model.bin"
  if layout == "zip":
    write_torch_zip(path, state_pkl)
  else:
    write_torch_legacy(path, state_pkl, magic)
  return str(directory)


def payloads(marker):
  """(what the refusal names, the pickle's payload): each would create `marker` if run."""
  return [(r"(os|posix)\.system", Payload(os.system, f"touch {marker}")),
          (r"(__builtin__|builtins)\.eval", Payload(eval, f"open({str(marker)!r}, 'w').close()")),
          (r"(__builtin__|builtins)\.exec", Payload(exec, f"open({str(marker)!r}, 'w').close()"))]


@pytest.mark.parametrize("layout", ["zip", "legacy"])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_pickle_that_would_run_code_is_refused_and_not_run(tmp_path, layout, which):
  marker = tmp_path / "MARKER"
  named, payload = payloads(marker)[which]
  pickled = pickle.dumps({"shared.weight": payload}, protocol=2)
  pickle.loads(pickled)  # not vacuous: plain pickle runs it
  assert marker.exists()
  marker.unlink()
  directory = hf_directory(tmp_path, layout, pickled)
  with pytest.raises(CheckpointError) as error:
    load_checkpoint(directory)
  message = str(error.value)
  assert "\n" not in message and "pytorch_model.bin: the pickle asks for" in message, message
  assert re.search(named, message) and "never runs other code" in message, message
  assert not marker.exists()


def test_legacy_pickles_before_the_state_dict_are_restricted_too(tmp_path):
  marker = tmp_path / "MARKER"
  magic = pickle.dumps(Payload(os.system, f"touch {marker}"), protocol=2)
  directory = hf_directory(tmp_path, "legacy", pickle.dumps({}, protocol=2), magic=magic)
  with pytest.raises(CheckpointError, match=r"the pickle asks for (os|posix)\.system"):
    load_checkpoint(directory)
  assert not marker.exists()


def test_a_storage_type_that_is_no_storage_type_is_refused(tmp_path):
  # the persistent id, which names the storage's type, is unpickled by the same restricted rules
  class Storage:
    pass

  class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
      return ("storage", os.system, "0", "cpu", 4) if isinstance(obj, Storage) else None

  buffer = io.BytesIO()
  Pickler(buffer, protocol=2).dump({"shared.weight": Storage()})
  write_torch_zip(tmp_path / "x.bin", buffer.getvalue())
  with pytest.raises(CheckpointError, match=r"x.bin: the pickle asks for (os|posix)\.system"):
    open_torch_file(str(tmp_path / "x.bin"))


@pytest.fixture
def fake_torch(monkeypatch):
  """`tensor_pickle(tensors)`: a data.pkl as torch writes it, for tensors given as (storage key,
  storage numel, offset, shape, stride) of float32, pickled through stand-ins of torch's
  `_rebuild_tensor_v2` and `FloatStorage` (torch is not installed for the tests)."""
  torch, utils = types.ModuleType("torch"), types.ModuleType("torch._utils")

  def _rebuild_tensor_v2(*args):
    raise AssertionError("never called")

  class FloatStorage:
    pass

  _rebuild_tensor_v2.__module__ = "torch._utils"
  _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
  FloatStorage.__module__, FloatStorage.__qualname__ = "torch", "FloatStorage"
  utils._rebuild_tensor_v2, torch.FloatStorage = _rebuild_tensor_v2, FloatStorage
  torch._utils = utils
  monkeypatch.setitem(sys.modules, "torch", torch)
  monkeypatch.setitem(sys.modules, "torch._utils", utils)

  class Storage(tuple):
    pass

  class Tensor:
    def __init__(self, key, numel, offset, shape, stride):
      self.args = Storage((key, numel)), offset, shape, stride

    def __reduce__(self):
      return _rebuild_tensor_v2, (*self.args, False, collections.OrderedDict())

  class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
      return (("storage", FloatStorage, obj[0], "cpu", obj[1]) if isinstance(obj, Storage)
              else None)

  def tensor_pickle(tensors):
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump({name: Tensor(*t) for name, t in tensors.items()})
    return buffer.getvalue()

  return tensor_pickle


def test_the_stand_in_pickles_read_as_torch_files_do(tmp_path, fake_torch):
  data = np.arange(12, dtype="<f4")
  write_torch_zip(tmp_path / "ok.bin", fake_torch({"t": ("0", 12, 1, (3, 2), (1, 4))}),
                  [("0", data.tobytes())])
  shapes, read = open_torch_file(str(tmp_path / "ok.bin"))
  assert shapes == {"t": (3, 2)}
  np.testing.assert_array_equal(read("t"), [[1, 5], [2, 6], [3, 7]])


@pytest.mark.parametrize("tensor, storage_bytes, complaint", [
    (("0", 12, 1, (3, 4), (4, 1)), 48, "tensor 't' reaches element 12, its storage '0' holds 12"),
    (("0", 12, 0, (3,), (-1,)), 48, "tensor 't' has a negative size, stride or offset"),
    (("0", 12, 0, (12,), (1,)), 40, "holds 40 bytes, its tensors need 48"),
    (("1", 12, 0, (12,), (1,)), 48, r"storage '1' is missing"),
])
def test_a_tensor_outside_its_storage_is_refused(tmp_path, fake_torch, tensor, storage_bytes,
                                                 complaint):
  """A tensor's extent is refused when the file is opened (the first two) or when its bytes are
  read (the last two: what the zip holds)."""
  write_torch_zip(tmp_path / "bad.bin", fake_torch({"t": tensor}),
                  [("0", bytes(storage_bytes))])
  with pytest.raises(CheckpointError, match=r"bad.bin: .*" + complaint):
    shapes, read = open_torch_file(str(tmp_path / "bad.bin"))
    read("t")


# --- shards, the order of formats, damaged files ----------------------------------------------

def test_a_missing_shard_is_named(tmp_path):
  directory = tmp_path / "sharded"
  shutil.copytree(os.path.join(FORMATS_DIR, "v1_0_bin_sharded"), directory)
  os.remove(directory / "pytorch_model-00002-of-00002.bin")
  with pytest.raises(FileNotFoundError, match=r"pytorch_model-00002-of-00002.bin not found "
                     r"\(listed in .*pytorch_model.bin.index.json\)"):
    load_checkpoint(str(directory))


SOURCES = {"model.safetensors": os.path.join(GOLDEN_DIR, "hf_v1_0"),
           "flax_model.msgpack": os.path.join(FORMATS_DIR, "v1_0_msgpack"),
           "pytorch_model.bin": os.path.join(FORMATS_DIR, "v1_0_bin")}


@pytest.mark.parametrize("winner", range(len(WEIGHT_FILES)))
def test_one_order_when_a_directory_holds_several_formats(tmp_path, winner):
  # safetensors, then msgpack, then bin: the first present is read, whatever the others hold
  assert WEIGHT_FILES == ("model.safetensors", "flax_model.msgpack", "pytorch_model.bin")
  _, expected = load_hf_checkpoint(SOURCES["model.safetensors"])
  for damaged in (False, True):
    directory = tmp_path / f"damaged_{damaged}"
    directory.mkdir()
    shutil.copy(os.path.join(GOLDEN_DIR, "hf_v1_0", "config.json"), directory)
    for rank, name in enumerate(WEIGHT_FILES):
      if rank == winner and not damaged or rank > winner:
        shutil.copy(os.path.join(SOURCES[name], name), directory)
      elif rank == winner:
        (directory / name).write_bytes(b"not weights")
    if damaged:  # the winner is read even when a later format is intact
      with pytest.raises(CheckpointError, match=re.escape(WEIGHT_FILES[winner])):
        load_checkpoint(str(directory))
    else:
      _, params = load_checkpoint(str(directory))
      assert all(np.array_equal(a, b) for a, b in zip(flatten(params).values(),
                                                       flatten(expected).values()))


def test_a_later_format_is_never_opened(tmp_path):
  directory = tmp_path / "model"
  shutil.copytree(os.path.join(FORMATS_DIR, "v1_0_msgpack"), directory)
  (directory / "pytorch_model.bin").write_bytes(b"not weights")
  _, params = load_checkpoint(str(directory))  # the damaged .bin is not looked at
  _, expected = load_hf_checkpoint(SOURCES["model.safetensors"])
  ours, theirs = flatten(params), flatten(expected)
  assert ours.keys() == theirs.keys()
  assert all(np.array_equal(ours[name], theirs[name]) for name in ours)


@pytest.mark.parametrize("golden_name, file, cut, complaint", [
    ("v1_0_bin", "pytorch_model.bin", 0.5, r"a damaged zip file \(truncated\?\)"),
    ("v1_0_bin_legacy", "pytorch_model.bin", 0.9, r"truncated: storage '\d+' ends past the file"),
    ("v1_0_bin_legacy", "pytorch_model.bin", 0.001, r"not a readable PyTorch checkpoint"),
    ("v1_0_bin", "pytorch_model.bin", 0.0, r"not a readable PyTorch checkpoint \(the pickle is "
     r"cut short"),
    ("v1_0_msgpack", "flax_model.msgpack", 0.5, r"not a readable Flax msgpack file"),
])
def test_a_truncated_file_gets_one_line_naming_it(tmp_path, golden_name, file, cut, complaint):
  directory = tmp_path / "model"
  shutil.copytree(os.path.join(FORMATS_DIR, golden_name), directory)
  path = directory / file
  data = path.read_bytes()
  path.write_bytes(data[:int(len(data) * cut)])
  with pytest.raises(CheckpointError) as error:
    load_checkpoint(str(directory))
  message = str(error.value)
  assert "\n" not in message and message.startswith(f"{path}: "), message
  assert re.search(complaint, message), message


def test_a_pickle_that_sets_the_state_of_a_shared_record_is_refused():
  """BUILD on what find_class hands out (shared by every load) is refused, nothing changed."""
  import io

  from t5rank.checkpoints import restricted_pickle

  before = {k: (getattr(v, "dtype", None)) for k, v in restricted_pickle._GLOBALS.items()}
  for name in (b"torch\nFloatStorage\n", b"torch._utils\n_rebuild_tensor_v2\n"):
    payload = b"\x80\x02c" + name + b"}X\x05\x00\x00\x00dtypeK\x01sb."
    with pytest.raises(CheckpointError, match="sets the state"):
      restricted_pickle.unpickle(io.BytesIO(payload), "evil.bin")
  assert {k: getattr(v, "dtype", None) for k, v in restricted_pickle._GLOBALS.items()} == before
