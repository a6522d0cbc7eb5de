"""`t5rank convert`: a T5 checkpoint from any format t5rank reads to t5rank's own or Hugging Face's.

    t5rank convert --input monot5-base-msmarco/ --output monot5-base --to native      # HF dir
    t5rank convert --input model.ckpt-1010000 --config t5_base --output monot5 --to native  # TF
    t5rank convert --input t5x_model/checkpoint_1100000 --config t5_base --output m --to native
    t5rank convert --input monot5-base --output monot5-base-hf --to hf     # back to PyTorch users

The input format is detected (t5rank, Hugging Face safetensors, Mesh TensorFlow, t5x). Mesh TF and
t5x checkpoints store no architecture: name it with --config (the error lists the configs that fit).
"""

from __future__ import annotations

import argparse
from typing import Optional

from t5rank.models.config import T5Config


def add_parser(subparsers) -> None:
  """Adds the `convert` subcommand."""
  p = subparsers.add_parser("convert", help="convert a T5 checkpoint to t5rank's or HF's format",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--input", required=True, help="checkpoint path (directory or TF prefix)")
  p.add_argument("--output", required=True, help="output directory")
  p.add_argument("--to", required=True, choices=("native", "hf"), help="output format")
  p.add_argument("--config", default=None,
                 help="model config name (t5rank.models.config.CONFIGS); required for Mesh TF and t5x")
  p.set_defaults(func=run)


def convert(input_path: str, output_path: str, to: str,
            config: Optional[T5Config] = None) -> T5Config:
  """Reads the checkpoint at `input_path` and writes it to `output_path` in format `to` ("native"
  or "hf"). Returns the model's config."""
  from t5rank.checkpoints import load_checkpoint, save_checkpoint
  from t5rank.checkpoints.hf import save_hf_checkpoint

  savers = {"native": save_checkpoint, "hf": save_hf_checkpoint}
  if to not in savers:
    raise ValueError(f"cannot write format {to!r}; choose one of {sorted(savers)}")
  config, params = load_checkpoint(input_path, config)
  savers[to](output_path, params, config)
  return config


def run(args: argparse.Namespace) -> int:
  """Entry point of `t5rank convert`."""
  from t5rank.checkpoints import detect_format
  from t5rank.models.config import get_config

  config = get_config(args.config) if args.config else None
  config = convert(args.input, args.output, args.to, config)
  print(f"converted {args.input} ({detect_format(args.input)}) -> {args.output} ({args.to}): "
        f"{config.num_parameters / 1e6:.1f}M parameters, d_model {config.d_model}, "
        f"{config.num_encoder_layers}+{config.num_decoder_layers} layers, {config.feed_forward}")
  return 0
