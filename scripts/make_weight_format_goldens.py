"""Writes the tiny T5s of tests/golden/hf_* again in the other weight formats that Hugging Face
publishes, for tests/test_torch_checkpoints.py, which needs neither torch nor transformers.

    python3 -m venv /tmp/refenv    # outside the project's venv: older jax, torch
    /tmp/refenv/bin/pip install torch==2.13.0 transformers==4.57.1 safetensors==0.8.0 \\
        jax==0.6.2 jaxlib==0.6.2 flax==0.10.7
    /tmp/refenv/bin/python scripts/make_weight_format_goldens.py  # about 30 s; rewrites
                                                                  # tests/golden/weight_formats/
(jax 0.6.2: transformers 4.57.1's Flax T5 calls `jnp.clip(a_max=...)`, which jax 0.10 removed.)

The weights are those of existing goldens, so their reference.npz holds the expected outputs:
  v1_0   tests/golden/hf_v1_0          (T5 v1.0: relu, tied, scaled)
  v1_1   tests/golden/hf_v1_1          (T5 v1.1: gated-gelu, untied, unscaled)
  mt5    tests/golden/hf5_mt5_untied   (mT5 with a head of its own, unscaled: what every mT5
                                        config.json of transformers 4.x says; here loaded into
                                        4.57.1's MT5ForConditionalGeneration and saved as 4.x does)
Each model is loaded in transformers 4.57.1 and its logits checked against the reference (to 1e-5:
float32 kernels differ between CPUs) before anything is written. For each it writes
tests/golden/weight_formats/NAME_FORMAT/ with the config.json (and generation_config.json) that
transformers writes beside one weight file:
  bin          pytorch_model.bin: `save_pretrained(safe_serialization=False)`, torch's zip format;
               a plain dict whose tied tensors share one storage
  bin_legacy   pytorch_model.bin: `torch.save(model.state_dict(), f,
               _use_new_zipfile_serialization=False)`, as transformers 2.x/3.x saved with torch <
               1.6 (the checkpoints uploaded in 2020): an OrderedDict with `_metadata`, legacy
               format
  msgpack      flax_model.msgpack: transformers' own `Flax(M)T5ForConditionalGeneration
               .from_pretrained(the bin directory, from_pt=True).save_pretrained(...)`; its logits
               are checked against the reference to 1e-4 first
and v1_0_bin_sharded/: pytorch_model.bin.index.json + pytorch_model-0000K-of-0000N.bin
(`save_pretrained(safe_serialization=False, max_shard_size="200KB")`).
tensors_zip.bin, tensors_legacy.bin and tensors.npz: torch.save of a dict of views of one storage
(transposed, strided, offset, a row, a column) and of float16, bfloat16, int64, 0-d and empty
tensors, with the values numpy should read (bfloat16 widened to float32).
goldens.json: the versions, and each directory's golden.
A rerun writes the zip and msgpack files byte for byte again; the legacy files differ only in their
storage keys, which torch's legacy format takes from memory addresses.
"""

from __future__ import annotations

import collections
import json
import os
import shutil

import numpy as np

os.environ.setdefault("USE_TF", "0")  # transformers would otherwise import TensorFlow too
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "golden")
OUT_DIR = os.path.join(GOLDEN_DIR, "weight_formats")
SOURCES = {"v1_0": "hf_v1_0", "v1_1": "hf_v1_1", "mt5": "hf5_mt5_untied"}
TORCH_ATOL = 1e-5  # another CPU's float32 kernels, as tests/test_hf_numerics.py allows
FLAX_ATOL = 1e-4
# config.json fields a transformers 4.x MT5Config is built from (hf5_mt5_untied's are 5.x's)
MT5_FIELDS = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers",
              "num_heads", "relative_attention_num_buckets", "relative_attention_max_distance",
              "dropout_rate", "layer_norm_epsilon", "feed_forward_proj", "pad_token_id",
              "eos_token_id", "decoder_start_token_id")


def load_model(name: str):
  """The golden's model in transformers 4.57.1, its logits checked against its reference.npz."""
  source = os.path.join(GOLDEN_DIR, SOURCES[name])
  if name != "mt5":
    model = transformers.T5ForConditionalGeneration.from_pretrained(source).eval()
  else:  # a 5.x config: build the 4.x mT5 that means the same (untied, unscaled) and load into it
    with open(os.path.join(source, "config.json")) as f:
      fields = {k: v for k, v in json.load(f).items() if k in MT5_FIELDS}
    config = transformers.MT5Config(**fields, tie_word_embeddings=False)
    model = transformers.MT5ForConditionalGeneration(config).eval()
    state = safetensors.torch.load_file(os.path.join(source, "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    copies = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}
    if set(missing) - copies or unexpected or "lm_head.weight" not in state:
      raise AssertionError(f"{source}: missing {missing}, unexpected {unexpected}")
  reference = np.load(os.path.join(source, "reference.npz"))
  with torch.no_grad():
    logits = model(input_ids=torch.from_numpy(reference["input_ids"]).long(),
                   attention_mask=torch.from_numpy(reference["attention_mask"]).long(),
                   decoder_input_ids=torch.from_numpy(reference["decoder_input_ids"]).long()).logits
  gap = float(np.abs(logits.numpy() - reference["logits"]).max())
  print(f"{name}: transformers {transformers.__version__} (torch) is {gap:.2g} from {source}")
  if gap > TORCH_ATOL:
    raise AssertionError(f"{name}: transformers {transformers.__version__} differs from {source}'s "
                         f"reference by {gap}")
  return model, reference


def fresh(directory: str) -> str:
  path = os.path.join(OUT_DIR, directory)
  shutil.rmtree(path, ignore_errors=True)
  os.makedirs(path)
  return path


def write_flax(name: str, bin_dir: str, reference) -> str:
  """flax_model.msgpack as transformers' Flax T5 saves it, after checking its logits."""
  flax_class = (transformers.FlaxMT5ForConditionalGeneration if name == "mt5"
                else transformers.FlaxT5ForConditionalGeneration)
  model = flax_class.from_pretrained(bin_dir, from_pt=True)
  logits = np.asarray(model(input_ids=reference["input_ids"],
                            attention_mask=reference["attention_mask"],
                            decoder_input_ids=reference["decoder_input_ids"]).logits)
  gap = float(np.abs(logits - reference["logits"]).max())
  print(f"{name}: transformers' Flax T5 is {gap:.2g} from the reference")
  if gap > FLAX_ATOL:
    raise AssertionError(f"{name}: transformers' Flax T5 differs from the reference by {gap}")
  directory = fresh(f"{name}_msgpack")
  model.save_pretrained(directory)
  return directory


def write_tensors() -> None:
  """tensors_{zip,legacy}.bin and tensors.npz (module docstring)."""
  base = torch.arange(60, dtype=torch.float32).reshape(6, 10) / 7  # (6, 10), one storage
  tensors = collections.OrderedDict(
      matrix=base, transposed=base.t(), strided=base[1:5, 2:9:3], row=base[3], column=base[:, 4],
      float16=(base[:2] * 3).half(), bfloat16=(base[:2] * 3).bfloat16(),
      int64=torch.arange(-3, 4), scalar=torch.tensor(2.5), empty=torch.zeros(0, 3))
  torch.save(tensors, os.path.join(OUT_DIR, "tensors_zip.bin"))
  torch.save(tensors, os.path.join(OUT_DIR, "tensors_legacy.bin"),
             _use_new_zipfile_serialization=False)
  widened = {k: v.float() if v.dtype == torch.bfloat16 else v for k, v in tensors.items()}
  np.savez(os.path.join(OUT_DIR, "tensors.npz"), **{k: v.numpy() for k, v in widened.items()})


def main() -> None:
  torch.set_num_threads(1)
  os.makedirs(OUT_DIR, exist_ok=True)
  goldens = {}
  for name in SOURCES:
    model, reference = load_model(name)
    bin_dir = fresh(f"{name}_bin")
    model.save_pretrained(bin_dir, safe_serialization=False)
    legacy_dir = fresh(f"{name}_bin_legacy")
    model.config.save_pretrained(legacy_dir)
    model.generation_config.save_pretrained(legacy_dir)
    torch.save(model.state_dict(), os.path.join(legacy_dir, "pytorch_model.bin"),
               _use_new_zipfile_serialization=False)
    flax_dir = write_flax(name, bin_dir, reference)
    goldens.update({os.path.basename(d): SOURCES[name] for d in (bin_dir, legacy_dir, flax_dir)})
    if name == "v1_0":
      sharded_dir = fresh(f"{name}_bin_sharded")
      model.save_pretrained(sharded_dir, safe_serialization=False, max_shard_size="200KB")
      goldens[os.path.basename(sharded_dir)] = SOURCES[name]
  write_tensors()
  import flax
  import jax
  with open(os.path.join(OUT_DIR, "goldens.json"), "w") as f:
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "jax": jax.__version__, "flax": flax.__version__, "goldens": goldens}, f, indent=2)
    f.write("\n")


if __name__ == "__main__":
  main()
