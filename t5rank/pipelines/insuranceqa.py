"""The single-model job (`t5rank demo --monot5-only`): InsuranceQA v2 end to end -- BM25,
fine-tuning, monoT5 reranking, their hybrid, evaluation.

It runs on either pools of `t5rank.pipelines.insuranceqa_pools` (`Job`): `ENGLISH`, the paper's setting, and
`CROSS_LINGUAL`, the XPR construction of the same pools (Chen et al. 2020: each query English or
Chinese, half of each pool translated; `t5rank.data.xpr`) reranked by a bilingual tiny monoT5
pre-trained on InsuranceQA's and Tatoeba's English and Chinese text, and by the bilingual dual
encoder, XPI then mixed (`t5rank demo --monot5-only --cross-lingual`). Its models are trained,
reused or resumed by `t5rank.pipelines.training_runs`.

    test split ─► BM25 over each query's answer pool (k1 0.9, b 0.4; the job's analyzer), top DEPTH
       (by default 1000, i.e. the whole pool of ~200 answers)
    ─► pre-training (jobs that have one): WORKDIR/pretrain, as the model below
    ─► model: WORKDIR/model/final when it was trained by the same gin recipe, else `t5rank train`'s
       code path with MODEL_DIR = WORKDIR/model (resumes an interrupted run); after a pre-training
       its INIT_CHECKPOINT is WORKDIR/pretrain/final
    ─► a one-stage cascade (`t5rank.pipelines.cascade.rerank_stage`, `t5rank score`'s
       `score_candidates`) on the BM25 top DEPTH (whole answers, no windows)
    ─► hybrid: BM25 and monoT5 scores interpolated (`t5rank fuse`), the weight chosen on the first
       TUNE_QUERIES validation queries (their BM25 top DEPTH, scored the same way)
    ─► dual encoder (jobs that have one): XPI's sentence pairs (WORKDIR/dense_pretrain), then the
       mixed strategy's pairs from its best checkpoint (WORKDIR/dense), each reused like the model;
       the best checkpoint's cosines rank the same BM25 top DEPTH
    ─► BM25 vs BM25+monoT5 vs hybrid (vs BM25+dual encoder): the job's metrics (English: MRR,
       MRR@10, P@1, nDCG@10, MAP; cross-lingual: P@1 (= acc@1), acc@10, MRR, MAP, and each run's
       breakdown by query and answer language), paired t-tests against BM25 (Bonferroni over the
       others) ─► table, JSON, PNG

The work directory holds:
    data/          queries.tsv, corpus.jsonl, qrels.txt, pool.run (`export_insuranceqa`; for the
                   cross-lingual job `export_xpr`, with xpr.json: each query's language)
    data_valid/    the same for the validation split (for the hybrid's weight)
    index/         the BM25 index, reused while the corpus and the BM25 settings are the same
    pretrain/      the pre-training run, as model/ (cross-lingual job)
    dense_pretrain/, dense/    the dual encoder's two training runs (cross-lingual job)
    model/         the training run (checkpoints/, final/, recipe.json: the gin recipe and its hash)
    qrels.txt      the judgments of the queries evaluated (all 2,000, or the first --queries)
    bm25.run       BM25's top DEPTH of each query's pool
    cascade/       monoT5's reranking of the same candidates, a one-stage cascade
                   (`t5rank.pipelines.cascade`): 01_monot5.run (score: log P(true)) and its stamp
    hybrid.run     the same candidates by interpolated score (weight in results.json)
    dense.run      the same candidates by the dual encoder's cosine (cross-lingual job)
    valid_bm25.run, valid_cascade/01_monot5.run   the validation queries' runs the weight was
                   tuned on
    results.json   settings, stage timings, the evaluation report (`t5rank.evaluation.metrics.evaluate`)
    results.png    bar chart of the systems with the p-values
All runs hold the same DEPTH candidates per query, so the comparison is between orderings.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from typing import Any, Optional, Sequence

from t5rank.data.readers import Run
from t5rank.files import atomic_write, read_json
from t5rank.models.reranker import Reranker
from t5rank.pipelines.insuranceqa_pools import (BM25_B, BM25_K1, ENGLISH, TUNE_QUERIES,
                                                InsuranceQARecord, Job, bm25_stage, export_stage,
                                                language_report)
from t5rank.pipelines.stages import Stage, finite, run_stages
from t5rank.pipelines.training_runs import RECIPE_FILE, best_checkpoint, prepare_model

# BM25 ranks each query's whole pool (its relevant answers and ~200 retrieved negatives, the
# candidate set InsuranceQA defines) and monoT5 reranks all of it; with a depth of 100, a quarter of
# the test queries keep no relevant answer at all.
DEFAULT_DEPTH = 1000
SYSTEMS = ("BM25", "BM25+monoT5", "BM25+monoT5 hybrid")
DENSE_SYSTEM = "BM25+dual encoder"


@dataclasses.dataclass
class SingleModelRecord(InsuranceQARecord):
  """What the single-model job's stages share besides the export and BM25: the fine-tuning's
  `gin_bindings` and whether it is redone (`retrain_model`), the pre-training (`pretrained`, what
  results.json says of it); monoT5's `checkpoint`, whether it was `trained` now, the model itself
  (`monot5_model`: reranker, parameters) and its recipe's hash; the runs `monot5`, `hybrid` and,
  with a dual encoder, `dense` (its two stages' checkpoints and whether each was trained now); the
  evaluation `report`."""
  gin_bindings: list[str] = dataclasses.field(default_factory=list)
  retrain_model: bool = False
  pretrained: Optional[dict] = None
  checkpoint: str = ""
  trained: bool = False
  monot5_model: Optional[tuple[Reranker, Any]] = None
  recipe_sha256: str = ""
  monot5: Run = dataclasses.field(default_factory=dict)
  hybrid: Run = dataclasses.field(default_factory=dict)
  dense_first: str = ""
  dense_first_trained: bool = False
  dense_checkpoint: str = ""
  dense_trained: bool = False
  dense: Optional[Run] = None
  report: dict = dataclasses.field(default_factory=dict)


def _rerank(checkpoint: str, queries, corpus, first, first_path: str, workdir: str,
            progress: bool):
  """(monoT5's run over BM25's run `first` (its file `first_path`), whether it was reused): a
  one-stage cascade in `workdir` (`t5rank.pipelines.cascade.rerank_stage`: WORKDIR/01_monot5.run,
  reused while its stamp shows the same model on the same candidates, resumed from its shards)."""
  from t5rank.pipelines.cascade import CascadeRecord, Row, rerank_stage
  from t5rank.pipelines.cascade_spec import RerankStage, check_stages
  from t5rank.ranking.scorer import ScoringOptions

  os.makedirs(workdir, exist_ok=True)
  record = CascadeRecord(workdir, rows=[Row("bm25", first, first_path, {"name": "bm25"}, {},
                                            input=None)])
  [monot5] = check_stages([RerankStage(checkpoint, name="monot5")], "bm25")
  stage = rerank_stage(1, monot5, queries=queries, corpus=corpus,
                       options=ScoringOptions(window=0), progress=progress)
  stage.run(record)
  row = record.rows[-1]
  return row.run, bool(row.timing.get("reused"))


def dense_stages(job: Job, bindings: Sequence[str], retrain: bool) -> list[Stage]:
  """The dual encoder's stages: its first stage (`job.dense_pretrain_bindings`) in
  WORKDIR/dense_pretrain, then `job.dense_gin_file` from that stage's best checkpoint in
  WORKDIR/dense, each reused like the monoT5 model (`prepare_model`); the best checkpoint
  (validation in-batch P@1) encodes the corpus, and each query's candidates are ranked by their
  cosine to it (record.dense, record.results["dual_encoder"]). `bindings` go to both stages,
  after the job's."""
  first_bindings = [*job.dense_pretrain_bindings, *bindings]  # a later binding of a name wins

  def first_stage(record: SingleModelRecord) -> tuple[str, str]:
    first_dir = os.path.join(record.workdir, "dense_pretrain")
    _, record.dense_first_trained = prepare_model(first_dir, [job.dense_gin_file],
                                                     first_bindings, retrain=retrain)
    record.dense_first = best_checkpoint(first_dir)
    return ("dense pretrain" if record.dense_first_trained else "load dense pretrained",
            record.dense_first)

  def train(record: SingleModelRecord) -> tuple[str, str]:
    model_dir = os.path.join(record.workdir, "dense")
    _, record.dense_trained = prepare_model(
        model_dir, [job.dense_gin_file],
        [*bindings, f"INIT_CHECKPOINT = {record.dense_first!r}"],
        retrain=retrain or record.dense_first_trained)
    record.dense_checkpoint = best_checkpoint(model_dir)
    return ("dense train" if record.dense_trained else "load dense model",
            record.dense_checkpoint)

  def rank(record: SingleModelRecord) -> tuple[str, str]:
    from t5rank.checkpoints import native
    from t5rank.data.readers import write_run
    from t5rank.retrieval.dense import DenseRetriever

    checkpoint, path = record.dense_checkpoint, record.paths["dense.run"]
    retriever = DenseRetriever.build(record.corpus, encoder_path=checkpoint)  # seconds
    record.dense = retriever.retrieve(record.queries, candidates=record.bm25)
    write_run(path, record.dense, tag="dual_encoder")
    metadata, first = native.read_metadata(checkpoint), record.dense_first
    record.results["dual_encoder"] = {
        "checkpoint": checkpoint, "trained_now": record.dense_trained,
        "step": metadata.get("step"), "validation_p@1": metadata.get("eval/p@1"),
        "recipe_sha256": read_json(os.path.join(record.workdir, "dense",
                                                 RECIPE_FILE))["sha256"],
        "first_stage": {"checkpoint": first, "trained_now": record.dense_first_trained,
                        "step": native.read_metadata(first).get("step"),
                        "bindings": _effective(first_bindings)}}
    return "dense rank", path

  return [Stage(f"dual encoder, first stage: {job.dense_gin_file} with "
                f"{', '.join(_effective(first_bindings))}", first_stage),
          Stage(lambda r: f"dual encoder: {job.dense_gin_file} from {r.dense_first}", train),
          Stage(lambda r: f"dual encoder: encode {len(r.corpus)} answers, rank each query's "
                "candidates", rank)]


def _effective(bindings: Sequence[str]) -> list[str]:
  """The gin bindings that take effect: of two bindings of one name, the later."""
  last = {b.split("=", 1)[0].strip(): b for b in bindings}
  return list(last.values())


# ------------------------------------------------------------------------------------ the chart


def plot_comparison(report: dict, path: str, title: str) -> None:
  """A PNG bar chart of each run's mean per metric (`report` from `t5rank.evaluation.metrics.evaluate`),
  with the p-value of each compared run under the metric's name; written atomically (Agg)."""
  import numpy as np
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  from t5rank.evaluation.metrics import untested

  metrics, runs = report["metrics"], report["runs"]
  x = np.arange(len(metrics))
  width = 0.8 / len(runs)
  fig = Figure(figsize=(8, 4.5), dpi=120)
  FigureCanvasAgg(fig)
  ax = fig.add_subplot()
  for i, r in enumerate(runs):
    bars = ax.bar(x + (i - (len(runs) - 1) / 2) * width, [r["mean"][m] for m in metrics], width,
                  label=r["name"])
    ax.bar_label(bars, fmt="%.3f", fontsize=8)
  p_values = [[r["vs_baseline"][m]["p_bonferroni"] for r in runs[1:]] for m in metrics]
  labels = [m + "".join("\np=n/a" if untested(p) else f"\np={p:.2g}" for p in ps)
            for m, ps in zip(metrics, p_values)]
  ax.set_xticks(x, labels)
  ax.set_ylim(0, min(1.0, 1.3 * max(r["mean"][m] for r in runs for m in metrics) + 0.05))
  ax.set_title(title, fontsize=9)
  ax.legend(loc="upper left", ncols=len(runs), fontsize=9)
  fig.tight_layout()
  with atomic_write(path, "wb") as f:
    fig.savefig(f, format="png")


# ------------------------------------------------------------------------------------ the job


def run_insuranceqa(*, workdir: Optional[str] = None, depth: int = DEFAULT_DEPTH,
                    num_queries: Optional[int] = None,
                    gin_files: Optional[Sequence[str]] = None,
                    gin_bindings: Sequence[str] = (), retrain: bool = False,
                    tune_queries: int = TUNE_QUERIES, progress: bool = True, job: Job = ENGLISH,
                    pretrain_bindings: Sequence[str] = (),
                    dense_bindings: Sequence[str] = ()) -> dict:
  """Runs `job` (module docstring) in `workdir` (the job's own when None) on the first
  `num_queries` test queries (all 2,000 when None), reranking BM25's top `depth`; training uses
  `gin_files` (the job's when None) and `gin_bindings` (gin binding strings, MODEL_DIR excepted),
  the job's pre-training its gin file and `pretrain_bindings`, the job's dual encoder (if any)
  its gin file and `dense_bindings` (both of its stages). Returns what results.json holds."""
  if depth < 1 or tune_queries < 1 or (num_queries is not None and num_queries < 1):
    raise ValueError("depth and the numbers of queries must be positive, got "
                     f"{depth}, {num_queries}, {tune_queries}")
  workdir = workdir or job.workdir
  os.makedirs(workdir, exist_ok=True)
  record = SingleModelRecord(workdir)
  record.paths = {name: os.path.join(workdir, name)
                  for name in ("bm25.run", "valid_bm25.run", "hybrid.run", "dense.run",
                               "qrels.txt", "results.json", "results.png")}
  # monoT5's runs: one-stage cascades over BM25's (`_rerank`)
  record.paths["monot5.run"] = os.path.join(workdir, "cascade", "01_monot5.run")
  record.paths["valid_monot5.run"] = os.path.join(workdir, "valid_cascade", "01_monot5.run")
  record.gin_bindings = list(gin_bindings)
  record.retrain_model = retrain
  stages = [Stage(f"export: {job.name}", functools.partial(export_stage, job, num_queries)),
            Stage(f"BM25 (k1 {BM25_K1}, b {BM25_B}, analyzer {job.bm25_language}) over each "
                  f"query's answer pool, top {depth}", functools.partial(bm25_stage, job, depth))]
  if job.pretrain_gin_file:
    stages.append(Stage(f"pre-training: {job.pretrain_gin_file}",
                        functools.partial(_pretrain, job, pretrain_bindings, retrain)))
  stages += [Stage("model", functools.partial(_model, list(gin_files or [job.gin_file]))),
             Stage(lambda r: f"rerank: monoT5 on {r.candidates} ({r.pairs} pairs)",
                   functools.partial(_monot5, progress)),
             Stage(f"tune: the BM25/monoT5 interpolation weight on {tune_queries} validation "
                   "queries", functools.partial(_hybrid, job, depth, tune_queries, progress))]
  if job.dense_gin_file:
    stages += dense_stages(job, dense_bindings, retrain)
  stages.append(Stage("evaluate", functools.partial(_evaluate, job)))
  run_stages(stages, record)
  return _report(job, depth, record)


def _pretrain(job: Job, bindings: Sequence[str], retrain: bool,
              record: SingleModelRecord) -> tuple[str, str]:
  """The job's pre-training (WORKDIR/pretrain), which the fine-tuning then starts from."""
  from t5rank.checkpoints import native

  pretrain_dir = os.path.join(record.workdir, "pretrain")
  checkpoint, trained = prepare_model(pretrain_dir, [job.pretrain_gin_file], bindings,
                                      retrain=retrain)
  record.pretrained = {
      "checkpoint": checkpoint, "trained_now": trained,
      "step": native.read_metadata(checkpoint).get("step"),
      "recipe_sha256": read_json(os.path.join(pretrain_dir, RECIPE_FILE))["sha256"]}
  # a new pre-trained model makes the fine-tuned one stale even though its recipe reads the same
  record.gin_bindings = [*record.gin_bindings, f"INIT_CHECKPOINT = {checkpoint!r}"]
  record.retrain_model = retrain or trained
  return "pretrain" if trained else "load pretrained", checkpoint


def _model(gin_files: Sequence[str], record: SingleModelRecord) -> tuple[str, str]:
  """monoT5, trained by the recipe in WORKDIR/model or reused (`prepare_model`)."""
  from t5rank.models.loading import load_reranker

  model_dir = os.path.join(record.workdir, "model")
  checkpoint, trained = prepare_model(model_dir, gin_files, record.gin_bindings,
                                      retrain=record.retrain_model)
  record.checkpoint, record.trained = checkpoint, trained
  record.monot5_model = load_reranker(checkpoint)
  record.recipe_sha256 = read_json(os.path.join(model_dir, RECIPE_FILE))["sha256"]
  return "train" if trained else "load model", checkpoint


def _monot5(progress: bool, record: SingleModelRecord) -> tuple[str, str]:
  """monoT5's reranking of BM25's candidates (WORKDIR/cascade/01_monot5.run)."""
  start = time.perf_counter()
  paths = record.paths
  record.monot5, reused = _rerank(record.checkpoint, record.queries, record.corpus,
                                     record.bm25, paths["bm25.run"],
                                     os.path.dirname(paths["monot5.run"]), progress)
  if reused:
    return "reuse run", f"{paths['monot5.run']}, scored by the same model"
  return "rerank", (f"{record.pairs / max(time.perf_counter() - start, 1e-9):.1f} pairs/s, "
                    "compilation and tokenization included")


def _hybrid(job: Job, depth: int, tune_queries: int, progress: bool,
            record: SingleModelRecord) -> tuple[str, str]:
  """BM25 and monoT5 interpolated (WORKDIR/hybrid.run), the weight chosen on the first
  `tune_queries` validation queries' BM25 top `depth`, scored the same way."""
  from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run, write_run
  from t5rank.ranking import fusion

  paths = record.paths
  valid = job.export(os.path.join(record.workdir, "data_valid"), "validation")
  valid_queries = dict(list(read_queries(valid["queries.tsv"]).items())[:tune_queries])
  valid_qrels = {qid: docs for qid, docs in read_qrels(valid["qrels.txt"]).items()
                 if qid in valid_queries}
  valid_bm25 = record.retriever.retrieve(valid_queries, k=depth,
                                            candidates=read_run(valid["pool.run"]))
  write_run(paths["valid_bm25.run"], valid_bm25, tag="bm25")
  valid_monot5, _ = _rerank(record.checkpoint, valid_queries,
                            read_corpus(valid["corpus.jsonl"]), valid_bm25,
                            paths["valid_bm25.run"], os.path.dirname(paths["valid_monot5.run"]),
                            progress)
  weight, tuning = fusion.tune_weight(valid_qrels, valid_bm25, valid_monot5, metric="MRR")
  record.hybrid = fusion.interpolate(record.bm25, record.monot5, weight)
  write_run(paths["hybrid.run"], record.hybrid, tag="hybrid")
  record.results["hybrid"] = {
      "weight": weight, "normalization": "zscore",
      "tuned_on": f"the first {len(valid_queries)} validation queries, BM25 top {depth}",
      "validation_MRR": {f"{w:g}": v for w, v in tuning.items()}}
  return "tune", (f"w = {weight:g} (validation MRR {tuning[0.0]:.4f} at w = 0, "
                  f"{tuning[1.0]:.4f} at w = 1, {tuning[weight]:.4f} at w = {weight:g})")


def _evaluate(job: Job, record: SingleModelRecord) -> tuple[str, str]:
  """The job's metrics of every system, paired t-tests against BM25 (and, cross-lingual, each
  run's breakdown by query and answer language)."""
  from t5rank.evaluation import metrics as evaluation

  ranked = [record.bm25, record.monot5, record.hybrid]
  if record.dense is not None:
    ranked.append(record.dense)
  systems = dict(zip(SYSTEMS + ((DENSE_SYSTEM,) if job.dense_gin_file else ()), ranked))
  record.report = evaluation.evaluate(record.qrels, systems, job.metrics)
  print(evaluation.format_table(record.report), flush=True)
  if job.cross_lingual:
    record.results["languages"] = language_report(record.qrels, systems,
                                                   record.data["xpr.json"])
  return "evaluate", ""


def _report(job: Job, depth: int, record: SingleModelRecord) -> dict:
  """results.json and results.png (WORKDIR); returns the results."""
  from t5rank.checkpoints import native

  paths, checkpoint = record.paths, record.checkpoint
  reranker, _ = record.monot5_model
  config, metadata = reranker.config, native.read_metadata(checkpoint)
  pretrained = record.pretrained
  weight = record.results["hybrid"]["weight"]
  results = {
      "dataset": job.name,
      "queries": len(record.queries), "depth": depth, "candidates": record.candidates,
      "bm25": {"k1": BM25_K1, "b": BM25_B, "language": job.bm25_language},
      "model": {"checkpoint": checkpoint, "trained_now": record.trained,
                "step": metadata.get("step"), "recipe_sha256": record.recipe_sha256,
                "parameters": config.num_parameters, "max_length": reranker.max_length,
                "target_words": metadata.get("target_words"),
                "bm25_in_input": bool(metadata.get("bm25_in_input")), "pretrained": pretrained},
      "hybrid": record.results["hybrid"],
      "timings_s": record.timings, "evaluation": record.report,
      "files": {"bm25": paths["bm25.run"], "monot5": paths["monot5.run"],
                "hybrid": paths["hybrid.run"],
                "chart": paths["results.png"], "qrels": paths["qrels.txt"]},
  }
  if "languages" in record.results:
    results["languages"] = record.results["languages"]
    results["files"]["xpr"] = record.data["xpr.json"]
  dense = record.results.get("dual_encoder")
  if dense is not None:
    results["dual_encoder"] = dense
    results["files"]["dual_encoder"] = paths["dense.run"]
  plot_comparison(record.report, paths["results.png"],
                  f"{job.name},\n{len(record.queries)} queries: {record.candidates} (BM25) "
                  f"reranked by monoT5 ({config.num_parameters / 1e6:.1f}M, step "
                  f"{metadata.get('step')}"
                  f"{', BM25 score in its input' if metadata.get('bm25_in_input') else ''}"
                  f"{', pre-trained' if pretrained else ''}),\n"
                  f"BM25/monoT5 interpolated (w = {weight:g}, tuned on validation)"
                  f"{', by the dual encoder (XPI, mixed)' if dense else ''}; "
                  "p Bonferroni-corrected")
  with atomic_write(paths["results.json"]) as f:
    json.dump(finite(results), f, indent=1, allow_nan=False)
  print(f"wrote {paths['bm25.run']}, {paths['monot5.run']}, {paths['hybrid.run']}, "
        f"{paths['dense.run'] + ', ' if dense else ''}"
        f"{paths['results.json']}, {paths['results.png']}; total {record.timings['total']:.1f} s",
        flush=True)
  return finite(results)
