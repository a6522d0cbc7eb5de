"""Your own data, from a public model: gin/experiments/monot5_own_data.gin fine-tunes a checkpoint
named by its Hub id (from a cache in the Hub's layout, offline) on the generic task's files, takes
the architecture from the checkpoint (no model gin, no vocab_size binding) and evaluates during
training on the user's own validation queries."""

from __future__ import annotations

import json
import os

import pytest

from t5rank import cli
from t5rank.testing import make_hub_cache

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "hf_duot5")  # a tiny T5, T5's vocabulary
TEXTS = {f"d{i}": f"policy {'term ' * (i % 4)}life car rate number {i}" for i in range(12)}


def write_split(root, name: str, queries: dict[str, str]) -> None:
  (root / name).mkdir()
  (root / name / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
  qrels, run = [], []
  for k, q in enumerate(queries):
    relevant = f"d{(3 * k) % 12}"
    qrels.append(f"{q} 0 {relevant} 1\n")
    run.extend(f"{q} Q0 d{i} {r + 1} {12.0 - r} bm25\n" for r, i in enumerate(range(12)))
  (root / name / "qrels.txt").write_text("".join(qrels))
  (root / name / "bm25.run").write_text("".join(run))


def test_fine_tuning_a_hub_model_on_your_own_files(tmp_path, monkeypatch, capsys):
  make_hub_cache(str(tmp_path / "hub"), "castorini/monot5-tiny-test",
                 {n: os.path.join(GOLDEN, n) for n in ("config.json", "model.safetensors")})
  monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  (tmp_path / "corpus.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in TEXTS.items()))
  write_split(tmp_path, "train", {f"t{i}": f"life policy term {i}" for i in range(4)})
  write_split(tmp_path, "valid", {"v1": "car rate", "v2": "term life", "v3": "unjudged"})
  (tmp_path / "valid" / "qrels.txt").write_text("v1 0 d0 1\nv2 0 d3 1\n")  # v3: no judgment
  model_dir = tmp_path / "model"
  files = {name: str(tmp_path / split / f) for name, split, f in (
      ("TRAIN_QUERIES", "train", "queries.tsv"), ("TRAIN_QRELS", "train", "qrels.txt"),
      ("TRAIN_RUN", "train", "bm25.run"), ("VALID_QUERIES", "valid", "queries.tsv"),
      ("VALID_QRELS", "valid", "qrels.txt"), ("VALID_RUN", "valid", "bm25.run"))}
  argv = ["train", "--gin_file=gin/experiments/monot5_own_data.gin",
          f"--gin.MODEL_DIR={model_dir}", f"--gin.CORPUS={tmp_path / 'corpus.tsv'}",
          "--gin.INIT_CHECKPOINT='castorini/monot5-tiny-test'", "--gin.TRAIN_STEPS=2",
          "--gin.BATCH_SIZE=4", "--gin.EVAL_EVERY=2", "--gin.CHECKPOINT_EVERY=2",
          "--gin.TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 2}",
          "--gin.rerank_eval.RerankEval.max_length=32",
          *[f"--gin.{k}={v}" for k, v in files.items()]]
  assert cli.main(argv) == 0
  out = capsys.readouterr().out + capsys.readouterr().err
  assert "eval/mrr@10" in out
  config = json.loads((model_dir / "final" / "config.json").read_text())
  golden = json.loads(open(os.path.join(GOLDEN, "config.json")).read())
  assert (config["vocab_size"], config["d_model"]) == (golden["vocab_size"], golden["d_model"])


def test_the_evaluation_reads_your_validation_files(tmp_path):
  from t5rank.training.rerank_eval import RerankEval

  (tmp_path / "corpus.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in TEXTS.items()))
  write_split(tmp_path, "valid", {"v1": "car rate", "v2": "term life", "v3": "unjudged"})
  (tmp_path / "valid" / "qrels.txt").write_text("v1 0 d0 1\nv2 0 d3 1\n")
  evaluation = RerankEval(queries=str(tmp_path / "valid" / "queries.tsv"),
                          corpus=str(tmp_path / "corpus.tsv"),
                          qrels=str(tmp_path / "valid" / "qrels.txt"),
                          run=str(tmp_path / "valid" / "bm25.run"), depth=5, num_queries=10)
  assert sorted(evaluation.qrels) == ["v1", "v2"]  # v3 has no relevant document: left out
  assert len(evaluation.pairs) == 10 and evaluation.pairs[0] == ("v1", "d0")
  with pytest.raises(ValueError, match="missing corpus"):
    RerankEval(queries="q", qrels="x", run="r")
