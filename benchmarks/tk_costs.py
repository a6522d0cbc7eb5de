"""Where TK's scoring time goes, per pair (HISTORY.md, "TK on InsuranceQA v2"):

    .venv/bin/python benchmarks/tk_costs.py runs/tk/best

kernel pooling and cosines on 1,280 pairs of a 16-word query and a 160-word document (128-d
vectors), matching 2,048 packed query terms in rows of 32 and of 64, contextualizing 16 documents
of 128 words, and one scoring batch as `TK.batches` builds it (16 documents of 128 words, each read
by 16 queries of 8 words: 256 pairs, their terms packed in rows of 32) with the checkpoint's TK;
each timed as the mean of 10 calls after compilation.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.models import tk
from t5rank.models import tk_reranker
from t5rank.models.vectors import unit_vectors
from t5rank.models.loading import load_reranker
from t5rank.ranking.devices import scoring_mesh


def timed(f, *args) -> float:
  """Mean seconds of a compiled call."""
  jax.block_until_ready(f(*args))
  start = time.perf_counter()
  for _ in range(10):
    jax.block_until_ready(f(*args))
  return (time.perf_counter() - start) / 10


def main(checkpoint: str) -> None:
  key = jax.random.PRNGKey(0)
  pairs, m, n, e = 1280, 16, 160, 128
  match = jax.random.uniform(key, (pairs, m, n), minval=-1, maxval=1)
  masks = jnp.ones((pairs, m), bool), jnp.ones((pairs, n), bool)
  pool = jax.jit(lambda x: tk.kernel_pooling(x, *masks, tk.KERNEL_MUS, 0.1)[:2])
  print(f"kernel pooling: {timed(pool, match) / pairs * 1e6:.1f} us per pair")
  q, d = jax.random.normal(key, (pairs // 8, 8, m, e)), jax.random.normal(key, (pairs // 8, n, e))
  cosines = jax.jit(lambda q, d: jnp.einsum("rsme,rne->rsmn", unit_vectors(q),
                                            unit_vectors(d)))
  print(f"cosines: {timed(cosines, q, d) / pairs * 1e6:.1f} us per pair")
  docs = jax.random.normal(key, (16, 128, e))
  for per_row in (32, 64):  # 2,048 query terms in rows against 16 documents of 128 words
    rows = 2048 // per_row
    terms, row_doc = jax.random.normal(key, (rows, per_row, e)), jnp.arange(rows) % 16
    match = jax.jit(lambda t, d: jnp.einsum("rpe,rne->rpn", t, d[row_doc]))
    print(f"matching 2,048 terms in rows of {per_row}: {timed(match, terms, docs) * 1e3:.1f} ms")
  reranker, params = load_reranker(checkpoint)
  config = reranker.config
  ids = jnp.asarray(np.random.default_rng(0).integers(2, config.vocab_size, (16, 128)), jnp.int32)
  encode = jax.jit(lambda p, x: tk_reranker.encode_step(p, x, config=config))
  print(f"contextualizing 16 x 128 words: {timed(encode, params, ids) * 1e3:.1f} ms")
  rng = np.random.default_rng(0)
  queries = [rng.integers(2, config.vocab_size, 8).astype(np.int32) for _ in range(16)]
  examples = [(queries[j], np.asarray(ids[i])) for i in range(16) for j in range(16)]
  [batch] = reranker.batches(examples, batch_tokens=16 * 128)  # 16 documents, 256 pairs
  state = reranker.shard_state(params, examples, mesh=scoring_mesh())
  score = lambda *arrays: reranker.score_batch(state, arrays)
  print(f"one batch (16 documents of 128 words, 256 pairs with 8-word queries): "
        f"{timed(score, *batch.arrays) * 1e3:.1f} ms")

if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("checkpoint", help="a TK checkpoint (e.g. runs/tk/best, shipped:tk)")
  main(parser.parse_args().checkpoint)
