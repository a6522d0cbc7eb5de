"""Checkpoint formats: every export then import is bitwise exact, every importer names the tensor
that is missing, misshaped or unexpected, and `load_checkpoint` tells the formats apart.

Foreign checkpoints are written here the way their own tools write them (Mesh TF names with
TensorFlow's SaveV2, t5x's msgpack + TensorStore zarr arrays), from names built independently of
t5rank's mapping, so that a wrong mapping cannot hide behind a symmetric one.
"""

import copy
import json
import os
import re

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from t5rank.checkpoints import CheckpointError, detect_format
from t5rank.checkpoints.native import read_metadata
from t5rank.checkpoints.tree import flatten, unflatten
from t5rank.cli import main as cli_main
from t5rank.models.config import T5Config
from t5rank.models.t5_weights import load_checkpoint, save_checkpoint
from t5rank.models.t5_weights.hf import config_from_hf, config_to_hf, save_hf_checkpoint
from t5rank.models.t5_weights.mesh_tf import save_mesh_tf_checkpoint
from t5rank.testing import random_params

GOLDEN_V1_0 = os.path.join(os.path.dirname(__file__), "golden", "hf_v1_0")
TINY = dict(vocab_size=64, d_model=16, num_heads=2, d_kv=4, d_ff=24, num_encoder_layers=2,
            num_decoder_layers=2)
CONFIGS = {
    "v1_0": T5Config(**TINY, feed_forward="relu", tie_embeddings=True),
    "v1_1": T5Config(**TINY, feed_forward="gated-gelu", tie_embeddings=False),
    # mT5's shape: gated-gelu, untied, and here a decoder deeper than the encoder.
    "mt5": T5Config(**{**TINY, "num_decoder_layers": 3}, feed_forward="gated-gelu",
                    tie_embeddings=False),
}




def assert_identical(a, b):
  a, b = flatten(a), flatten(b)
  assert sorted(a) == sorted(b)
  for name in a:
    assert a[name].dtype == b[name].dtype == np.float32, name
    assert np.array_equal(a[name], b[name]), name


@pytest.fixture(scope="module")
def golden():
  """The HF v1.0 golden checkpoint, imported: real-looking weights from another implementation."""
  return load_checkpoint(GOLDEN_V1_0)


# --- native -----------------------------------------------------------------------------------

def test_native_round_trip_is_exact(tmp_path):
  config = CONFIGS["v1_1"]
  params = random_params(config, std=1.0)
  save_checkpoint(str(tmp_path / "ckpt"), params, config, extra_metadata={"step": 12})
  assert detect_format(str(tmp_path / "ckpt")) == "native"
  restored_config, restored = load_checkpoint(str(tmp_path / "ckpt"))
  assert restored_config == config
  assert_identical(params, restored)
  assert read_metadata(str(tmp_path / "ckpt")) == {"step": 12}
  with pytest.raises(FileExistsError, match="already holds a checkpoint"):
    save_checkpoint(str(tmp_path / "ckpt"), params, config)


def test_a_config_json_with_a_value_of_the_wrong_type_is_refused_in_one_line(tmp_path):
  # #58: "d_model": "sixty-four" gave a traceback from inside jax
  config = CONFIGS["v1_0"]
  save_checkpoint(str(tmp_path / "ckpt"), random_params(config), config)
  path = tmp_path / "ckpt" / "config.json"
  path.write_text(path.read_text().replace('"d_model": 16', '"d_model": "sixty-four"'))
  with pytest.raises(ValueError, match=r"^\S+/ckpt/config.json: not a T5Config \(ValueError: "
                     r"T5Config.d_model must be an integer, got 'sixty-four'\)$"):
    load_checkpoint(str(tmp_path / "ckpt"))


def test_save_rejects_params_of_another_config(tmp_path):
  params = random_params(CONFIGS["v1_0"], std=1.0)
  with pytest.raises(CheckpointError, match=r"'encoder/layers_0/mlp/wi_0/kernel' \(expected"):
    save_checkpoint(str(tmp_path / "ckpt"), params, CONFIGS["v1_1"])
  assert not os.path.exists(tmp_path / "ckpt" / "config.json")


def test_given_config_must_match_the_stored_one(tmp_path):
  config = CONFIGS["v1_0"]
  save_checkpoint(str(tmp_path / "ckpt"), random_params(config, std=1.0), config)
  run_config, _ = load_checkpoint(str(tmp_path / "ckpt"), config.replace(dtype="bfloat16"))
  assert run_config.dtype == "bfloat16"
  with pytest.raises(CheckpointError, match="d_ff: given 32, checkpoint 24"):
    load_checkpoint(str(tmp_path / "ckpt"), config.replace(d_ff=32))


# --- Hugging Face -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_export_then_import_is_exact(tmp_path, name):
  config = CONFIGS[name]
  params = random_params(config, std=1.0)
  save_hf_checkpoint(str(tmp_path), params, config)
  if name == "mt5":  # HF's mT5 configs say model_type "mt5"; the weights are named alike
    hf_config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf_config, "model_type": "mt5"}))
  tensors = load_file(str(tmp_path / "model.safetensors"))
  assert ("lm_head.weight" in tensors) == (not config.tie_embeddings)
  q = tensors["encoder.block.1.layer.0.SelfAttention.q.weight"]  # torch Linear: (out, in)
  assert np.array_equal(q, params["encoder"]["layers_1"]["attention"]["query"]["kernel"].T)
  assert detect_format(str(tmp_path)) == "hf"
  imported_config, imported = load_checkpoint(str(tmp_path))
  assert imported_config == config
  assert_identical(params, imported)


def test_hf_config_mapping():
  for config in CONFIGS.values():
    assert config_from_hf(config_to_hf(config)) == config
  # An original T5 v1.0 config.json names neither the feed-forward nor the tying: HF defaults.
  old = {"model_type": "t5", "d_model": 768, "d_ff": 3072, "num_layers": 12, "num_heads": 12,
         "vocab_size": 32128}
  assert config_from_hf(old) == T5Config(d_model=768, d_ff=3072, num_heads=12,
                                         num_encoder_layers=12, num_decoder_layers=12)
  with pytest.raises(CheckpointError, match="gated-silu"):
    config_from_hf({**old, "feed_forward_proj": "gated-silu"})


def test_hf_sharded_with_stored_embedding_copies(tmp_path):
  config = CONFIGS["v1_0"]
  params = random_params(config, std=1.0)
  save_hf_checkpoint(str(tmp_path / "one"), params, config)
  tensors = load_file(str(tmp_path / "one" / "model.safetensors"))
  # Older exports store the tied copies too; here `shared.weight` itself is left out.
  embedding = tensors.pop("shared.weight")
  tensors.update({"encoder.embed_tokens.weight": embedding,
                  "decoder.embed_tokens.weight": embedding, "lm_head.weight": embedding})
  names = sorted(tensors)
  shards = {"model-00001-of-00002.safetensors": names[::2],
            "model-00002-of-00002.safetensors": names[1::2]}
  sharded = tmp_path / "sharded"
  sharded.mkdir()
  for file, keys in shards.items():
    save_file({k: tensors[k] for k in keys}, str(sharded / file), metadata={"format": "pt"})
  index = {"metadata": {}, "weight_map": {k: f for f, keys in shards.items() for k in keys}}
  (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
  (sharded / "config.json").write_text((tmp_path / "one" / "config.json").read_text())
  _, imported = load_checkpoint(str(sharded))
  assert_identical(params, imported)

  changed = dict(tensors, **{"lm_head.weight": embedding + 1})
  save_file({k: changed[k] for k in shards["model-00001-of-00002.safetensors"]},
            str(sharded / "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
  save_file({k: changed[k] for k in shards["model-00002-of-00002.safetensors"]},
            str(sharded / "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
  with pytest.raises(CheckpointError, match="'lm_head.weight' differs from"):
    load_checkpoint(str(sharded))


def test_hf_bfloat16_weights_are_widened_to_float32(tmp_path):
  import ml_dtypes
  config = CONFIGS["v1_1"]
  save_hf_checkpoint(str(tmp_path), random_params(config, std=1.0), config)
  tensors = {k: v.astype(ml_dtypes.bfloat16)
             for k, v in load_file(str(tmp_path / "model.safetensors")).items()}
  save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
  _, imported = load_checkpoint(str(tmp_path))
  wo = imported["decoder"]["layers_1"]["mlp"]["wo"]["kernel"]
  assert wo.dtype == np.float32
  expected = tensors["decoder.block.1.layer.2.DenseReluDense.wo.weight"].astype(np.float32).T
  assert np.array_equal(wo, expected)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.pop("decoder.block.1.layer.2.DenseReluDense.wo.weight"),
     r"1 missing tensor\(s\): 'decoder.block.1.layer.2.DenseReluDense.wo.weight' "
     r"\(expected shape \(16, 24\)\)"),
    (lambda t: t.update({"encoder.block.0.layer.1.DenseReluDense.wi.weight": np.zeros((16, 24),
                                                                                     np.float32)}),
     r"1 misshaped tensor\(s\): 'encoder.block.0.layer.1.DenseReluDense.wi.weight': "
     r"expected shape \(24, 16\), got \(16, 24\)"),
    (lambda t: t.update({"encoder.block.0.layer.0.SelfAttention.q.bias": np.zeros(8, np.float32)}),
     r"1 unexpected tensor\(s\): 'encoder.block.0.layer.0.SelfAttention.q.bias' \(8,\)"),
])
def test_hf_import_names_the_bad_tensor(tmp_path, edit, message):
  config = CONFIGS["v1_0"]
  save_hf_checkpoint(str(tmp_path), random_params(config, std=1.0), config)
  tensors = load_file(str(tmp_path / "model.safetensors"))
  edit(tensors)
  save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
  with pytest.raises(CheckpointError, match=message):
    load_checkpoint(str(tmp_path))


# --- Mesh TensorFlow --------------------------------------------------------------------------

def hf_to_mesh_tf_name(name: str) -> str:
  """The Mesh TF name of an HF T5 tensor, as the original T5 release spells it."""
  name = name.replace("shared.weight", "shared/embedding").replace("lm_head.weight",
                                                                    "decoder/logits/kernel")
  name = re.sub(r"\.block\.(\d+)\.layer\.(\d+)\.",
                lambda m: f"/block_{int(m[1]):03d}/layer_{int(m[2]):03d}/", name)
  name = re.sub(r"DenseReluDense\.(\w+)\.weight$", r"DenseReluDense/\1/kernel", name)
  name = re.sub(r"(layer_norm)\.weight$", r"\1/scale", name)
  name = re.sub(r"(Attention)\.(\w+)\.weight$", r"\1/\2", name)
  return name.replace(".", "/")


def write_mesh_tf(prefix: str, tensors: dict) -> None:
  import tensorflow as tf
  names = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(tensors[n]) for n in names])


def test_mesh_tf_from_the_golden_hf_weights(tmp_path, golden):
  """The HF golden checkpoint renamed to Mesh TF names (kernels back to (in, out)), plus Adafactor
  slots and the step, imports to exactly the parameters the HF importer gives."""
  config, hf_params = golden
  tensors = {}
  for name, value in load_file(os.path.join(GOLDEN_V1_0, "model.safetensors")).items():
    is_embedding = name == "shared.weight"
    tensors[hf_to_mesh_tf_name(name)] = value if is_embedding or value.ndim == 1 else value.T
  tensors["encoder/block_000/layer_000/SelfAttention/q_slot_vc"] = np.zeros(32, np.float32)
  tensors["shared/embedding_slot_vr"] = np.zeros(config.vocab_size, np.float32)
  tensors["global_step"] = np.asarray(1000, np.int64)
  prefix = str(tmp_path / "model.ckpt-1000")
  write_mesh_tf(prefix, tensors)
  assert detect_format(prefix) == "mesh_tf"
  with pytest.raises(CheckpointError, match="carries no T5 config.*'d_model': 32"):
    load_checkpoint(prefix)
  imported_config, imported = load_checkpoint(prefix, config)
  assert imported_config == config
  assert_identical(hf_params, imported)

  tensors["encoder/block_001/layer_001/DenseReluDense/wo/kernel"] = np.zeros((3, 3), np.float32)
  tensors["encoder/block_000/layer_000/SelfAttention/q_bias"] = np.zeros(32, np.float32)
  write_mesh_tf(prefix, tensors)
  with pytest.raises(CheckpointError) as error:
    load_checkpoint(prefix, config)
  assert ("'encoder/block_001/layer_001/DenseReluDense/wo/kernel': expected shape (48, 32), "
          "got (3, 3)") in str(error.value)
  assert "unexpected tensor(s): 'encoder/block_000/layer_000/SelfAttention/q_bias'" in str(
      error.value)


@pytest.mark.parametrize("name", ["v1_0", "mt5"])
def test_mesh_tf_export_then_import_is_exact(tmp_path, name):
  config = CONFIGS[name]
  params = random_params(config, std=1.0)
  save_mesh_tf_checkpoint(str(tmp_path), params, config, step=5)
  assert detect_format(str(tmp_path)) == "mesh_tf"
  with pytest.raises(CheckpointError, match="d_ff=48 but the checkpoint has 24"):
    load_checkpoint(str(tmp_path), config.replace(d_ff=48))
  _, imported = load_checkpoint(str(tmp_path), config)
  assert_identical(params, imported)


# --- t5x --------------------------------------------------------------------------------------

def write_t5x(step_dir: str, params) -> None:
  """A t5x checkpoint as t5x.checkpoints.Checkpointer writes one: arrays as zarr (gzip) through
  TensorStore at `target.<dotted name>`, their specs (relative paths) in the msgpack `checkpoint`;
  layer norm scales inline in the msgpack, as unpartitioned arrays are."""
  import tensorstore as ts
  from flax import serialization

  os.makedirs(step_dir)
  target = {}
  for name, value in flatten(params).items():
    if name.endswith("/scale"):
      target[name] = value
      continue
    path = "target." + name.replace("/", ".")
    spec = {"driver": "zarr", "dtype": "float32", "kvstore": {"driver": "file", "path": path},
            "metadata": {"compressor": {"id": "gzip"}, "shape": list(value.shape),
                         "chunks": list(value.shape)}}
    absolute = copy.deepcopy(spec)
    absolute["kvstore"]["path"] = os.path.join(step_dir, path)
    ts.open(absolute, create=True, open=True).result().write(value).result()
    target[name] = ts.Spec(spec).to_json()
  state = {"step": np.int32(7),
           "param_states": {"token_embedder": {"embedding": {"v_row": np.zeros(4, np.float32)}}}}
  contents = {"version": 3, "optimizer": {"target": unflatten(target), "state": state}}
  with open(os.path.join(step_dir, "checkpoint"), "wb") as f:
    f.write(serialization.msgpack_serialize(contents))


@pytest.mark.parametrize("name", ["v1_0", "v1_1"])
def test_t5x_checkpoint_imports_exactly(tmp_path, name):
  config = CONFIGS[name]
  old, new = random_params(config, seed=1, std=1.0), random_params(config, seed=2, std=1.0)
  write_t5x(str(tmp_path / "checkpoint_100"), old)
  write_t5x(str(tmp_path / "checkpoint_1000"), new)
  assert detect_format(str(tmp_path)) == "t5x"
  with pytest.raises(CheckpointError, match="carries no T5 config"):
    load_checkpoint(str(tmp_path))
  _, latest = load_checkpoint(str(tmp_path), config)  # the model directory: latest step
  assert_identical(new, latest)
  _, step_100 = load_checkpoint(str(tmp_path / "checkpoint_100" / "checkpoint"), config)
  assert_identical(old, step_100)


def test_t5x_names_the_bad_tensor(tmp_path):
  config = CONFIGS["v1_0"]
  params = random_params(config, std=1.0)
  del params["decoder"]["layers_1"]["encoder_decoder_attention"]["value"]
  write_t5x(str(tmp_path / "checkpoint_1"), params)
  with pytest.raises(CheckpointError,
                     match="missing tensor.*'decoder/layers_1/encoder_decoder_attention/value/k"):
    load_checkpoint(str(tmp_path / "checkpoint_1"), config)


def test_t5x_orbax_layout_imports_exactly(tmp_path):
  import orbax.checkpoint as ocp
  config = CONFIGS["v1_1"]
  params = random_params(config, std=1.0)
  ocp.PyTreeCheckpointer().save(str(tmp_path / "checkpoint_3" / "state"),
                                {"target": params, "state": {"step": np.int32(3)}})
  assert detect_format(str(tmp_path)) == "t5x"
  _, imported = load_checkpoint(str(tmp_path), config)
  assert_identical(params, imported)


# --- detection and the command ----------------------------------------------------------------

def test_unknown_directory_is_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="no checkpoint found"):
    detect_format(str(tmp_path))
  (tmp_path / "pytorch_model.bin").write_bytes(b"")  # weights, but no config.json
  with pytest.raises(FileNotFoundError, match="no checkpoint found"):
    detect_format(str(tmp_path))
  (tmp_path / "config.json").write_text("{}")  # now a Hugging Face directory whose .bin is empty
  with pytest.raises(CheckpointError, match=r"pytorch_model.bin: not a readable PyTorch"):
    load_checkpoint(str(tmp_path))


def test_convert_command_hf_to_native_to_hf(tmp_path, golden):
  config, params = golden
  assert cli_main(["convert", "--input", GOLDEN_V1_0, "--output", str(tmp_path / "native"),
                   "--to", "native"]) == 0
  assert cli_main(["convert", "--input", str(tmp_path / "native"), "--output",
                   str(tmp_path / "hf"), "--to", "hf"]) == 0
  back_config, back = load_checkpoint(str(tmp_path / "hf"))
  assert back_config == config
  assert_identical(params, back)
