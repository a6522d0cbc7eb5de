"""`t5rank score`: rerank a candidate run with monoT5, resumably, on all local devices.

    t5rank score --checkpoint CKPT --queries Q --corpus C --run CANDIDATES --output OUT

The pipeline, one shard at a time (a shard is `shard_size` consecutive passages of the candidates):
    candidates ─► passages (sentence windows) ─► ids (tokenized once, in a background thread)
    ─► length buckets filled to a token budget ─► score_step on a 1-D 'data' mesh of the local devices
    ─► shard file (atomic) ─► when all shards exist: aggregate windows, sort, write the run (atomic)

Scores are `t5rank.score.monot5_score`'s log P(positive word). A document's score aggregates its
windows (MaxP by default); each query's documents are sorted by score, descending, ties broken by
docid, ascending. A model trained with the BM25 score in its input (`t5rank.bm25_input`; its
metadata.json says `bm25_in_input`) reads each candidate's score from the candidates run, which must
then be a BM25 run with scores (`t5rank retrieve`'s). Shards live in `OUT.shards/` until the run is
written; rerunning the same command after an interruption scores only the shards that are missing. On several hosts (`--distributed`),
host i scores shards i, i + n, ... into the same (shared) directory and host 0 writes the run.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import logging
import os
import queue
import shutil
import sys
import threading
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence, TypeVar

import numpy as np

from t5rank.config import T5Config
from t5rank.inputs import DEFAULT_MAX_LENGTH, ScoreIds, TemplateIds, assemble
from t5rank.passages import (AGGREGATIONS, DOCUMENT_STRIDE, DOCUMENT_WINDOW, aggregate,
                             document_passages)
from t5rank.readers import Document, Run, atomic_write, write_run
from t5rank.vocab import Vocabulary

logger = logging.getLogger(__name__)

BUCKET_STEP = 64  # padded lengths are multiples of this (and max_length): a few shapes, little padding
MANIFEST_FILE = "manifest.json"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ScoringOptions:
  """How candidates become scored passages and a run. `batch_tokens` is the padded token budget of
  one batch (None: `default_batch_tokens`); `shard_size` the number of passages per output shard;
  `bm25_in_input` writes each candidate's run score into its input (`t5rank.bm25_input`)."""
  aggregation: str = "maxp"
  window: int = DOCUMENT_WINDOW
  stride: int = DOCUMENT_STRIDE
  language: str = "en"
  max_length: int = DEFAULT_MAX_LENGTH
  batch_tokens: Optional[int] = None
  shard_size: int = 10_000
  skip_missing: bool = False
  tag: str = "t5rank"
  bm25_in_input: bool = False


class Pair(NamedTuple):
  """One scored input: window `window` of document `docid` for query `qid`."""
  qid: str
  docid: str
  window: int


class Batch(NamedTuple):
  """Rows `items` (indices into the shard's pairs) padded into `tokens` (B, L); B >= len(items)."""
  items: np.ndarray
  tokens: np.ndarray


class MissingIdsError(ValueError):
  """Candidates that name queries or documents the input files do not have."""


# ---------------------------------------------------------------------------------------------------
# Candidates -> passages -> ids -> batches (pure).

def _first_few(ids: Sequence[str], n: int = 5) -> str:
  shown = ", ".join(repr(i) for i in ids[:n])
  return shown + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def check_candidates(candidates: Run, queries: Mapping[str, str], corpus: Mapping[str, Document], *,
                     skip_missing: bool, sources: tuple[str, str] = ("queries", "corpus")) -> Run:
  """`candidates` without those whose query or document is unknown. Unknown ids raise
  `MissingIdsError` naming the first few and the counts, unless `skip_missing`, which logs them."""
  missing_queries = [qid for qid in candidates if qid not in queries]
  missing_docs = list(dict.fromkeys(docid for docs in candidates.values() for docid, _ in docs
                                    if docid not in corpus))
  if not missing_queries and not missing_docs:
    return candidates
  kept = {qid: [(d, s) for d, s in docs if d in corpus] for qid, docs in candidates.items()
          if qid in queries}
  kept = {qid: docs for qid, docs in kept.items() if docs}
  dropped = sum(map(len, candidates.values())) - sum(map(len, kept.values()))
  problems = []
  if missing_queries:
    problems.append(f"{len(missing_queries)} query id(s) missing from {sources[0]}: "
                    f"{_first_few(missing_queries)}")
  if missing_docs:
    problems.append(f"{len(missing_docs)} document id(s) missing from {sources[1]}: "
                    f"{_first_few(missing_docs)}")
  message = f"{dropped} candidate(s) name unknown ids: " + "; ".join(problems)
  if not skip_missing:
    raise MissingIdsError(message + ". Pass --skip-missing to skip them.")
  logger.warning("skipping %s", message)
  return kept


def candidate_passages(candidates: Run, corpus: Mapping[str, Document], options: ScoringOptions
                       ) -> tuple[list[Pair], dict[str, list[str]]]:
  """The pairs to score, in candidate order, and each candidate document's passages (split once)."""
  passages: dict[str, list[str]] = {}
  pairs = []
  for qid, docs in candidates.items():
    for docid, _ in docs:
      if docid not in passages:
        passages[docid] = document_passages(corpus[docid], options.window, options.stride,
                                            options.language)
      pairs.extend(Pair(qid, docid, w) for w in range(len(passages[docid])))
  return pairs, passages


def encode_shard(vocab: Vocabulary, pairs: Sequence[Pair], queries: Mapping[str, str],
                 passages: Mapping[str, Sequence[str]], max_length: int,
                 first_stage: Optional[Mapping[tuple[str, str], float]] = None) -> list[list[int]]:
  """Ids of each pair's input, as `t5rank.inputs.encode_pairs` makes them, tokenizing each distinct
  query and passage of the shard once; with `first_stage` ((qid, docid) -> BM25 score), every
  window of a document carries the document's score."""
  marks = TemplateIds(vocab)
  score_ids = ScoreIds(vocab)
  qids = list(dict.fromkeys(p.qid for p in pairs))
  query_ids = dict(zip(qids, vocab.encode_batch([queries[q] for q in qids])))
  keys = list(dict.fromkeys((p.docid, p.window) for p in pairs))
  passage_ids = dict(zip(keys, vocab.encode_batch([passages[d][w] for d, w in keys])))
  return [assemble(query_ids[p.qid], passage_ids[p.docid, p.window], marks, max_length,
                   score_ids(first_stage[p.qid, p.docid]) if first_stage is not None else ())
          for p in pairs]


def first_stage_scores(candidates: Run) -> dict[tuple[str, str], float]:
  """(qid, docid) -> the candidates run's score, for `bm25_in_input`. BM25 scores are >= 0: a run
  with a negative score (e.g. a `qid docid` file, whose candidates are numbered -1, -2, ...) is
  refused."""
  scores = {(qid, docid): score for qid, docs in candidates.items() for docid, score in docs}
  bad = [(key, s) for key, s in scores.items() if not s >= 0 or s == float("inf")]
  if bad:
    (qid, docid), score = bad[0]
    raise ValueError(f"the model reads each candidate's BM25 score, but the candidates run has "
                     f"{len(bad)} score(s) that are not finite numbers >= 0 (query {qid!r}, "
                     f"document {docid!r}: {score!r}); give a BM25 run with its scores "
                     "(t5rank retrieve), or --no-bm25-in-input")
  return scores


def bucket_lengths(max_length: int, step: int = BUCKET_STEP) -> list[int]:
  """The padded lengths: multiples of `step` below `max_length`, then `max_length`."""
  return list(range(step, max_length, step)) + [max_length]


def batch_rows(length: int, batch_tokens: int, row_multiple: int = 1) -> list[int]:
  """The row counts a batch of `length`-long sequences may have, largest first: a full batch
  (batch_tokens // length, a multiple of `row_multiple`) and 1/2, 1/4, 1/8 of it for the last,
  partial batch of a bucket, so that small jobs are not mostly padding yet shapes stay few."""
  full = max(row_multiple, batch_tokens // length // row_multiple * row_multiple)
  sizes = [-(-full // 2**j // row_multiple) * row_multiple for j in range(4)]
  return list(dict.fromkeys(sizes))


def bucket_batches(ids: Sequence[Sequence[int]], *, batch_tokens: int, max_length: int,
                   row_multiple: int = 1) -> list[Batch]:
  """Sequences sorted by length into buckets (`bucket_lengths`), each bucket cut into full batches
  of batch_tokens // length rows and a last batch of the smallest `batch_rows` size that holds the
  rest; so a job compiles at most 4 shapes per bucket. Rows past a batch's items are all padding."""
  lengths = np.fromiter(map(len, ids), np.int64, len(ids))
  if lengths.size and lengths.max() > max_length:
    raise ValueError(f"a sequence of {lengths.max()} ids exceeds max_length {max_length}")
  order = np.argsort(lengths, kind="stable")
  sorted_lengths = lengths[order]
  batches, start = [], 0
  for length in bucket_lengths(max_length):
    stop = int(np.searchsorted(sorted_lengths, length, side="right"))
    sizes = batch_rows(length, batch_tokens, row_multiple)
    for first in range(start, stop, sizes[0]):
      items = order[first:min(first + sizes[0], stop)]
      rows = min(size for size in sizes if size >= len(items))
      tokens = np.zeros((rows, length), np.int32)  # (B, L)
      for row, item in enumerate(items):
        tokens[row, :lengths[item]] = ids[item]
      batches.append(Batch(items, tokens))
    start = stop
  return batches


# ---------------------------------------------------------------------------------------------------
# Device work.

def cpu_cores() -> int:
  """The cores this process may run on."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def use_cpu_devices(count: Optional[int] = None) -> int:
  """Makes JAX's CPU backend `count` devices (default: one per core of `cpu_cores`); returns the
  count in effect. The scorer splits each batch over the devices, so on a CPU the batch runs as
  `count` concurrent computations, one per core, instead of one computation whose small matrix
  products XLA spreads thinly over all cores: 1.2 to 1.5x the pairs/s of the tiny model on 2 cores,
  about the same for t5_small, the same scores (BENCHMARKS.md, "One CPU device per core"). GPUs and
  TPUs are unaffected (their devices are not the CPU backend's). Takes effect only before JAX starts its backends; later it logs a
  warning and changes nothing."""
  import jax

  count = cpu_cores() if count is None else count
  if count < 1:
    raise ValueError(f"the number of CPU devices must be >= 1, got {count}")
  try:
    jax.config.update("jax_num_cpu_devices", count)
  except RuntimeError:  # the backends already exist
    current = jax.local_device_count("cpu")
    if current != count:
      logger.warning("JAX has started with %d CPU device(s); %d asked for are not used", current,
                     count)
    return current
  return count


def data_sharding(devices: Optional[Sequence] = None):
  """A NamedSharding that splits the batch axis over a 1-D 'data' mesh of `devices` (default: this
  host's devices)."""
  import jax
  from jax.sharding import Mesh, NamedSharding, PartitionSpec

  mesh = Mesh(np.asarray(devices if devices is not None else jax.local_devices()), ("data",))
  return NamedSharding(mesh, PartitionSpec("data"))


def default_batch_tokens(sharding) -> int:
  """Padded tokens per batch: 2048 per CPU device (small, cache-sized batches were fastest there;
  see BENCHMARKS.md), 16384 per device on GPU and TPU."""
  if sharding.mesh.devices.flat[0].platform == "cpu":
    return 2048 * sharding.mesh.size
  return 16384 * sharding.mesh.size


def replicate(params, sharding):
  """`params` copied onto every device of `sharding`'s mesh."""
  import jax
  from jax.sharding import NamedSharding, PartitionSpec

  return jax.device_put(params, NamedSharding(sharding.mesh, PartitionSpec()))


def score_batches(params, batches: Iterable[Batch], num_items: int, *, config, target_ids,
                  sharding, on_batch: Optional[Callable[[int], None]] = None,
                  in_flight: int = 2) -> tuple[np.ndarray, np.ndarray]:
  """(log P, P), each (num_items,) float32 in item order, of the batches' rows through `score_step`.
  Up to `in_flight` batches are dispatched before the oldest is read back, so that the host prepares
  the next batch while the devices compute. `on_batch(n)` is called as each batch of n items lands."""
  import jax

  from t5rank.score import score_step

  log_p = np.full(num_items, np.nan, np.float32)
  p = np.full(num_items, np.nan, np.float32)
  pending: collections.deque = collections.deque()

  def land() -> None:
    batch, (batch_log_p, batch_p) = pending.popleft()
    n = len(batch.items)
    log_p[batch.items] = np.asarray(batch_log_p)[:n]
    p[batch.items] = np.asarray(batch_p)[:n]
    if on_batch is not None:
      on_batch(n)

  for batch in batches:
    tokens = jax.device_put(batch.tokens, sharding)
    pending.append((batch, score_step(params, tokens, config=config, target_ids=target_ids)))
    if len(pending) > in_flight:
      land()
  while pending:
    land()
  return log_p, p


def prefetch(items: Iterable[T], size: int = 2) -> Iterator[T]:
  """Iterates `items` in a background thread, at most `size` ahead of the consumer; re-raises the
  producer's exception, and stops the producer when the consumer stops early."""
  channel: queue.Queue = queue.Queue(size)
  stop = threading.Event()

  def put(entry) -> bool:
    while not stop.is_set():
      try:
        channel.put(entry, timeout=0.1)
        return True
      except queue.Full:
        pass
    return False

  def produce() -> None:
    try:
      for item in items:
        if not put((True, item)):
          return
      put((False, None))
    except BaseException as e:  # handed to the consumer
      put((False, e))

  thread = threading.Thread(target=produce, daemon=True)
  thread.start()
  try:
    while True:
      more, value = channel.get()
      if not more:
        if value is not None:
          raise value
        return
      yield value
  finally:
    stop.set()
    thread.join()


# ---------------------------------------------------------------------------------------------------
# Shards and the final run.

def _shard_path(directory: str, index: int, count: int) -> str:
  return os.path.join(directory, f"shard-{index:05d}-of-{count:05d}.tsv")


def write_shard(path: str, pairs: Sequence[Pair], log_p: np.ndarray, p: np.ndarray) -> None:
  """Writes one shard's scores, `qid docid window log_p p` per line, atomically."""
  with atomic_write(path) as f:
    for pair, lp, pp in zip(pairs, log_p.tolist(), p.tolist()):
      f.write(f"{pair.qid}\t{pair.docid}\t{pair.window}\t{lp!r}\t{pp!r}\n")


def read_shard(path: str) -> list[tuple[Pair, float, float]]:
  """The (pair, log P, P) rows of a shard written by `write_shard`."""
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      qid, docid, window, lp, pp = line.rstrip("\n").split("\t")
      rows.append((Pair(qid, docid, int(window)), float(lp), float(pp)))
  return rows


def rank_documents(rows: Iterable[tuple[Pair, float, float]], aggregation: str
                   ) -> tuple[Run, dict[tuple[str, str], int]]:
  """(run, winners): each query's documents scored by `aggregate` over their windows' log P and
  sorted by score descending, then docid ascending; winners maps (qid, docid) to the winning window.
  Queries keep the order in which they first appear in `rows`."""
  windows: dict[str, dict[str, dict[int, float]]] = {}
  for pair, log_p, _ in rows:
    windows.setdefault(pair.qid, {}).setdefault(pair.docid, {})[pair.window] = log_p
  run: Run = {}
  winners = {}
  for qid, docs in windows.items():
    scored = []
    for docid, by_window in docs.items():
      score, best = aggregate([by_window[w] for w in sorted(by_window)], aggregation)
      scored.append((docid, score))
      winners[qid, docid] = best
    run[qid] = sorted(scored, key=lambda item: (-item[1], item[0]))
  return run, winners


def fingerprint(pairs: Sequence[Pair], queries: Mapping[str, str],
                passages: Mapping[str, Sequence[str]], settings: Mapping) -> str:
  """A hash of everything that decides the shards' contents, to refuse resuming a different job."""
  h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
  for pair in pairs:
    h.update(f"{pair.qid}\t{pair.docid}\t{pair.window}\n".encode())
  for qid in dict.fromkeys(p.qid for p in pairs):
    h.update(f"{qid}\t{queries[qid]}\n".encode())
  for docid, texts in passages.items():
    h.update(json.dumps([docid, texts]).encode())
  return h.hexdigest()


def _open_shard_directory(directory: str, manifest: Mapping) -> None:
  path = os.path.join(directory, MANIFEST_FILE)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      found = json.load(f)
    if found != manifest:
      raise RuntimeError(f"{directory} holds shards of a different scoring job (other inputs, "
                         "model or options); remove it to start over, or rerun the original command")
    return
  os.makedirs(directory, exist_ok=True)
  with atomic_write(path) as f:
    json.dump(manifest, f, indent=2, sort_keys=True)


def score_candidates(params, *, config, vocab: Vocabulary, target_ids: tuple[int, int],
                     queries: Mapping[str, str], corpus: Mapping[str, Document], candidates: Run,
                     output: str, options: ScoringOptions = ScoringOptions(),
                     per_passage_output: Optional[str] = None, model_id: str = "",
                     sources: tuple[str, str] = ("queries", "corpus"), progress: bool = True) -> Run:
  """Scores `candidates` and writes the reranked run to `output` (and every passage's scores to
  `per_passage_output`); returns the run (on host 0; {} on other hosts).

  Resumable: shards go to `output + ".shards/"`, and a rerun with the same inputs scores only the
  missing ones. `model_id` names the weights (e.g. the checkpoint path) in the resume check.
  """
  import jax
  from tqdm import tqdm

  candidates = check_candidates(candidates, queries, corpus, skip_missing=options.skip_missing,
                                sources=sources)
  pairs, passages = candidate_passages(candidates, corpus, options)
  first_stage = first_stage_scores(candidates) if options.bm25_in_input else None
  num_shards = max(1, -(-len(pairs) // options.shard_size))
  directory = output + ".shards"
  sharding = data_sharding()
  batch_tokens = options.batch_tokens or default_batch_tokens(sharding)
  settings = {"model": model_id, "config": json.loads(config.to_json()), "vocab": vocab.sha256,
              "targets": list(target_ids), **dataclasses.asdict(options),
              "batch_tokens": batch_tokens}
  for irrelevant in ("aggregation", "skip_missing", "tag"):  # they only shape the merged run
    settings.pop(irrelevant)
  if first_stage is not None:  # the scores are part of the inputs
    settings["first_stage_sha256"] = hashlib.sha256(
        json.dumps(sorted((*key, s) for key, s in first_stage.items())).encode()).hexdigest()
  _open_shard_directory(directory, {"fingerprint": fingerprint(pairs, queries, passages, settings),
                                    "num_shards": num_shards, "num_pairs": len(pairs)})

  host, hosts = jax.process_index(), jax.process_count()
  shard_pairs = [pairs[k * options.shard_size:(k + 1) * options.shard_size]
                 for k in range(num_shards)]
  mine = list(range(host, num_shards, hosts))
  todo = [k for k in mine if not os.path.exists(_shard_path(directory, k, num_shards))]
  logger.info("%d pairs in %d shards; this host (%d of %d) has %d shards, %d already done",
              len(pairs), num_shards, host, hosts, len(mine), len(mine) - len(todo))

  row_multiple = sharding.mesh.size
  device_params = replicate(params, sharding)

  def prepare(k: int) -> tuple[int, list[Batch]]:
    ids = encode_shard(vocab, shard_pairs[k], queries, passages, options.max_length, first_stage)
    return k, bucket_batches(ids, batch_tokens=batch_tokens,
                             max_length=options.max_length, row_multiple=row_multiple)

  total = sum(len(shard_pairs[k]) for k in mine)
  with tqdm(total=total, initial=total - sum(len(shard_pairs[k]) for k in todo), unit="pair",
            desc="scoring", disable=not progress, smoothing=0.05,
            mininterval=0.1 if sys.stderr.isatty() else 30.0) as bar:  # a log file: every 30 s
    for k, batches in prefetch(map(prepare, todo)):
      log_p, p = score_batches(device_params, batches, len(shard_pairs[k]), config=config,
                               target_ids=target_ids, sharding=sharding, on_batch=bar.update)
      write_shard(_shard_path(directory, k, num_shards), shard_pairs[k], log_p, p)

  if hosts > 1:
    from jax.experimental import multihost_utils
    multihost_utils.sync_global_devices("t5rank score: all shards written")
  if host != 0:
    return {}
  rows = [row for k in range(num_shards) for row in read_shard(_shard_path(directory, k, num_shards))]
  run, winners = rank_documents(rows, options.aggregation)
  if per_passage_output:
    with atomic_write(per_passage_output) as f:
      for pair, lp, pp in rows:
        best = int(winners[pair.qid, pair.docid] == pair.window)
        f.write(f"{pair.qid}\t{pair.docid}\t{pair.window}\t{lp!r}\t{pp!r}\t{best}\n")
  write_run(output, run, options.tag)
  shutil.rmtree(directory)
  return run


# ---------------------------------------------------------------------------------------------------
# Command line.

def parse_targets(text: str) -> str | tuple[str, str]:
  """`--targets`: a registry name (`true_false`) or a `positive,negative` pair."""
  if "," in text:
    positive, negative = text.split(",", 1)
    return positive, negative
  return text


def checkpoint_bm25_in_input(path: str) -> bool:
  """Whether a t5rank checkpoint was trained with the BM25 score in its input (metadata.json
  `bm25_in_input`); False for other formats."""
  from t5rank.checkpoints import native

  return native.is_native_checkpoint(path) and bool(
      native.read_metadata(path).get("bm25_in_input", False))


def checkpoint_vocabulary(path: str
                          ) -> tuple[Optional[Vocabulary], Optional[str | tuple[str, str]]]:
  """(vocabulary, target words) a native checkpoint names in its metadata.json, else None: keys
  `vocabulary` (a SentencePiece file relative to the checkpoint, as the trainer copies it there)
  with `vocabulary_extra_ids` (T5's 100 when absent), and `target_words` (a name or a pair)."""
  from t5rank.checkpoints import native
  from t5rank.vocab import load_vocabulary

  if not native.is_native_checkpoint(path):
    return None, None
  metadata = native.read_metadata(path)
  vocabulary, targets = metadata.get("vocabulary"), metadata.get("target_words")
  if vocabulary is not None:
    vocabulary = load_vocabulary(os.path.join(path, vocabulary),
                                 metadata.get("vocabulary_extra_ids"))
  return vocabulary, (tuple(targets) if isinstance(targets, list) else targets)


def load_reranker(checkpoint: str, *, config_name: Optional[str] = None,
                  vocab_path: Optional[str] = None, targets: Optional[str | tuple[str, str]] = None,
                  dtype: Optional[str] = None) -> tuple[T5Config, dict, Vocabulary, tuple[int, int]]:
  """(config, params, vocabulary, target ids) for scoring with `checkpoint` (any format), as
  `t5rank score` resolves them: `config_name` for formats without a config; vocabulary (a name of
  `t5rank.vocab.VOCABULARIES` or a path) and target words as given, else from a t5rank
  checkpoint's metadata.json, else T5's and true_false. A vocabulary with more ids than the model
  has embedding rows is refused."""
  from t5rank.checkpoints import load_checkpoint
  from t5rank.config import get_config
  from t5rank.vocab import load_vocabulary, resolve_target_words

  config, params = load_checkpoint(checkpoint, get_config(config_name) if config_name else None)
  if dtype:
    config = config.replace(dtype=dtype)
  stored_vocab, stored_targets = checkpoint_vocabulary(checkpoint)
  vocab = load_vocabulary(vocab_path) if vocab_path else stored_vocab or load_vocabulary()
  if vocab.vocab_size > config.vocab_size:
    raise ValueError(f"vocabulary {vocab.path} has {vocab.vocab_size} ids but the model in "
                     f"{checkpoint} only {config.vocab_size} embedding rows; give the vocabulary "
                     "it was trained with (--vocab)")
  target_ids = resolve_target_words(vocab, targets or stored_targets or "true_false")
  return config, params, vocab, target_ids


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("score", help="rerank a candidate run with a monoT5 checkpoint",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--checkpoint", required=True, help="checkpoint in any format t5rank loads")
  p.add_argument("--config", help="model config name (see t5rank.config), for checkpoints without "
                 "one (Mesh TF, t5x)")
  p.add_argument("--queries", required=True, help="queries: TSV qid<TAB>text, or JSONL")
  p.add_argument("--corpus", required=True, help="corpus: JSONL (id, text, title) or TSV")
  p.add_argument("--run", required=True, help="candidates: TREC run, or qid docid lines")
  p.add_argument("--output", required=True, help="the reranked TREC run to write")
  p.add_argument("--passages", choices=AGGREGATIONS, default="maxp",
                 help="how window scores make a document score (default: maxp)")
  p.add_argument("--window", type=int, default=DOCUMENT_WINDOW,
                 help=f"sentences per window, 0 for whole documents (default: {DOCUMENT_WINDOW})")
  p.add_argument("--stride", type=int, default=DOCUMENT_STRIDE,
                 help=f"sentences between window starts (default: {DOCUMENT_STRIDE})")
  p.add_argument("--language", default="en", help="language code for the sentence splitter")
  p.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH, help="input tokens, at most")
  p.add_argument("--batch-tokens", type=int,
                 help="padded tokens per batch, over all local devices (default: 2048 per CPU "
                 "device, 16384 per device on GPU/TPU)")
  p.add_argument("--cpu-devices", type=int,
                 help="on a CPU: the devices each batch is split over, each computing its share on "
                 "its own (default: one per core this process may use; 1 gives one device using all "
                 "cores). No effect on GPU/TPU")
  p.add_argument("--shard-size", type=int, default=ScoringOptions.shard_size,
                 help="passages per output shard (the unit of resumption)")
  p.add_argument("--per-passage-output", help="also write qid docid window log_p p winner lines")
  p.add_argument("--skip-missing", action="store_true",
                 help="skip candidates whose query or document is unknown (and report them)")
  p.add_argument("--tag", default=ScoringOptions.tag, help="run tag (last column)")
  p.add_argument("--vocab", help="vocabulary: a name (t5, insuranceqa_en_8k) or a SentencePiece "
                 "model (default: the one the checkpoint's metadata.json names, else T5's)")
  p.add_argument("--targets", help="target words: a name such as true_false, or positive,negative "
                 "(default: the checkpoint's metadata.json `target_words`, else true_false)")
  p.add_argument("--bm25-in-input", action=argparse.BooleanOptionalAction, default=None,
                 help="write each candidate's score from --run (a BM25 run) into the input, "
                 "`Query: q BM25: 12 Document: d Relevant:` (default: as the checkpoint's "
                 "metadata.json says; see t5rank.bm25_input)")
  p.add_argument("--dtype", choices=("float32", "bfloat16"), help="activation dtype override")
  p.add_argument("--distributed", action="store_true",
                 help="call jax.distributed.initialize() first (one process per host)")
  p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
  import jax

  from t5rank.readers import InputFormatError, read_corpus, read_queries, read_run

  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  logging.getLogger("t5rank").setLevel(logging.INFO)
  if args.cpu_devices is not None and args.cpu_devices < 1:
    raise SystemExit(f"t5rank score: --cpu-devices must be >= 1, got {args.cpu_devices}")
  use_cpu_devices(args.cpu_devices)
  if args.distributed:
    jax.distributed.initialize()
  try:  # bad input fails before the checkpoint is loaded
    queries, corpus = read_queries(args.queries), read_corpus(args.corpus)
    candidates = check_candidates(read_run(args.run), queries, corpus,
                                  skip_missing=args.skip_missing, sources=(args.queries, args.corpus))
    bm25_in_input = args.bm25_in_input
    if bm25_in_input is None:
      bm25_in_input = checkpoint_bm25_in_input(args.checkpoint)
    if bm25_in_input:
      first_stage_scores(candidates)
  except (InputFormatError, MissingIdsError, ValueError) as e:
    raise SystemExit(f"t5rank score: {e}") from None
  config, params, vocab, target_ids = load_reranker(
      args.checkpoint, config_name=args.config, vocab_path=args.vocab,
      targets=parse_targets(args.targets) if args.targets else None, dtype=args.dtype)
  options = ScoringOptions(
      aggregation=args.passages, window=args.window, stride=args.stride, language=args.language,
      max_length=args.max_length, batch_tokens=args.batch_tokens, shard_size=args.shard_size,
      skip_missing=args.skip_missing, tag=args.tag, bm25_in_input=bm25_in_input)
  try:
    reranked = score_candidates(
        params, config=config, vocab=vocab, target_ids=target_ids,
        queries=queries, corpus=corpus, candidates=candidates, output=args.output, options=options,
        per_passage_output=args.per_passage_output, model_id=os.path.abspath(args.checkpoint),
        sources=(args.queries, args.corpus))
  except KeyboardInterrupt:
    print(f"\ninterrupted: finished shards are kept in {args.output}.shards; run the same command "
          "again to continue", file=sys.stderr)
    return 130
  if jax.process_index() == 0:
    documents = sum(map(len, reranked.values()))
    print(f"wrote {documents} documents for {len(reranked)} queries to {args.output}")
  return 0
