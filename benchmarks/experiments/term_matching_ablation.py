"""Can a from-scratch monoT5 learn that a query word found in the document means "relevant"?

Trains the tiny recipe's model (gin/experiments/tiny_insuranceqa_cpu.gin: d_model 64, 2+1 layers,
the insuranceqa_en_8k vocabulary, inputs 96, batch 32, Adafactor 1e-2) on pseudo-queries alone: each
pair is 2-5 idf-weighted words of one InsuranceQA answer against that answer (true) and a random
other answer (false), so term overlap decides every label (`t5rank.data.pseudo_queries`). Once with T5's
plain initialization and once with term-matching heads (`t5rank.models.network.term_matching_init`), same
data, same steps, same seed; prints the training accuracy of the target word over the last
`--log_every` steps of each.

  .venv/bin/python benchmarks/experiments/term_matching_ablation.py --steps 800
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import numpy as np


def pseudo_batches(table, vocab, targets, *, batch_size: int, max_length: int, seed: int,
                   start_step: int = 0):
  """The trainer's batches (`train(dataset_fn=...)` layout) from a triple table, positive first."""
  from t5rank.models.inputs import encode_pairs

  triples = table.triples(seed=seed, start=start_step * batch_size // 2)
  while True:
    rows = [next(triples) for _ in range(batch_size // 2)]
    queries = [q for q, _, _ in rows for _ in range(2)]
    documents = [d for _, p, n in rows for d in (p, n)]
    ids = encode_pairs(vocab, queries, documents, max_length)
    batch = {k: np.zeros((batch_size, n), np.int32) for k, n in [
        ("encoder_input_tokens", max_length), ("decoder_input_tokens", 2),
        ("decoder_target_tokens", 2), ("decoder_loss_weights", 2)]}
    for row, x in enumerate(ids):
      word = targets[row % 2]
      batch["encoder_input_tokens"][row, :len(x)] = x
      batch["decoder_target_tokens"][row] = [word, 1]
      batch["decoder_input_tokens"][row] = [0, word]
      batch["decoder_loss_weights"][row] = 1
    yield batch


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--steps", type=int, default=800, help="training steps per run")
  parser.add_argument("--log_every", type=int, default=200, help="accuracy window (steps)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--scale", type=float, default=1.0,
                      help="term_matching_init's scale (the recipe's is 1)")
  args = parser.parse_args(argv)

  from t5rank.data.insuranceqa import load_split
  from t5rank.training import trainer as train_lib
  from t5rank.models.config import get_config
  from t5rank.data.pseudo_queries import pseudo_query_table
  from t5rank.models.vocab import load_vocabulary, resolve_target_words

  vocab = load_vocabulary("insuranceqa_en_8k")
  targets = resolve_target_words(vocab, "true_false")
  train = load_split("train", "en")
  documents = list(train.answers.values())
  openings = sorted({" ".join(q.split()[:2]) for q in train.queries.values()})
  batch_size, max_length = 32, 96
  table = pseudo_query_table(documents, args.steps * batch_size // 2, seed=args.seed,
                             openings=openings)
  config = get_config("tiny").replace(vocab_size=8000, d_model=64, d_kv=16, d_ff=256, num_heads=4,
                                      num_decoder_layers=1)

  def dataset_fn(task_name, *, batch_size, feature_lengths, seed, start_step=0, pack=False,
                 shard_index=0, num_shards=1):
    del task_name, pack, shard_index, num_shards
    return pseudo_batches(table, vocab, targets, batch_size=batch_size,
                          max_length=feature_lengths["inputs"], seed=seed, start_step=start_step)

  results = []
  for heads in (0, 2):
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory() as model_dir:
      metrics = train_lib.train(
          model_config=config, task_name="pseudo-queries",
          feature_lengths={"inputs": max_length, "targets": 2}, train_steps=args.steps,
          batch_size=batch_size, model_dir=model_dir,
          init=train_lib.Init(term_matching_heads=heads, term_matching_scale=args.scale),
          optimization=train_lib.Optimization(learning_rate=1e-2, dropout_rate=0.0),
          loop=train_lib.Loop(checkpoint_every=args.steps, keep_checkpoints=1,
                              log_every=args.log_every),
          mesh_shape=(1, 1), seed=args.seed, dataset_fn=dataset_fn)
    results.append((heads, metrics["accuracy"], metrics["loss"], time.perf_counter() - begin))
  print(f"\npseudo-queries vs random answers, {args.steps} steps x {batch_size} pairs, "
        f"accuracy over the last {args.log_every} steps:")
  print("| init | accuracy | loss | wall time |\n| --- | --- | --- | --- |")
  for heads, accuracy, loss, seconds in results:
    name = "T5's plain init" if heads == 0 else f"term-matching heads ({heads}, scale {args.scale:g})"
    print(f"| {name} | {accuracy:.3f} | {loss:.4f} | {seconds:.0f} s |")
  return 0


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  sys.exit(main())
