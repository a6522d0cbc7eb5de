"""The scorer: rerank a candidate run with any `Reranker`, resumably, on a (data, model) mesh.

    t5rank score --checkpoint CKPT --queries Q --corpus C --run CANDIDATES --output OUT

The pipeline, one shard at a time (a shard is `shard_size` consecutive inputs of the job):
    candidates ─► the reranker's job (`jobs.plan_job`: its inputs, e.g. each candidate's sentence
    windows, or duoT5's ordered pairs) ─► reranker.encode + reranker.batches (in a background
    thread, `batching.prefetch`) ─► reranker.shard_state (once per shard) ─► reranker.score_batch
    on the mesh, parameters placed by the trainer's logical-axis rules (`devices`) ─► shard file
    (atomic, `shards`)
    ─► when all shards exist: the job ranks each query's candidates (e.g. MaxP over windows), the
    run is written (atomic)

For monoT5 the score is `t5rank.models.monot5.monot5_score`'s log P(positive word). The scorer
knows no model family: what it scores and how scores aggregate is the reranker's job class
(`t5rank.ranking.jobs`). Each query's documents are sorted by score, descending, ties broken by
docid, ascending. A reranker that reads first-stage scores (monoT5
trained with the BM25 score in its input, `t5rank.data.bm25_input`) takes each candidate's score
from the candidates run, which must then be a BM25 run with scores (`t5rank retrieve`'s). Shards
live in `OUT.shards/` until the run is written; rerunning the same command after an interruption
scores only the shards that are missing. On several hosts (`--distributed`), host i scores shards
i, i + n, ... into the same (shared) directory and host 0 writes the run.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sys
from typing import Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from t5rank.data.readers import Document, Run, write_run
from t5rank.models.reranker import Batch, Reranker
from t5rank.ranking import shards
from t5rank.ranking.prefetch import prefetch
from t5rank.ranking.candidates import check_candidates, split_at_depth
from t5rank.ranking.jobs import plan_job, top_first_stage_scores
from t5rank.ranking.devices import default_batch_tokens, place_params, scoring_mesh
from t5rank.ranking.passages import DOCUMENT_STRIDE, DOCUMENT_WINDOW

logger = logging.getLogger(__name__)


# The precision of matrix products (JAX's `default_matmul_precision`): float32 products are full
# float32 on every backend (a GPU would otherwise compute them in TF32); tensorfloat32 and bfloat16
# trade exactness for speed where the hardware has them (on a CPU all three are float32 products).
from t5rank.ranking import options as declared  # noqa: E402  (declared with the options)
from t5rank.ranking.options import PRECISIONS  # noqa: E402


@dataclasses.dataclass(frozen=True)
class ScoringOptions:
  """How candidates become scored passages and a run. `batch_tokens` is the padded token budget of
  one batch (None: `default_batch_tokens`); `shard_size` the number of passages per output shard;
  `mesh_shape` the (data, model) mesh over this host's devices, (-1, 1) = all on data;
  `precision` that of matrix products (`PRECISIONS`); `length_bucket` the multiple lengths are
  padded to (None: the reranker's own); `depth` how many of each query's best candidates are
  reranked (None: all; the rest stay below, in the run's order). How a candidate's scored inputs
  make its score is its job's (`t5rank.ranking.jobs`): `passages` for a job of sentence windows
  (`PassageJob`, MaxP by default), `aggregate` for duoT5's ordered pairs (`PairJob`, sym-sum).
  Each field is the option of that name in `t5rank.ranking.options`, and checked there."""
  passages: str = "maxp"
  window: int = DOCUMENT_WINDOW
  stride: int = DOCUMENT_STRIDE
  language: str = "en"
  batch_tokens: Optional[int] = None
  shard_size: int = 10_000
  skip_missing: bool = False
  tag: str = "t5rank"
  mesh_shape: tuple[int, int] = (-1, 1)
  precision: str = "float32"
  length_bucket: Optional[int] = None
  depth: Optional[int] = None
  aggregate: str = "sym-sum"

  def __post_init__(self):
    if self.shard_size < 1:
      raise ValueError(f"shard_size must be a positive number of passages, got {self.shard_size}")
    if self.batch_tokens is not None and self.batch_tokens < 1:
      raise ValueError(f"batch_tokens must be positive, got {self.batch_tokens}")
    if not self.tag or any(c.isspace() for c in self.tag):
      raise ValueError(f"the run tag must be a non-empty word without whitespace, got {self.tag!r}")
    if self.window < 0 or self.stride < 1:
      raise ValueError(f"window must be >= 0 and stride >= 1, got {self.window}, {self.stride}")
    if self.depth is not None and self.depth < 1:
      raise ValueError(f"depth must be a positive number of candidates, got {self.depth}")
    for name in ("passages", "aggregate"):
      declared.check(name, getattr(self, name))
    if self.length_bucket is not None and self.length_bucket < 1:
      raise ValueError(f"length_bucket must be positive, got {self.length_bucket}")
    if self.precision not in PRECISIONS:
      raise ValueError(f"unknown precision {self.precision!r}; choose one of {PRECISIONS}")


def score_batches(reranker: Reranker, state, batches: Iterable[Batch], num_items: int, *,
                  mesh, on_batch: Optional[Callable[[int], None]] = None,
                  in_flight: int = 2) -> tuple[np.ndarray, np.ndarray]:
  """(score, P), each (num_items,) float32 in item order, of the batches' rows through
  `reranker.score_batch(state, arrays)` (`state`: the placed parameters, or what
  `reranker.shard_state` made of them), rows split over the mesh's `data` axis. Up to `in_flight` batches are
  dispatched before the oldest is read back, so that the host prepares the next batch while the
  devices compute. `on_batch(n)` is called as each batch of n items lands."""
  import jax

  from t5rank.partitioning import batch_sharding

  sharding = batch_sharding(mesh)
  scores = np.full(num_items, np.nan, np.float32)
  p = np.full(num_items, np.nan, np.float32)
  pending: collections.deque = collections.deque()

  def land() -> None:
    batch, (batch_scores, batch_p) = pending.popleft()
    n = len(batch.items)
    scores[batch.items] = np.asarray(batch_scores, np.float32)[:n]
    p[batch.items] = np.asarray(batch_p, np.float32)[:n]
    if on_batch is not None:
      on_batch(n)

  for batch in batches:
    arrays = tuple(jax.device_put(batch.arrays, sharding))  # one call for all of them
    pending.append((batch, reranker.score_batch(state, arrays)))
    if len(pending) > in_flight:
      land()
  while pending:
    land()
  return scores, p


def check_finite_scores(scores: np.ndarray, pairs: Sequence) -> None:
  """Raises FloatingPointError naming the first pair and the count when a score is NaN or infinite
  (e.g. weights with a NaN): nothing of such a shard is written."""
  bad = np.flatnonzero(~np.isfinite(scores))
  if bad.size:
    pair = pairs[int(bad[0])]
    raise FloatingPointError(
        f"{bad.size} of {len(scores)} scores are not finite, e.g. query {pair.qid!r}, document "
        f"{pair.docid!r}, window {pair.part}: {float(scores[bad[0]])!r}; the model's weights or "
        "inputs give NaN/Inf (check the checkpoint); nothing of this shard was written")


def params_fingerprint(params) -> str:
  """A hash of the parameters' names, shapes, dtypes and values (their bytes), so that a resumed job
  refuses other weights at the same path (about 1 s per GB)."""
  import jax

  h = hashlib.sha256()
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    array = np.asarray(leaf)
    h.update(f"{jax.tree_util.keystr(path)}{array.shape}{array.dtype}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
  return h.hexdigest()


# options that make the run from the scores, not the scores themselves; and those that change
# neither (the run's tag, the devices the scores are computed on)
RUN_OPTIONS = ("passages", "aggregate", "skip_missing")
NEUTRAL_OPTIONS = ("tag", "mesh_shape")


def scoring_key(reranker: Reranker, params, options: ScoringOptions, *, model_id: str,
                params_sha256: Optional[str] = None) -> dict:
  """What a scoring's scores depend on besides the pairs and their texts (and first-stage scores),
  as JSON values: the weights (`model_id` and `params_fingerprint`, or `params_sha256` when the
  caller has it: one hash of the weights per stage), every setting the reranker
  scores them with (`reranker.fingerprint()`: its config, vocabulary and, for monoT5, target
  words, max_length and whether the BM25 score is in the input, as the checkpoint's metadata or
  t5rank.json say) and every option but `RUN_OPTIONS` and `NEUTRAL_OPTIONS`, `batch_tokens`
  resolved on this host's mesh. The scorer's shards and a cascade stage's stamp are both keyed on
  it, so that neither reuses scores the other would make anew."""
  key = {"weights": model_id, "params_sha256": params_sha256 or params_fingerprint(params),
         **reranker.fingerprint(), **dataclasses.asdict(options),
         "batch_tokens": options.batch_tokens or default_batch_tokens(
             scoring_mesh(options.mesh_shape), reranker.width)}
  for name in RUN_OPTIONS + NEUTRAL_OPTIONS:
    key.pop(name)
  return key


@dataclasses.dataclass(frozen=True)
class ScoringInputs:
  """Candidates checked once (`check_inputs`), before any weights load: `candidates` name only
  queries and documents the input files hold; `first_stage` is, for a model that reads them, each
  candidate's first-stage score among the top `depth` (None: the model reads none)."""
  candidates: Run
  first_stage: Optional[Mapping[tuple[str, str], float]]
  depth: Optional[int]


def check_inputs(queries: Mapping[str, str], corpus: Mapping[str, Document], candidates: Run, *,
                 options: ScoringOptions, reads_first_stage: bool,
                 first_stage_run: Optional[Run] = None,
                 sources: tuple[str, str] = ("queries", "corpus")) -> ScoringInputs:
  """`candidates` checked as the scorer takes them: unknown ids refused (`MissingIdsError`, naming
  `sources`) or skipped (`options.skip_missing`); for a model that `reads_first_stage`, the first-
  stage scores of the top `options.depth` taken (`t5rank.ranking.jobs.top_first_stage_scores`:
  `first_stage_run`'s when given, else the candidates' own; ValueError for scores no BM25 run
  has). `t5rank score` calls it before loading the weights and passes the result on."""
  candidates = check_candidates(candidates, queries, corpus, skip_missing=options.skip_missing,
                                sources=sources)
  first_stage = None
  if reads_first_stage:
    first_stage = top_first_stage_scores(split_at_depth(candidates, options.depth)[0],
                                         first_stage_run)
  return ScoringInputs(candidates, first_stage, options.depth)


def score_candidates(reranker: Reranker, params, *, queries: Mapping[str, str],
                     corpus: Mapping[str, Document], candidates: Run | ScoringInputs,
                     output: str, options: ScoringOptions = ScoringOptions(),
                     per_passage_output: Optional[str] = None, model_id: str = "",
                     params_sha256: Optional[str] = None,
                     sources: tuple[str, str] = ("queries", "corpus"),
                     first_stage_run: Optional[Run] = None, replace_stale_shards: bool = False,
                     progress: bool = True) -> Run:
  """Scores `candidates` with `reranker` and `params` and writes the reranked run to `output` (and
  every passage's scores to `per_passage_output`); returns the run (on host 0; {} on other hosts).

  `candidates` is a run, checked here (`check_inputs`), or `ScoringInputs` checked before (then
  `first_stage_run` and `sources` have served already). Resumable: shards go to
  `output + ".shards/"`, and a rerun with the same inputs scores only the missing ones. `model_id`
  names the weights (e.g. the checkpoint path) in the resume check, `params_sha256` is their hash
  when the caller has it (`params_fingerprint`). A model that reads each candidate's first-stage
  (BM25) score in its input reads it from `first_stage_run` when given (the candidates are then
  another stage's ranking, e.g. duoT5 over monoT5's), else from `candidates`.
  `replace_stale_shards`: shards of another job in `output + ".shards/"` (a cascade's own stage,
  rescored) are removed instead of refused.
  """
  import jax
  from tqdm import tqdm

  inputs = candidates
  if not isinstance(inputs, ScoringInputs):
    inputs = check_inputs(queries, corpus, candidates, options=options, sources=sources,
                          reads_first_stage=reranker.reads_first_stage,
                          first_stage_run=first_stage_run)
  elif (inputs.depth != options.depth
        or (inputs.first_stage is not None) != reranker.reads_first_stage):
    raise ValueError(f"the candidates were checked for depth {inputs.depth} and a model that "
                     f"reads {'' if inputs.first_stage is not None else 'no '}first-stage "
                     f"scores, not for depth {options.depth} and {reranker.describe()}")
  job = plan_job(reranker, queries, corpus, inputs.candidates, options,
                 first_stage=inputs.first_stage)
  first_stage = job.first_stage
  pairs = job.pairs
  num_shards = max(1, -(-len(pairs) // options.shard_size))
  directory = output + ".shards"
  mesh = scoring_mesh(options.mesh_shape)
  settings = scoring_key(reranker, params, options, model_id=model_id, params_sha256=params_sha256)
  batch_tokens = settings["batch_tokens"]
  if first_stage is not None:  # the scores are part of the inputs
    settings["first_stage_sha256"] = hashlib.sha256(
        json.dumps(sorted((*key, s) for key, s in first_stage.items())).encode()).hexdigest()
  shards.open_shard_directory(directory, {
      "fingerprint": shards.fingerprint(pairs, queries, job.passages, settings), "settings": settings,
      "num_shards": num_shards, "num_pairs": len(pairs)}, replace=replace_stale_shards)

  host, hosts = jax.process_index(), jax.process_count()
  shard_pairs = [pairs[k * options.shard_size:(k + 1) * options.shard_size]
                 for k in range(num_shards)]
  mine = list(range(host, num_shards, hosts))
  todo = [k for k in mine if not shards.check_shard(
      shards.shard_path(directory, k, num_shards), shard_pairs[k])]
  logger.info("%d pairs in %d shards; this host (%d of %d) has %d shards, %d already done; %s on "
              "a (data %d, model %d) mesh of %s, %s matrix products", len(pairs), num_shards,
              host, hosts, len(mine), len(mine) - len(todo), reranker.describe(),
              mesh.shape["data"], mesh.shape["model"], mesh.devices.flat[0].platform,
              options.precision)

  device_params = place_params(params, reranker.param_axes(), mesh)

  def prepare(k: int) -> tuple[int, list, list[Batch]]:
    examples = reranker.encode(*job.inputs(shard_pairs[k]))
    return k, examples, reranker.batches(examples, batch_tokens=batch_tokens,
                                         row_multiple=mesh.shape["data"],
                                         length_bucket=options.length_bucket)

  total = sum(len(shard_pairs[k]) for k in mine)
  done = total - sum(len(shard_pairs[k]) for k in todo)
  scored: dict[int, list] = {}  # the rows of the shards scored here, not read back
  with jax.default_matmul_precision(options.precision), tqdm(
      total=total, initial=done, unit="pair", desc="scoring", disable=not progress,
      smoothing=0.05, mininterval=0.1 if sys.stderr.isatty() else 30.0) as bar:  # a log: every 30 s
    for k, examples, batches in prefetch(map(prepare, todo)):
      state = reranker.shard_state(device_params, examples, mesh=mesh, batch_tokens=batch_tokens,
                                   length_bucket=options.length_bucket)
      scores, p = score_batches(reranker, state, batches, len(shard_pairs[k]), mesh=mesh,
                                on_batch=bar.update)
      check_finite_scores(scores, shard_pairs[k])
      shards.write_shard(shards.shard_path(directory, k, num_shards), shard_pairs[k], scores, p)
      if host == 0:  # the rows it ranks: as read_shard would read them back
        scored[k] = list(zip(shard_pairs[k], scores.tolist(), p.tolist()))

  if hosts > 1:
    from jax.experimental import multihost_utils
    multihost_utils.sync_global_devices("t5rank score: all shards written")
  if host != 0:
    return {}
  missing = [k for k in range(num_shards)
             if not os.path.exists(shards.shard_path(directory, k, num_shards))]
  if missing:  # e.g. hosts that did not share the directory
    raise shards.ShardError(f"{len(missing)} of {num_shards} shards are missing from {directory} "
                            f"(first: {missing[0]}); with --distributed every host must write into "
                            "the same directory (a shared file system)")
  rows = [row for k in range(num_shards) for row in scored.get(k) or shards.read_shard(
      shards.shard_path(directory, k, num_shards), shard_pairs[k])]
  run = job.run(rows)
  if per_passage_output:
    from t5rank.files import atomic_write

    with atomic_write(per_passage_output) as f:
      f.writelines(job.passage_lines(rows))
  write_run(output, run, options.tag)
  shutil.rmtree(directory)
  return run


def score_pairs(reranker: Reranker, params, queries: Sequence[str], passages: Sequence[str],
                first_stage: Optional[Sequence[float]] = None, *, mesh=None,
                batch_tokens: Optional[int] = None,
                precision: str = "float32") -> tuple[np.ndarray, np.ndarray]:
  """(score, P) of each (query, passage) pair, in memory: the scorer's encoding, batching and device
  path without candidates files or shards (training-time evaluation, benchmarks, notebooks)."""
  import jax

  mesh = mesh if mesh is not None else scoring_mesh()
  device_params = place_params(params, reranker.param_axes(), mesh)
  examples = reranker.encode(queries, passages, first_stage)
  batch_tokens = batch_tokens or default_batch_tokens(mesh, reranker.width)
  batches = reranker.batches(examples, batch_tokens=batch_tokens, row_multiple=mesh.shape["data"])
  with jax.default_matmul_precision(precision):
    state = reranker.shard_state(device_params, examples, mesh=mesh, batch_tokens=batch_tokens)
    return score_batches(reranker, state, batches, len(examples), mesh=mesh)
