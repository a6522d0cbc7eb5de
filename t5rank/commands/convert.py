"""`t5rank convert`: a T5 checkpoint from any format t5rank reads to t5rank's, Hugging Face's or t5x's.

    t5rank convert --input monot5-base-msmarco/ --output monot5-base --to native      # HF dir
    t5rank convert --input model.ckpt-1010000 --config t5_base --output monot5 --to native  # TF
    t5rank convert --input t5x_model/checkpoint_1100000 --config t5_base --output m --to native
    t5rank convert --input monot5-base --output monot5-base-hf --to hf     # back to PyTorch users
    t5rank convert --input m --output m-hf5 --to hf --hf-generation 5     # as transformers 5 saves
    t5rank convert --input monot5-base --output t5x_dir --to t5x --step 0  # to continue in t5x

Hugging Face output: `--hf-generation 4` (default) writes the config.json that transformers 4.x and
5.x both read; `5` the form 5.x saves (`tie_word_embeddings` true, `scale_decoder_outputs`, no
`lm_head.weight` when tied); see docs/scoring.md for which versions read which. t5x output: the Orbax
layout t5x restores (`OUTPUT/checkpoint_STEP/state/`), parameters only.

The input format is detected (t5rank, Hugging Face safetensors, Mesh TensorFlow, t5x). Mesh TF and
t5x checkpoints store no architecture: name it with --config (the error lists the configs that fit).
"""

from __future__ import annotations

import argparse
import os
from typing import Optional

from t5rank.models.config import T5Config


def add_parser(subparsers) -> None:
  """Adds the `convert` subcommand."""
  p = subparsers.add_parser("convert", help="convert a T5 checkpoint to t5rank's, HF's or t5x's format",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--input", required=True, help="checkpoint path (directory or TF prefix)")
  p.add_argument("--output", required=True, help="output directory")
  p.add_argument("--to", required=True, choices=("native", "hf", "t5x"), help="output format")
  p.add_argument("--hf-generation", choices=("4", "5"), default="4",
                 help="with --to hf: the transformers generation whose config.json form to write "
                 "(default 4, which 4.x and 5.x both read)")
  p.add_argument("--step", type=int, default=0,
                 help="with --to t5x: the step number of the checkpoint_STEP directory (default 0)")
  p.add_argument("--config", default=None,
                 help="model config name (t5rank.models.config.CONFIGS); required for Mesh TF and t5x")
  p.set_defaults(func=run)


def convert(input_path: str, output_path: str, to: str, config: Optional[T5Config] = None, *,
            hf_generation: str = "4", step: int = 0) -> T5Config:
  """Reads the checkpoint at `input_path` and writes it to `output_path` in format `to` ("native",
  "hf" in the config form of transformers `hf_generation`, or "t5x" as step `step`). Returns the
  model's config."""
  import functools

  from t5rank.checkpoints import load_checkpoint, save_checkpoint
  from t5rank.checkpoints.hf import save_hf_checkpoint
  from t5rank.checkpoints.t5x import save_t5x_checkpoint

  savers = {"native": save_checkpoint,
            "hf": functools.partial(save_hf_checkpoint, generation=hf_generation),
            "t5x": functools.partial(save_t5x_checkpoint, step=step)}
  if to not in savers:
    raise ValueError(f"cannot write format {to!r}; choose one of {sorted(savers)}")
  config, params = load_checkpoint(input_path, config)
  savers[to](output_path, params, config)
  if to == "hf":
    _carry_tokenizer(input_path, output_path)
  return config


def _carry_tokenizer(checkpoint: str, hf_dir: str) -> None:
  """A t5rank checkpoint's vocabulary and target words, beside the Hugging Face files as
  `spiece.model` and `t5rank.json`, so that the converted reranker tokenizes and scores as before."""
  import json
  import shutil

  from t5rank.checkpoints import native
  from t5rank.models.monot5 import RERANKER_CONFIG

  if not native.is_native_checkpoint(checkpoint):
    return
  metadata = native.read_metadata(checkpoint)
  if metadata.get("vocabulary"):
    shutil.copyfile(os.path.join(checkpoint, metadata["vocabulary"]),
                    os.path.join(hf_dir, "spiece.model"))
  if metadata.get("target_words"):
    with open(os.path.join(hf_dir, RERANKER_CONFIG), "w", encoding="utf-8") as f:
      json.dump({"target_words": metadata["target_words"]}, f)


def run(args: argparse.Namespace) -> int:
  """Entry point of `t5rank convert`."""
  from t5rank.checkpoints import detect_format
  from t5rank.models.config import get_config

  if os.path.realpath(args.output) == os.path.realpath(args.input):
    raise SystemExit(f"t5rank convert: --output {args.output} is the --input checkpoint; writing "
                     "it would destroy the input: give another path")
  config = get_config(args.config) if args.config else None
  config = convert(args.input, args.output, args.to, config, hf_generation=args.hf_generation,
                   step=args.step)  # errors become one line in t5rank.cli
  print(f"converted {args.input} ({detect_format(args.input)}) -> {args.output} ({args.to}): "
        f"{config.num_parameters / 1e6:.1f}M parameters, d_model {config.d_model}, "
        f"{config.num_encoder_layers}+{config.num_decoder_layers} layers, {config.feed_forward}, "
        f"head {'tied' if config.tie_embeddings else 'untied'}, decoder output "
        f"{'scaled' if config.scale_decoder_outputs else 'unscaled'}")
  return 0
