"""Compilation at start-up: every batch shape a request can bring is compiled before the server
says it is ready, so that no request waits on a compile.

The shapes are those of the model's own batching (`Reranker.batches`): for monoT5, duoT5 and the
classifier, length buckets of 64 tokens up to max_length, and in each bucket a full batch of
batch_tokens // length rows and 1/2, 1/4, 1/8 of it (`t5rank.models.batching`); the dual encoders
likewise by the candidate's length. They are found by probing the batching itself with synthetic
texts, not by restating its rules: texts of 1 to PROBE_WORDS words find every length bucket
(bisecting where the padded length changes), and 1 to a full batch of copies of one text every row
count of that bucket. Each shape found is then scored once, through `Ranker.score_examples`, the
path requests take. With the persistent compilation cache (`t5rank.compilation`) a second start
reads the programs back instead of compiling them.

TK batches distinct documents with their queries' terms, so its shapes also depend on how many
pairs share a document: the probe covers its length buckets, not every such count.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from t5rank.ranking.jobs import job_class

logger = logging.getLogger(__name__)

PROBE_WORDS = 4096  # the longest synthetic text, in words: past every model's max_length
MAX_COPIES = 2**16  # a bound on the rows of one batch, for the probe
WORDS = ("policy", "insurance", "claim", "premium", "cover", "term", "life", "annuity", "home",
         "car", "benefit", "rider", "deductible", "health", "plan", "rate")
QUERY = "what does a term life insurance policy cover"


def transitions(f: Callable[[int], object], lo: int, hi: int) -> list[int]:
  """The points of [lo, hi] where the step function f changes value (lo included), found by
  bisection: f(x) for x in the result are all of f's values on [lo, hi] when f is monotone."""
  found = [lo]
  values = {lo: f(lo), hi: f(hi)}

  def split(a: int, b: int) -> None:
    if values[a] == values[b]:
      return
    if b - a == 1:
      found.append(b)
      return
    middle = (a + b) // 2
    values[middle] = f(middle)
    split(a, middle)
    split(middle, b)

  split(lo, hi)
  return sorted(found)


def warm_up_inputs(ranker) -> list[tuple[object, int, tuple]]:
  """(example, copies, batch shapes) of synthetic inputs that bring every batch shape of `ranker`
  (module docstring): scoring `copies` copies of the encoded `example` compiles `batch shapes`."""
  reranker = ranker.reranker
  examples: dict[int, object] = {}

  def example(words: int):
    """The encoded input of a `words`-word text for QUERY (as the reranker's job makes one:
    duoT5's pairs the text with itself)."""
    if words not in examples:
      text = " ".join(WORDS[i % len(WORDS)] for i in range(words))
      passage, score = job_class(reranker).example_input(text, 12.5)
      first_stage = [score] if reranker.reads_first_stage else None
      examples[words] = reranker.encode([QUERY], [passage], first_stage)[0]
    return examples[words]

  def batches(inputs):
    return reranker.batches(inputs, batch_tokens=ranker.batch_tokens,
                            row_multiple=ranker.mesh.shape["data"],
                            length_bucket=ranker.options.length_bucket)

  def shapes(inputs) -> tuple:
    return tuple(sorted({tuple(a.shape for a in b.arrays) for b in batches(inputs)}))

  found, seen = [], set()
  for words in transitions(lambda w: shapes([example(w)]), 1, PROBE_WORDS):
    one = example(words)
    most = 1  # copies that still fit one batch: doubled until a second batch appears
    while len(batches([one] * (2 * most))) == 1 and most < MAX_COPIES:
      most *= 2
    for copies in transitions(lambda n: shapes([one] * n), 1, 2 * most):
      these = shapes([one] * copies)
      if not set(these) <= seen:
        seen.update(these)
        found.append((one, copies, these))
  return found


def warm_up(ranker) -> dict:
  """Scores one input of every batch shape of `ranker` (`warm_up_inputs`) through
  `Ranker.score_examples`; returns what /info shows: the shapes, their count and the seconds it
  took."""
  started = time.perf_counter()
  inputs = warm_up_inputs(ranker)
  for example, copies, shapes in inputs:
    ranker.score_examples([example] * copies)
    logger.info("compiled %s", " ".join("x".join(map(str, shape)) for shape in shapes))
  shapes = sorted({s for _, _, found in inputs for s in found})
  return {"shapes": [[list(a) for a in s] for s in shapes], "seconds":
          round(time.perf_counter() - started, 1)}
