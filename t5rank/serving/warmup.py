"""Compilation at start-up: every batch shape a request can bring is compiled before the server
says it is ready, so that no request waits on a compile.

The shapes are those a request can bring: a scoring step holds at most `max_examples` examples
(the larger of --max-texts and --max-batch-pairs: one request, or requests merged), and only
batches of up to that many copies are probed. They are those of the model's own batching
(`Reranker.program_shapes`): for monoT5, duoT5 and the classifier, length buckets of 64 tokens up
to max_length, and in each bucket a full batch of batch_tokens // length rows and 1/2, 1/4, 1/8 of
it (`t5rank.models.batching`); the dual encoders the same for the encoding of each side's
distinct texts, and their cosines by the count of distinct texts and of pairs. They are found by
probing the batching itself with synthetic texts, not by restating its rules: texts of 1 to
PROBE_WORDS words find every length bucket (bisecting where the padded length changes), and 1 to a
full batch of distinct texts of that length every row count of that bucket. Each shape found is
then scored once, through `Ranker.score_examples`, the path requests take. With the persistent compilation cache (`t5rank.compilation`) a second start
reads the programs back instead of compiling them.

TK batches distinct documents with their queries' terms, so its shapes also depend on how many
pairs share a document: the probe's distinct texts cover a request's distinct candidates, not
every count of repeated ones (a request of repeated texts may compile). The probe's inputs share
one query: a step that merges requests of more than 8 distinct queries may compile a dual
encoder's larger query table.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from t5rank.ranking.jobs import job_class

logger = logging.getLogger(__name__)

PROBE_WORDS = 4096  # the longest synthetic text, in words: past every model's max_length
MAX_EXAMPLES = 1024  # the examples one scoring step holds, unless the caller says
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


def warm_up_inputs(ranker, max_examples: int = MAX_EXAMPLES) -> list[tuple[list, tuple]]:
  """(examples, batch shapes) of synthetic inputs that bring every batch shape of `ranker` that a
  scoring step of at most `max_examples` examples can bring (module docstring): scoring the
  encoded `examples` (distinct texts of one length, as a request's candidates are) compiles
  `batch shapes`."""
  reranker = ranker.reranker
  cache: dict[tuple[int, int], object] = {}

  def example(words: int, variant: int = 0):
    """The encoded input of text `variant` of `words` words for QUERY (as the reranker's job makes
    one: duoT5's pairs the text with itself). Variants differ in their first three words, so that
    up to 16**3 of them are distinct texts of the same length."""
    if (words, variant) not in cache:
      text = " ".join(WORDS[(i + variant // len(WORDS) ** (i % 3)) % len(WORDS)]
                      for i in range(words))
      passage, score = job_class(reranker).example_input(text, 12.5)
      first_stage = [score] if reranker.reads_first_stage else None
      cache[words, variant] = reranker.encode([QUERY], [passage], first_stage)[0]
    return cache[words, variant]

  def inputs(words: int, n: int) -> list:
    return [example(words, variant) for variant in range(n)]

  def batches(examples):
    return reranker.batches(examples, batch_tokens=ranker.batch_tokens,
                            row_multiple=ranker.mesh.shape["data"],
                            length_bucket=ranker.options.length_bucket)

  def shapes(examples) -> tuple:
    return reranker.program_shapes(examples, batch_tokens=ranker.batch_tokens,
                                   row_multiple=ranker.mesh.shape["data"],
                                   length_bucket=ranker.options.length_bucket)

  found, seen = [], set()
  for words in transitions(lambda w: shapes([example(w)]), 1, PROBE_WORDS):
    most = 1  # texts that still fit one batch: doubled until a second batch appears
    while len(batches(inputs(words, 2 * most))) == 1 and 2 * most < max_examples:
      most *= 2
    for n in transitions(lambda n: shapes(inputs(words, n)), 1, min(2 * most, max_examples)):
      these = shapes(inputs(words, n))
      if not set(these) <= seen:
        seen.update(these)
        found.append((inputs(words, n), these))
  return found


def warm_up(ranker, max_examples: int = MAX_EXAMPLES) -> dict:
  """Scores one input of every batch shape of `ranker` that a step of at most `max_examples`
  examples brings (`warm_up_inputs`) through `Ranker.score_examples`; returns what /info shows:
  the shapes, their count and the seconds it took."""
  started = time.perf_counter()
  inputs = warm_up_inputs(ranker, max_examples)
  for examples, shapes in inputs:
    ranker.score_examples(examples)
    logger.info("compiled %s", " ".join(map(_described, shapes)))
  shapes = sorted({s for _, found in inputs for s in found})
  return {"shapes": [_listed(s) for s in shapes], "seconds":
          round(time.perf_counter() - started, 1)}


def _listed(shape):
  """A program's shapes (`Reranker.program_shapes`: tuples of ints and names) as JSON lists."""
  return [_listed(part) for part in shape] if isinstance(shape, tuple) else shape


def _described(shape) -> str:
  """One program's shapes for the log: `64x128 32x128`, the dual encoder's `document:16x64`."""
  if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
    return "x".join(map(str, shape))
  if isinstance(shape, tuple) and shape and isinstance(shape[0], str):
    return shape[0] + ":" + ",".join(_described(part) for part in shape[1:])
  return " ".join(map(_described, shape))
