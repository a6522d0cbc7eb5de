"""Helpers shared by the tests and the benchmarks: random weights without compilation, the
micro T5 whose compilation is cheap enough for tests, and the matrix products of a compiled
program."""

from __future__ import annotations

import re
from typing import Optional

import numpy as np

from t5rank.models.config import T5Config, get_config

# One query and six short insurance texts with BM25-like scores: what the front door's tests rank.
SAMPLE_QUERY = "does life insurance cover a car accident"
SAMPLE_DOCUMENTS = (
    "Life insurance pays a death benefit when the insured dies, whatever the cause.",
    "Car insurance covers damage to your car after an accident.",
    "A term life policy lasts a fixed number of years.",
    "Homeowners insurance protects your house and what is in it.",
    "An accidental death rider adds to the life insurance benefit.",
    "Deductibles are what you pay before the insurer pays.")
SAMPLE_BM25 = (7.5, 6.25, 5.0, 1.5, 6.75, 2.0)

# A 1+1-layer, d_model 32 T5 (T5's vocabulary unless overridden): cheap to compile, for tests.
MICRO = dict(d_model=32, d_ff=64, num_heads=2, d_kv=16, num_encoder_layers=1, num_decoder_layers=1)


def micro_config(**overrides) -> T5Config:
  """The `tiny` config with MICRO's sizes (and `overrides`)."""
  return get_config("tiny", **{**MICRO, **overrides})


def compiled_products(hlo: str) -> list[tuple]:
  """(result type, lhs type, rhs type, the code it came from, lhs shape, rhs shape) of every
  `dot` of a compiled program's text (`jax.jit(f).lower(...).compile().as_text()`), fused or not:
  the matrix products the backend runs, after every pass that may change their operands."""
  typed = dict((name, (dtype, tuple(int(n) for n in dims.split(",") if n))) for name, dtype, dims
               in re.findall(r"^\s*(?:ROOT )?(%[\w.\-]+) = (\w+)\[([\d,]*)\]", hlo, re.M))
  products = []
  for line in hlo.splitlines():
    m = re.search(r"= (\w+)\[[^=]* dot\((%[\w.\-]+), (%[\w.\-]+)\)", line)
    if m:
      source = re.search(r'op_name="([^"]+)"', line)
      (lhs, lhs_shape), (rhs, rhs_shape) = typed[m[2]], typed[m[3]]
      products.append((m[1], lhs, rhs, source[1] if source else "", lhs_shape, rhs_shape))
  return products


def random_params(config: T5Config, seed: int = 0, std: Optional[float] = None) -> dict:
  """Random float32 parameters of every shape `config` asks for, drawn with numpy from `seed` (no
  compilation), in the network's parameter tree. With `std`, every tensor is N(0, std); without,
  T5-like scales: kernels normal with t5rank's fan-in scales (the attention query's divided by
  d_kv), embeddings unit normal, layer-norm scales 1 + N(0, 0.2) and relative position biases
  N(0, 1), away from their initial values as in scripts/make_hf_goldens.py, so that every tensor
  shapes the scores."""
  from t5rank.checkpoints.tree import unflatten
  from t5rank.models.t5_weights.layout import param_shapes

  rng = np.random.default_rng(seed)
  params = {}
  for name, shape in param_shapes(config).items():
    *_, module, leaf = name.split("/")
    if std is not None:
      values = rng.normal(0, std, shape)
    elif leaf == "scale":
      values = 1.0 + rng.normal(0, 0.2, shape)
    elif leaf in ("embedding", "rel_embedding"):
      values = rng.normal(0, 1.0, shape)
    else:  # a (fan_in, fan_out) kernel
      scale = 1.0 / config.d_kv if module == "query" else 1.0
      values = rng.normal(0, np.sqrt(scale / shape[0]), shape)
    params[name] = values.astype(np.float32)
  return unflatten(params)


def make_hub_cache(cache: str, repo: str, files: dict, revision: str = "0" * 40,
                   refs: tuple[str, ...] = ("main",)) -> str:
  """Writes `files` ({name: path of a file to copy}) into a Hugging Face Hub cache at `cache` in
  the Hub's own layout, as `huggingface_hub` leaves it after a download: models--ORG--NAME/
  blobs/SHA256 (the files' bytes), snapshots/REVISION/NAME -> ../../blobs/SHA256, refs/REF holding
  REVISION for each of `refs`. Returns the snapshot directory."""
  import hashlib
  import os
  import shutil

  root = os.path.join(cache, "models--" + repo.replace("/", "--"))
  snapshot = os.path.join(root, "snapshots", revision)
  os.makedirs(os.path.join(root, "blobs"), exist_ok=True)
  os.makedirs(os.path.join(root, "refs"), exist_ok=True)
  for name, source in files.items():
    with open(source, "rb") as f:
      digest = hashlib.sha256(f.read()).hexdigest()
    blob = os.path.join(root, "blobs", digest)
    if not os.path.exists(blob):
      shutil.copyfile(source, blob)
    link = os.path.join(snapshot, name)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
  for ref in refs:
    with open(os.path.join(root, "refs", ref), "w") as f:
      f.write(revision)
  return snapshot
