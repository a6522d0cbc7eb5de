"""The Python front door: rerank from your own program, in the shape of sentence-transformers'
CrossEncoder.

    import t5rank
    ranker = t5rank.load("castorini/monot5-base-msmarco")      # a Hub id, a path, shipped:NAME
    ranker.rank("what is a term life policy", ["passage one", "passage two", ...], top_k=3)
    # [{"corpus_id": 1, "score": -0.02}, {"corpus_id": 0, "score": -1.73}, ...]   best first
    ranker.predict([("query", "passage"), ...])                   # numpy array, one score a pair

Scores are those `t5rank score` writes for the same pairs with the same options (monoT5: log
P(true), the best window's for a long text; duoT5: the aggregation of its ordered pairs; TK and
the dual encoder: their own scores): the same code plans, encodes, batches and ranks them
(`t5rank.ranking.jobs.plan_job`). The parameters are placed on the devices once, when the ranker
is made; a call whose batches have shapes seen before compiles nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Optional, Sequence, Union

import numpy as np

from t5rank.checkpoints.resolved import Checkpoint
from t5rank.data.readers import Document
from t5rank.ranking import options as declared
from t5rank.ranking.jobs import ScoringJob, job_class, plan_job
from t5rank.ranking.scorer import PRECISIONS, ScoringOptions, default_batch_tokens, score_batches


class Ranker:
  """A reranker with its parameters placed on this host's devices (`load` makes one)."""

  def __init__(self, reranker, params, *, checkpoint: str, options: ScoringOptions,
               dtype: Optional[str] = None):
    import jax

    from t5rank.ranking.devices import place_params, scoring_mesh

    self.reranker, self.checkpoint, self.options = reranker, checkpoint, options
    self.dtype = dtype or "float32"
    self.mesh = scoring_mesh(options.mesh_shape)
    self.batch_tokens = options.batch_tokens or default_batch_tokens(self.mesh, reranker.width)
    self.params = place_params(params, reranker.param_axes(), self.mesh)
    self.device = self.mesh.devices.flat[0].platform
    self._jax = jax

  def __repr__(self) -> str:
    return (f"Ranker({self.reranker.name}, checkpoint={self.checkpoint!r}, dtype={self.dtype}, "
            f"devices={self.mesh.devices.size}x{self.device})")

  @property
  def family(self) -> str:
    """The model family (`monot5`, `duot5`, `tk`, `dual_encoder`, ...)."""
    return self.reranker.name

  def predict(self, pairs, first_stage_scores: Optional[Sequence[float]] = None, *,
              batch_size: Optional[int] = None, show_progress_bar: Optional[bool] = None,
              activation_fn: Any = None, apply_softmax: bool = False,
              convert_to_numpy: bool = True, convert_to_tensor: bool = False):
    """One score per `(query, text)` pair, as `t5rank score` gives it (float64 array, in the
    pairs' order; monoT5's log P(true)); one pair alone gives one score. `first_stage_scores`
    (one per pair) for a model that reads each candidate's BM25 score. A pairwise model (duoT5)
    scores a text against the others: use `rank`. The keywords of sentence-transformers'
    `CrossEncoder.predict`, with their meaning: `batch_size` pairs scored at a time (their scores
    do not depend on it), `show_progress_bar`, `activation_fn` (a callable applied to the scores,
    e.g. `torch.nn.Sigmoid()`, or "probability": P(true) for monoT5, the sigmoid of the score for
    a model whose score is no log-probability, as the service normalizes), `apply_softmax`
    (refused: one score per pair), `convert_to_numpy` (False: a list), `convert_to_tensor` (a
    torch tensor; needs torch)."""
    if not job_class(self.reranker).independent:
      raise ValueError(f"{self.family} scores each text against the others of a query; "
                       "use rank(query, documents)")
    single = (isinstance(pairs, (tuple, list)) and len(pairs) == 2
              and all(isinstance(x, str) for x in pairs))
    pairs = [tuple(pair) for pair in ([pairs] if single else pairs)]
    if any(len(pair) != 2 or not all(isinstance(x, str) for x in pair) for pair in pairs):
      raise ValueError("predict takes (query, text) pairs of strings")
    _check_batch_size(batch_size, apply_softmax)
    queries = {str(i): q for i, (q, _) in enumerate(pairs)}
    corpus = {str(i): Document(t) for i, (_, t) in enumerate(pairs)}
    first = self._first_stage(first_stage_scores, len(pairs))
    candidates = {str(i): [(str(i), first[i] if first else 0.0)] for i in range(len(pairs))}
    planned = self.plan(queries, corpus, candidates)
    run = planned.run(*self.score_examples(planned.examples, batch_size=batch_size,
                                           progress=bool(show_progress_bar)))
    scores = self._activated(np.array([run[str(i)][0][1] for i in range(len(pairs))],
                                      np.float64), activation_fn)
    scores = _converted(scores, convert_to_numpy, convert_to_tensor)
    return scores[0] if single else scores

  def _activated(self, scores: np.ndarray, activation_fn: Any) -> np.ndarray:
    """`scores` through `activation_fn` (`predict`'s): None, "probability", or a callable."""
    if activation_fn is None:
      return scores
    if activation_fn == "probability":
      if self.reranker.log_probability:
        return np.exp(np.minimum(scores, 0.0))
      return 0.5 * (1.0 + np.tanh(0.5 * scores))
    if not callable(activation_fn):
      raise ValueError(f"activation_fn must be a callable or 'probability', got {activation_fn!r}")
    try:
      import torch
    except ImportError:
      return np.asarray(activation_fn(scores), np.float64)
    if isinstance(activation_fn, torch.nn.Module):
      return activation_fn(torch.as_tensor(scores)).detach().cpu().numpy().astype(np.float64)
    return np.asarray(activation_fn(scores), np.float64)

  def rank(self, query: str, documents: Sequence[str], top_k: Optional[int] = None,
           return_documents: bool = False,
           first_stage_scores: Optional[Sequence[float]] = None, *,
           batch_size: Optional[int] = None, show_progress_bar: Optional[bool] = None,
           activation_fn: Any = None, apply_softmax: bool = False,
           convert_to_numpy: bool = True, convert_to_tensor: bool = False
           ) -> list[dict[str, Any]]:
    """`documents` ranked for `query`, best first: [{"corpus_id": index in `documents`, "score":
    s[, "text": the document]}, ...], the first `top_k` (None: all). The documents' order is the
    ranking they come from: a ranker made with `depth` reranks the first `depth` and keeps the
    rest below in that order (`t5rank score --depth` over a run in that order).
    `first_stage_scores` (one per document) for a model that reads each candidate's BM25 score in
    its input (`t5rank score --first-stage-run`); other models ignore them. `top_k=0` gives [].
    The other keywords are sentence-transformers' `CrossEncoder.rank`'s, as `predict` takes them
    (`convert_to_numpy`/`convert_to_tensor` change nothing: the scores are floats in dicts)."""
    if top_k is not None and top_k < 0:
      raise ValueError(f"top_k must be a number >= 0, got {top_k}")
    _check_batch_size(batch_size, apply_softmax)
    if top_k == 0:
      return []
    planned = self.plan_ranking(query, documents, first_stage_scores)
    ranked = planned.ranking(*self.score_examples(planned.examples, batch_size=batch_size,
                                                  progress=bool(show_progress_bar)))[:top_k]
    scores = self._activated(np.array([s for _, s in ranked], np.float64), activation_fn)
    return [{"corpus_id": index, "score": float(score),
             **({"text": documents[index]} if return_documents else {})}
            for (index, _), score in zip(ranked, scores)]

  def plan_ranking(self, query: str, documents: Sequence[str],
                   first_stage_scores: Optional[Sequence[float]] = None) -> "PlannedRun":
    """What `rank` scores for `documents` (checked as `rank` checks them): a `PlannedRun` whose
    `examples` go through `score_examples` (alone, or with other plans' examples: the scores of
    an example do not depend on its neighbours) and whose `ranking` is `rank`'s answer."""
    if not isinstance(query, str) or isinstance(documents, str) or not all(
        isinstance(d, str) for d in documents):
      raise ValueError("rank takes a query string and a list of document strings")
    first = self._first_stage(first_stage_scores, len(documents))
    corpus = {str(i): Document(text) for i, text in enumerate(documents)}
    order = {"q": [(str(i), float(len(documents) - i)) for i in range(len(documents))]}
    return self.plan({"q": query}, corpus, order,
                     {"q": [(str(i), s) for i, s in enumerate(first)]} if first is not None
                     else None)

  def _first_stage(self, given: Optional[Sequence[float]], n: int) -> Optional[list[float]]:
    """The first-stage score of each of `n` texts, checked: `given`, or None for a model that
    reads none (`given` is then ignored)."""
    if not self.reranker.reads_first_stage:
      return None
    if given is None:
      raise ValueError(f"{self.checkpoint} reads each candidate's BM25 score in its input "
                       "(its metadata's bm25_in_input): pass first_stage_scores, one BM25 "
                       "score per text")
    given = [float(s) for s in given]
    if len(given) != n:
      raise ValueError(f"first_stage_scores has {len(given)} scores for {n} texts")
    if not all(np.isfinite(given)):
      raise ValueError("first_stage_scores holds a NaN or infinite score")
    return given

  def plan(self, queries, corpus, candidates, first_stage_run=None) -> "PlannedRun":
    """The plan of the run `t5rank score` writes for `candidates` (in memory: no files, no
    shards): the examples of each query's top candidates (by the candidates' scores) and how their
    scores become the run. A model that reads first-stage scores reads them from
    `first_stage_run` (as `t5rank score --first-stage-run`), else from `candidates`."""
    job = plan_job(self.reranker, queries, corpus, candidates, self.options, first_stage_run)
    examples = self.reranker.encode(*job.inputs(job.pairs)) if job.pairs else []
    return PlannedRun(job, examples)

  def score_examples(self, examples: Sequence[Any], *, batch_size: Optional[int] = None,
                     progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(score, P), each (len(examples),) float32, of encoded examples (`plan`'s, or several plans'
    concatenated), batched and scored as `t5rank score` does, `batch_size` examples at a time
    (None: all; an example's score does not depend on the others), with a progress bar when
    `progress`; FloatingPointError when a score is NaN or infinite."""
    if batch_size is not None and len(examples) > batch_size:
      from tqdm import tqdm

      starts = tqdm(range(0, len(examples), batch_size), unit="batch", disable=not progress)
      parts = [self.score_examples(examples[i:i + batch_size]) for i in starts]
      return (np.concatenate([s for s, _ in parts]), np.concatenate([p for _, p in parts]))
    if not len(examples):
      return np.zeros(0, np.float32), np.zeros(0, np.float32)
    batches = self.reranker.batches(examples, batch_tokens=self.batch_tokens,
                                    row_multiple=self.mesh.shape["data"],
                                    length_bucket=self.options.length_bucket)
    with self._jax.default_matmul_precision(self.options.precision):
      state = self.reranker.shard_state(self.params, examples, mesh=self.mesh,
                                        batch_tokens=self.batch_tokens,
                                        length_bucket=self.options.length_bucket)
      scores, p = score_batches(self.reranker, state, batches, len(examples), mesh=self.mesh)
    if not np.all(np.isfinite(scores)):
      raise FloatingPointError(f"{self.checkpoint} gave a NaN or infinite score")
    return scores, p

  def _score(self, queries, corpus, candidates):
    """The run `t5rank score` writes for `candidates` (in memory: no files, no shards)."""
    planned = self.plan(queries, corpus, candidates)
    return planned.run(*self.score_examples(planned.examples))


def _check_batch_size(batch_size: Optional[int], apply_softmax: bool) -> None:
  if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
    raise ValueError(f"batch_size must be a positive number of pairs, got {batch_size!r}")
  if apply_softmax:
    raise ValueError("apply_softmax: t5rank gives one score per pair, and a softmax over one "
                     "score is 1; use activation_fn='probability' for P(true)")


def _converted(scores: np.ndarray, to_numpy: bool, to_tensor: bool):
  """`predict`'s scores as asked: a numpy array, a list, or a torch tensor."""
  if to_tensor:
    try:
      import torch
    except ImportError:
      raise ValueError("convert_to_tensor needs torch, which is not installed; the scores are "
                       "numpy arrays without it") from None
    return torch.as_tensor(scores)
  return scores if to_numpy else scores.tolist()


@dataclasses.dataclass
class PlannedRun:
  """A run to score (`Ranker.plan`): `examples`, the model inputs of each query's top candidates,
  and how their scores make the run (`run`, the job's)."""
  job: ScoringJob
  examples: list

  def run(self, scores: np.ndarray, p: np.ndarray) -> dict:
    """The run of the examples' (score, P), in `examples`' order: {qid: [(docid, score), ...]}."""
    return self.job.run(zip(self.job.pairs, scores.tolist(), p.tolist()))

  def ranking(self, scores: np.ndarray, p: np.ndarray) -> list[tuple[int, float]]:
    """`plan_ranking`'s answer: (index in the documents, score), best first, ties in the
    documents' order."""
    ranked = [(int(docid), score) for docid, score in self.run(scores, p).get("q", [])]
    return sorted(ranked, key=lambda item: (-item[1], item[0]))


def load(checkpoint: Union[str, Checkpoint], *, reranker: Optional[str] = None,
         dtype: Optional[str] = None, precision: Optional[str] = None,
         batch_tokens: Optional[int] = None, window: int = declared.default("window", "service"),
         stride: int = declared.default("stride", "service"),
         passages: str = declared.default("passages", "service"),
         language: str = declared.default("language", "service"), depth: Optional[int] = None,
         aggregate: str = declared.default("aggregate", "service"), targets=None,
         vocab: Optional[str] = None, max_length: Optional[int] = None,
         bm25_in_input: Optional[bool] = None, truncation: Optional[str] = None,
         config: Optional[str] = None, length_bucket: Optional[int] = None,
         mesh: tuple[int, int] = declared.default("mesh", "service")) -> Ranker:
  """A `Ranker` of `checkpoint`: a path in any format t5rank reads, `shipped:NAME` or a Hugging
  Face Hub id `ORG/NAME[@REVISION]` (`t5rank.checkpoints.locate`), resolved once, or a resolved
  `t5rank.checkpoints.resolved.Checkpoint`. The options are `t5rank
  score`'s: `reranker` (the family, when the checkpoint's files do not say: "duot5" for a Hugging
  Face duoT5), `dtype` ("bfloat16" casts parameters and activations), `precision` of matrix
  products, `batch_tokens`, `window`/`stride`/`passages`/`language` (sentence windows and
  their aggregation for long texts; `window=0`, the default here, scores whole texts, as for
  passages), `depth` (only the best `depth` of `rank`'s documents are reranked: duoT5's K),
  `aggregate` (duoT5's pair aggregation), `targets` ("true_false", or ("yes", "no")), `vocab`,
  `max_length`, `bm25_in_input`, `truncation` (past max_length: "document", the default, cuts the
  document; "input" the whole input at its end, as pygaggle and transformers' T5 tokenizer),
  `config` (a config name, for formats without one),
  `length_bucket` and `mesh` (data, model). Each is declared once, with its check and default, in
  `t5rank.ranking.options`; the defaults are those of a service (`window` 0: whole texts; `t5rank
  score`'s is 10, windows of a corpus of documents)."""
  from t5rank.checkpoints.resolved import resolve

  for name, value in (("dtype", dtype), ("batch_tokens", batch_tokens), ("window", window),
                      ("stride", stride), ("passages", passages), ("depth", depth),
                      ("aggregate", aggregate), ("max_length", max_length),
                      ("truncation", truncation), ("length_bucket", length_bucket)):
    declared.check(name, value)
  from t5rank.models.loading import load_reranker
  from t5rank.ranking.devices import precision_problem, use_cpu_devices

  if precision is not None and precision not in PRECISIONS:
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
  if depth is not None and depth < 1:
    raise ValueError(f"depth must be a positive number, got {depth}")
  options = ScoringOptions(
      passages=passages, window=window, stride=stride, language=language,
      batch_tokens=batch_tokens, mesh_shape=tuple(mesh),
      precision=precision or ("bfloat16" if dtype == "bfloat16" else "float32"),
      length_bucket=length_bucket, depth=depth, aggregate=aggregate)
  devices_logger = logging.getLogger("t5rank.ranking.devices")
  level = devices_logger.level
  devices_logger.setLevel(logging.ERROR)  # JAX may have started already (a notebook): fine
  try:
    use_cpu_devices(None)
  finally:
    devices_logger.setLevel(level)
  import jax

  problem = precision_problem(precision, jax.devices()[0].platform)
  if problem:
    raise ValueError(problem)
  resolved = resolve(checkpoint)
  if isinstance(targets, str) and "," in targets:
    targets = tuple(targets.split(",", 1))
  model, params = load_reranker(resolved, config_name=config, model=reranker, options={
      "vocab": vocab, "targets": targets, "dtype": dtype, "max_length": max_length,
      "bm25_in_input": bm25_in_input, "truncation": truncation})
  name = resolved.name if not os.path.isdir(resolved.name) else resolved.path
  ranker = Ranker(model, params, checkpoint=name,
                  options=options, dtype=dtype)
  from t5rank.ranking.devices import bfloat16_note

  note = bfloat16_note(dtype, ranker.device)
  if note:
    logging.getLogger(__name__).warning("%s", note)
  return ranker


__all__ = ["PlannedRun", "Ranker", "load"]
