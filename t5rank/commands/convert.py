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

The input format is detected (t5rank, Hugging Face safetensors, Flax msgpack or PyTorch .bin, Mesh
TensorFlow, t5x). Mesh TF and t5x checkpoints store no architecture: name it with --config (the
error lists the configs that fit).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Optional, Union

from t5rank.commands import add_overwrite, checkpoint_path, resolved
from t5rank.models.registry import Families
from t5rank.models.config import T5Config

if TYPE_CHECKING:
  from t5rank.checkpoints.resolved import Checkpoint


def add_parser(subparsers) -> None:
  """Adds the `convert` subcommand."""
  p = subparsers.add_parser("convert", help="convert a T5 checkpoint to t5rank's, HF's or t5x's format",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--input", required=True,
                 help="checkpoint path (directory or TF prefix), or shipped:NAME")
  p.add_argument("-o", "--output", required=True, help="output directory")
  p.add_argument("--to", required=True, choices=("native", "hf", "t5x"), help="output format")
  p.add_argument("--hf-generation", choices=("4", "5"), default="4",
                 help="with --to hf: the transformers generation whose config.json form to write "
                 "(default 4, which 4.x and 5.x both read)")
  p.add_argument("--step", type=int, default=0,
                 help="with --to t5x: the step number of the checkpoint_STEP directory (default 0)")
  p.add_argument("--config", default=None,
                 help="model config name (t5rank.models.config.CONFIGS); required for Mesh TF and t5x")
  p.add_argument("--reranker", choices=Families(t5_weights=True), metavar="FAMILY",
                 help="what the input is when its files do not say, one of %(choices)s (a "
                      "Hugging Face duoT5: --reranker duot5); carried into the output "
                      "(metadata.json, t5rank.json)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: an existing --output is replaced (with
  --overwrite) only when this command wrote it (its OWNER_FILE says so)."""
  from t5rank.files import DIRECTORY, Output, owned_by

  return ([Output("--output", args.output, DIRECTORY, owned_by("convert"))],
          {"--input": checkpoint_path(args, "input")})


def convert(input_path: Union[str, Checkpoint], output_path: str, to: str, config: Optional[T5Config] = None, *,
            hf_generation: str = "4", step: int = 0, reranker: Optional[str] = None) -> T5Config:
  """Reads the checkpoint `input_path` (a name, or a resolved `Checkpoint`) and writes it to
  `output_path` in format `to` ("native", "hf" in the config form of transformers
  `hf_generation`, or "t5x" as step `step`), with what the
  input says about scoring it (vocabulary, target words, input length, BM25 score in the input:
  metadata.json for native, `spiece.model` + `t5rank.json` for hf; t5x has no room for them and a
  note says what to pass) and its model family (as its files say, else `reranker`, else monoT5).
  Returns the model's config."""
  import json
  import shutil

  from t5rank.checkpoints.resolved import RERANKER_CONFIG, resolve
  from t5rank.models.monot5 import stored_extra_ids
  from t5rank.models.t5_weights import load_checkpoint, save_checkpoint
  from t5rank.models.t5_weights.hf import save_hf_checkpoint
  from t5rank.models.t5_weights.t5x import save_t5x_checkpoint

  if to not in ("native", "hf", "t5x"):
    raise ValueError(f"cannot write format {to!r}; choose one of native, hf, t5x")
  checkpoint = resolve(input_path)
  checkpoint.check_family(reranker)
  config, params = load_checkpoint(checkpoint, config)
  stated = checkpoint.family_stated or reranker is not None
  settings = {"model": (reranker or checkpoint.family) if stated else None,
              "vocabulary": checkpoint.vocabulary,
              "vocabulary_extra_ids": stored_extra_ids(checkpoint, config),
              "target_words": checkpoint.target_words, "max_length": checkpoint.max_length,
              "bm25_in_input": checkpoint.bm25_in_input}
  if to == "native":
    extra = {k: settings[k] for k in ("model", "target_words", "bm25_in_input")
             if settings[k] is not None}
    if settings["max_length"] is not None:
      extra["feature_lengths"] = {"inputs": settings["max_length"]}
    if settings["vocabulary"]:
      extra["vocabulary"] = os.path.basename(settings["vocabulary"])
      if settings["vocabulary_extra_ids"] is not None:
        extra["vocabulary_extra_ids"] = settings["vocabulary_extra_ids"]
    if settings["vocabulary"]:  # before the checkpoint: its manifest covers the vocabulary
      os.makedirs(output_path, exist_ok=True)
      shutil.copyfile(settings["vocabulary"], os.path.join(output_path, extra["vocabulary"]))
    save_checkpoint(output_path, params, config, extra_metadata=extra)
  elif to == "hf":
    save_hf_checkpoint(output_path, params, config, generation=hf_generation)
    if settings["vocabulary"]:
      shutil.copyfile(settings["vocabulary"], os.path.join(output_path, "spiece.model"))
    beside = {k: settings[k] for k in ("model", "target_words", "max_length", "bm25_in_input")
              if settings[k] is not None}
    if beside:
      with open(os.path.join(output_path, RERANKER_CONFIG), "w", encoding="utf-8") as f:
        json.dump(beside, f, indent=1)
  else:
    save_t5x_checkpoint(output_path, params, config, step=step)
    if settings["vocabulary"] or settings["target_words"] not in (None, "true_false") or (
        settings["model"] not in (None, "monot5")):
      print(f"note: a t5x checkpoint stores no tokenizer, target words or model family; score it "
            f"with --vocab {settings['vocabulary'] or 't5'} --targets {settings['target_words']}"
            + (f" --reranker {settings['model']}" if settings["model"] not in (None, "monot5")
               else ""))
  return config


def run(args: argparse.Namespace) -> int:
  """Entry point of `t5rank convert`."""
  from t5rank.files import atomic_directory
  from t5rank.models.config import get_config

  config = get_config(args.config) if args.config else None
  checkpoint = resolved(args, "input")  # `files` resolved it: read once
  with atomic_directory(args.output, owner="convert") as directory:  # errors become one line in t5rank.cli
    config = convert(checkpoint, directory, args.to, config, hf_generation=args.hf_generation,
                     step=args.step, reranker=args.reranker)
  print(f"converted {args.input} ({checkpoint.format}) -> {args.output} ({args.to}): "
        f"{config.num_parameters / 1e6:.1f}M parameters, d_model {config.d_model}, "
        f"{config.num_encoder_layers}+{config.num_decoder_layers} layers, {config.feed_forward}, "
        f"head {'tied' if config.tie_embeddings else 'untied'}, decoder output "
        f"{'scaled' if config.scale_decoder_outputs else 'unscaled'}")
  return 0
