"""The cascade: a first stage, then rerankers, each over the top of the stage before it.

    queries ─► first stage: BM25 over the corpus | a given run | a dense index (top N)
            ─► reranker 1 over its top K1 (e.g. TK over the pool) ─► reranker 2 over the top K2
            (monoT5, 100) ─► ... ─► duoT5 over the top K3 (10: K3(K3−1) ordered pairs)

Each reranker stage is `t5rank score` on the run of the stage before (`--depth K`: its top K
reranked, the rest kept below in that run's order), written to WORKDIR/NN_NAME.run with a stamp
(NN_NAME.run.json: the scorer's own key, `scoring_key`: the checkpoint's weights and every setting
it is scored with, its metadata's or t5rank.json's included; the depth, the input run's and the
texts' hashes; the run's own size and hash); a stage whose run matches its stamp is reused, an
interrupted one resumes from its shards (NN_NAME.run.shards), so the same command run again
continues where it stopped. One cascade at a time writes a work directory: a second one there is
refused at once, naming the first's pid (`t5rank.files.writer_lock`). A model that reads each
candidate's BM25 score in its input gets the first stage's score, not the stage before's. With
qrels, every stage's run (each prefix of the cascade) is evaluated: the metrics, a paired t-test
against the first stage and against the ranking the stage reranked (Bonferroni over all those
comparisons), and each stage's time and pairs/s.

A stage may be fused with the stages before it (`fuse`): over the candidates it reranked (its top
DEPTH), Σ_j w_j · zscore(run_j) of the first stage's run and every reranker's own run up to it
(`t5rank fuse`'s code, `t5rank.ranking.fusion`; each run's z-scores over the candidates its own
stage scored, so weight 0 for the new stage gives the ranking it reranked), the rest kept below;
the fused ranking (NN_NAME+fusion.run, a row of its own in the table) is what the next stage
reranks. The weights are tuned on the cascade's own judged queries (`tune_fusion`: every weighting
in steps of .05, best MRR; run it on validation queries) or taken from an earlier cascade's
results.json (`fusion_weights`: the weights tuned on validation, applied unchanged to test
queries).

This module runs the stages and their fusion (`run_cascade`); the stages as given and checked
before any work are `t5rank.pipelines.cascade_spec`'s, the evaluation is
`t5rank.evaluation.cascade`'s, the table and the chart `t5rank.pipelines.cascade_report`'s.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Mapping, Optional, Sequence

from t5rank.data.readers import Document, Run, document_text, read_run, write_run
from t5rank.evaluation.cascade import METRICS, evaluate_stages
from t5rank.files import atomic_write, sha256_file, writer_lock
from t5rank.models.loading import load_reranker
from t5rank.pipelines.cascade_report import format_report
from t5rank.pipelines.cascade_spec import CheckedStage, FusionSource, RerankStage, check_stages
from t5rank.reuse import cached
from t5rank.pipelines.stages import Record, Stage, finite, run_stages
from t5rank.ranking import fusion
from t5rank.ranking.candidates import append_below, split_at_depth
from t5rank.ranking.jobs import job_class
from t5rank.ranking.scorer import (RUN_OPTIONS, ScoringOptions, params_fingerprint,
                                   score_candidates, scoring_key)

CASCADE_FILE = "cascade.json"  # what the work directory is: the command's own, recognisably


@dataclasses.dataclass(frozen=True)
class Row:
  """One row of a cascade (`CascadeRecord.rows`, first stage first): a stage's own ranking,
  or its fusion with the stages before it (`fused`). `entry` is what results.json's "stages"
  holds of it, `timing` what its "timings" holds (seconds, pairs, pairs/s or reused); `input` is
  the index of the row whose ranking its stage reranked (None for the first stage)."""
  name: str
  run: Run
  path: str
  entry: dict
  timing: dict
  input: Optional[int]
  fused: bool = False


@dataclasses.dataclass
class CascadeRecord(Record):
  """What a cascade's stages share: its `rows` so far, the weights of each fusion row (`fusion`,
  by its name: results.json's "fusion") and each stage's z-scores (`zscores`, by its row's name:
  `zscore_table`, for the fusions after it)."""
  rows: list[Row] = dataclasses.field(default_factory=list)
  fusion: dict[str, dict] = dataclasses.field(default_factory=dict)
  zscores: dict[str, dict] = dataclasses.field(default_factory=dict)


def texts_fingerprint(queries: Mapping[str, str], corpus: Mapping[str, Document],
                      candidates: Run) -> str:
  """A hash of the texts a stage reads: each query's of `candidates` and each candidate
  document's."""
  import hashlib

  h = hashlib.sha256()
  entries: dict[str, bytes] = {}  # a document is in many queries' candidates: encoded once
  room = TEXTS_MEMO_BYTES
  for qid, docs in candidates.items():
    h.update(json.dumps([qid, queries.get(qid)]).encode())
    for docid, _ in docs:
      entry = entries.get(docid)
      if entry is None:
        entry = json.dumps([docid, document_text(corpus[docid]) if docid in corpus
                            else None]).encode()
        if len(entry) <= room:
          entries[docid], room = entry, room - len(entry)
      h.update(entry)
  return h.hexdigest()


TEXTS_MEMO_BYTES = 1 << 28  # texts_fingerprint keeps at most this much of encoded documents


def rerank_stage(index: int, stage: CheckedStage, *, queries: Mapping[str, str],
                 corpus: Mapping[str, Document], options: ScoringOptions,
                 dtype: Optional[str] = None, progress: bool = True,
                 fusion_source: Optional[FusionSource] = None,
                 overwrite: bool = False) -> Stage:
  """The `Stage` of reranker `stage` (as `check_stages` checked it), the `index`-th of the cascade (module
  docstring); `dtype` casts the stage's parameters (`t5rank score --dtype`; the families without
  one refuse it); `fusion_source` gives the weights of a stage that fuses; `overwrite` scores it
  again even when its run could be reused."""
  spec, name = stage.spec, stage.name

  def run(record: CascadeRecord) -> tuple[str, str]:
    rows = record.rows
    reranker, params = load_reranker(stage.checkpoint, options={"dtype": dtype})
    path = os.path.join(record.workdir, f"{index:02d}_{name}.run")
    model_id = os.path.abspath(stage.checkpoint.path)
    params_sha256 = params_fingerprint(params)  # once: the stamp's and the scorer's
    top, _ = split_at_depth(rows[-1].run, spec.depth)  # what this stage reranks
    scored = dataclasses.replace(options, depth=spec.depth, tag=name)
    # A model that reads each candidate's BM25 score in its input: the first stage's score, not
    # the stage before's (a TK score or a fusion)
    first_stage_run = rows[0].run if reranker.reads_first_stage and len(rows) > 1 else None
    stamp = {"scoring": scoring_key(reranker, params, scored, model_id=model_id,
                                    params_sha256=params_sha256),
             "depth": spec.depth, "input_sha256": sha256_file(rows[-1].path),
             "texts_sha256": texts_fingerprint(queries, corpus, top),
             "run": {k: v for k, v in dataclasses.asdict(options).items() if k in RUN_OPTIONS},
             "first_stage_sha256": sha256_file(rows[0].path) if reranker.reads_first_stage
             else None}  # its input holds the first stage's scores too
    k = [len(docs) for docs in top.values()]
    pairs = sum(map(job_class(reranker).num_inputs, k))
    start = time.perf_counter()
    info = {"name": name, "pairs": pairs}
    if reranker.reads_first_stage and rows[0].name == "dense":
      raise ValueError(f"stage {name!r} reads each candidate's BM25 score, but the first stage "
                       "is dense retrieval: start the cascade with BM25 (or its run)")

    def score() -> None:
      nonlocal ranked
      if overwrite and os.path.isdir(path + ".shards"):  # scored again from the start
        import shutil

        shutil.rmtree(path + ".shards")
      ranked = score_candidates(
          reranker, params, queries=queries, corpus=corpus, candidates=rows[-1].run,
          first_stage_run=first_stage_run, output=path, options=scored, model_id=model_id,
          params_sha256=params_sha256, replace_stale_shards=True, progress=progress)

    ranked = None
    if cached(path, stamp, score, what=f"stage {name}'s run", rebuild=overwrite):
      ranked, detail = read_run(path), f"{path}: reused (the same model on the same input)"
      info.update(seconds=0.0, reused=True)
    else:
      seconds = time.perf_counter() - start
      detail = f"{pairs} pairs in {seconds:.1f} s ({pairs / max(seconds, 1e-9):.0f} pairs/s)"
      info.update(seconds=round(seconds, 1), pairs_per_second=round(pairs / max(seconds, 1e-9), 1))
    entry = {"name": name, "checkpoint": spec.checkpoint, "model": reranker.name,
             "depth": spec.depth, "params_sha256": params_sha256}
    rows.append(Row(name, ranked, path, entry, info, input=len(rows) - 1))
    if spec.fuse:
      detail += "; " + fuse_stage(record, index, name, spec.depth, fusion_source)
    return name, detail

  depth = f"the top {spec.depth}" if spec.depth else "all"
  return Stage(f"{spec.name or spec.checkpoint}: rerank {depth} of each query's candidates", run)


# how a fusion row's runs are normalized (results.json's "zscores": each run over the candidates
# its stage scored); weights tuned without it normalized every run over the fused top K alone, and
# are refused where that differs (a run that scored more than the top K)
SCORED_ZSCORES = "scored"


def fuse_stage(record: CascadeRecord, index: int, name: str, depth: Optional[int],
               source: Optional[FusionSource]) -> str:
  """Fuses the stage just run with the stages before it (module docstring): a row `NAME+fusion`
  appended to the record (its run WORKDIR/NN_NAME+fusion.run); returns a line for the log."""
  if source is None:
    raise ValueError(f"stage {name!r} fuses, but neither tuning judgments nor weights were given")
  start = time.perf_counter()
  row = f"{name}+fusion"
  rows = record.rows
  own_rows = [r for r in rows if not r.fused]
  own = [r.name for r in own_rows]
  members = [{k: r.entry.get(k) for k in ("name", "params_sha256", "depth")} for r in own_rows]
  for member in members[1:-1]:
    if member["depth"] is not None and (depth is None or member["depth"] < depth):
      raise ValueError(f"stage {name!r} fuses its top {depth or 'all'} with {member['name']!r}, "
                       f"which scored only its top {member['depth']}: the rest have no score of "
                       "it to fuse; give the fusing stage a depth within every earlier one's")
  top, rest = split_at_depth(rows[-2].run, depth)  # what this stage reranked, the rest
  scored_sets = [split_at_depth(r.run, member["depth"])[0]
                 for r, member in zip(own_rows, members)]
  for r, scored in zip(own_rows, scored_sets):  # each stage's z-scores, once per cascade
    if r.name not in record.zscores:
      record.zscores[r.name] = zscore_table(scored)
  runs = [scored_zscores(scored, top, record.zscores[r.name])
          for r, scored in zip(own_rows, scored_sets)]
  if source.weights is not None:
    given = source.weights.get(row)
    if not given or list(given.get("runs", ())) != own:
      raise ValueError(f"{source.described}: no weights for {row!r} over the runs {own} (it has "
                       f"{sorted(source.weights)}); tune them with the same stages")
    if "members" in given and given["members"] != members:
      raise ValueError(f"{source.described}: the weights of {row!r} were tuned for other models "
                       f"or depths ({given['members']}) than these ({members}); tune them with "
                       "the same stages")
    if given.get("zscores") != SCORED_ZSCORES and any(
        len(run[q]) != len(scored[q]) for run, scored in zip(runs, scored_sets) for q in top):
      raise ValueError(f"{source.described}: the weights of {row!r} were tuned by an earlier "
                       f"t5rank, whose fusion of a stage's top {depth} normalized every run over "
                       "those candidates alone (now each run over the candidates its stage "
                       "scored); tune them again")
    weights, values, how = list(given["weights"]), None, source.described
  else:
    weights, values = fusion.tune_weights(source.qrels, runs, metric="MRR", normalization="none")
    how = f"tuned on these {len(relevant(source.qrels, top))} judged queries (MRR)"
  fused = append_below(fusion.interpolate_runs(runs, weights, normalization="none"), rest)
  path = os.path.join(record.workdir, f"{index:02d}_{row}.run")
  write_run(path, fused, tag=row)
  entry = {"runs": own, "members": members, "weights": [float(w) for w in weights], "how": how,
           "zscores": SCORED_ZSCORES}
  if values is not None:
    entry["tuning_MRR"] = values[tuple(weights)]
  record.fusion[row] = entry
  seconds = time.perf_counter() - start
  rows.append(Row(row, fused, path, {"name": row, "fusion": entry},
                  {"name": row, "seconds": round(seconds, 1), "pairs": 0},
                  input=rows[-1].input, fused=True))  # its stage's input
  return (f"{row}: " + ", ".join(f"{w:g} {n}" for w, n in zip(weights, own)) + f" ({how})")


def zscore_table(scored: Run) -> dict[str, dict[str, float]]:
  """qid -> docid -> the z-score of a run's candidates over the candidates its stage scored
  (`scored`: its top depth), normalized in document id order, as `t5rank fuse` normalizes."""
  table = {}
  for qid, docs in scored.items():
    ranked = sorted(docs)  # by document id
    table[qid] = dict(zip([d for d, _ in ranked],
                          fusion.normalize([s for _, s in ranked]).tolist()))
  return table


def scored_zscores(scored: Run, top: Run,
                   table: Optional[Mapping[str, Mapping[str, float]]] = None) -> Run:
  """A run's z-scores over the candidates its stage scored (`scored`: its top depth;
  `zscore_table(scored)` when given as `table`), of the candidates of `top` (a later stage's top
  K, within them). Each run keeps the normalization it had in the fusions before, so a weighting
  that gives the new stage weight 0 is the fused ranking it reranked (normalized over the top K
  alone, no weighting would be)."""
  table = zscore_table({qid: scored[qid] for qid in top}) if table is None else table
  runs = {}
  for qid, docs in top.items():
    z = table[qid]
    if any(d not in z for d, _ in docs):
      raise ValueError(f"query {qid!r}: a candidate of the fused top {len(docs)} was not scored "
                       f"by a stage before it; give each stage a depth within every earlier "
                       "one's")
    runs[qid] = [(d, z[d]) for d, _ in docs]
  return runs


def relevant(qrels: Mapping[str, Mapping[str, int]], run: Run) -> set:
  """The queries of `run` with a relevant document in `qrels`."""
  return {q for q in run if any(v > 0 for v in qrels.get(q, {}).values())}


def run_cascade(*, queries: Mapping[str, str], corpus: Mapping[str, Document], first: Run,
                first_name: str, stages: Sequence[RerankStage | CheckedStage], workdir: str,
                qrels: Optional[Mapping[str, Mapping[str, int]]] = None,
                options: ScoringOptions = ScoringOptions(window=0), dtype: Optional[str] = None,
                first_seconds: float = 0.0, progress: bool = True,
                tune_fusion: bool = False, fusion_weights: Optional[FusionSource] = None,
                print_table: bool = True, metrics: Sequence[str] = METRICS,
                overwrite: bool = False) -> dict:
  """Runs the cascade (module docstring) from the first stage's run `first` (named `first_name`)
  through `stages` (as `check_stages` returns them; a `RerankStage` list is checked here) in
  `workdir`; returns what WORKDIR/results.json holds (the stages, their times, the fusion weights
  and, with `qrels`, the evaluation of every stage on `metrics`). A stage that fuses takes its
  weights from `fusion_weights`, or tunes them on `qrels` when `tune_fusion`. `overwrite` scores
  every stage again (no run is reused)."""
  if any((s.spec if isinstance(s, CheckedStage) else s).fuse
         for s in stages) == (not (tune_fusion or fusion_weights)):
    raise ValueError("a stage that fuses needs its weights: tune them on judged (validation) "
                     "queries or give those of an earlier cascade; without such a stage, neither")
  if tune_fusion and (fusion_weights or qrels is None):
    raise ValueError("tuning the fusion needs the judgments (qrels) and no given weights")
  source = fusion_weights or (FusionSource(qrels=qrels) if tune_fusion else None)
  if not all(isinstance(s, CheckedStage) for s in stages):
    stages = check_stages(stages, first_name)  # before the work directory is made
  os.makedirs(workdir, exist_ok=True)
  with writer_lock(workdir):  # one cascade at a time in a work directory
    first_path = os.path.join(workdir, f"00_{first_name}.run")
    write_run(first_path, first, tag=first_name)
    spec = {"first_stage": first_name, "stages": [dataclasses.asdict(s.spec) for s in stages]}
    with atomic_write(os.path.join(workdir, CASCADE_FILE)) as f:
      json.dump(spec, f, indent=1)
    pairs = sum(map(len, first.values()))
    record = CascadeRecord(workdir, rows=[Row(
        first_name, first, first_path, {"name": first_name},
        {"name": first_name, "seconds": round(first_seconds, 1), "pairs": pairs}, input=None)])
    run_stages([rerank_stage(i, s, queries=queries, corpus=corpus, options=options, dtype=dtype,
                             progress=progress, fusion_source=source, overwrite=overwrite)
                for i, s in enumerate(stages, 1)], record)
    rows = record.rows
    timings = [r.timing for r in rows]
    results = {"stages": [r.entry for r in rows], "timings": timings,
               "runs": {r.name: r.path for r in rows}, "fusion": record.fusion}
    if qrels is not None:
      report = evaluate_stages(qrels, [r.name for r in rows], [r.run for r in rows], metrics,
                               inputs=[r.input for r in rows])
      if print_table:
        print(format_report(report, timings), flush=True)
      results["evaluation"] = report
    with atomic_write(os.path.join(workdir, "results.json")) as f:
      json.dump(finite(results), f, indent=1, allow_nan=False)
    return results
