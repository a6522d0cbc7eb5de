"""The models shipped inside the package (t5rank/shipped/NAME, `t5rank.checkpoints.shipped`): each
one's recipe is still the one in the repository's gin files (a changed recipe fails here until the
model is retrained and shipped again with scripts/ship_model.py), and each one still gives the
scores it gave when it was shipped, on the few test pairs stored beside it (slice.json)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from t5rank import cli
from t5rank.checkpoints import shipped
from t5rank.data import teacher as teacher_data
from t5rank.training import gin_config

NAMES = shipped.names()


def test_the_demo_models_are_shipped():
  assert {"monot5", "rankt5", "duot5", "tk", "dual_encoder"} <= set(NAMES)  # the English cascade's
  assert {"xpr_pretrained", "xpr_monot5", "xpr_dual_encoder_xpi", "xpr_dual_encoder"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_shipped_models_recipe_is_the_repositorys(name):
  recipe = shipped.read_recipe(name)
  init = shipped.read_recipe(recipe["init"])["sha256"] if recipe["init"] else None
  now = gin_config.model_recipe(recipe["gin_files"], recipe["bindings"], init_sha256=init,
                                teacher_sha256=recipe.get("teacher_sha256"))
  assert now["gin_sha256"] == recipe["gin_sha256"], (
      f"the gin recipe of shipped:{name} changed since it was shipped: retrain it "
      f"({recipe['command']}) and ship it again (scripts/ship_model.py)")
  assert now == {k: recipe[k] for k in now}  # the data's version and the starting model too
  if "teacher" in recipe:  # a distilled model: its teacher is what it was, of today's models
    assert teacher_data.teacher_recipe_sha256(recipe["teacher"]) == recipe["teacher_sha256"]
    assert not shipped.stale_teacher_members(recipe), (
        f"shipped:{name} was distilled from {shipped.stale_teacher_members(recipe)} as they were "
        "then: make its teacher scores again, retrain and ship it")


def test_a_distilled_models_teacher_is_stale_when_a_shipped_member_was_retrained():
  tk = shipped.read_recipe("tk")["sha256"]
  teacher = {"fusion": [{"checkpoint": "bm25", "k1": 0.9, "b": 0.4},
                        {"checkpoint": "shipped:tk", "model": "tk", "recipe_sha256": tk},
                        {"checkpoint": "runs/mine", "model": "monot5", "recipe_sha256": "x"}]}
  assert shipped.stale_teacher_members({"teacher": {"teacher": teacher}}) == []
  teacher["fusion"][1]["recipe_sha256"] = "the recipe of an earlier shipped:tk"
  assert shipped.stale_teacher_members({"teacher": {"teacher": teacher}}) == ["shipped:tk"]
  single = {"checkpoint": "shipped:monot5", "model": "monot5", "recipe_sha256": "old"}
  assert shipped.stale_teacher_members({"teacher": {"teacher": single}}) == ["shipped:monot5"]
  assert shipped.stale_teacher_members({}) == []  # not distilled


@pytest.mark.parametrize("name", NAMES)
def test_a_shipped_model_scores_its_slice_as_when_it_was_shipped(name, tmp_path):
  with open(os.path.join(shipped.path(name), shipped.SLICE_FILE), encoding="utf-8") as f:
    data = json.load(f)
  (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in data["queries"].items()))
  (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": d, "text": t}) + "\n"
                                            for d, t in data["corpus"].items()))
  (tmp_path / "bm25.run").write_text("".join(
      f"{q} Q0 {d} {r} {s!r} bm25\n" for q, docs in data["candidates"].items()
      for r, (d, s) in enumerate(docs, 1)))
  assert cli.main(["score", "--checkpoint", f"shipped:{name}", "--queries", str(tmp_path / "q.tsv"),
                   "--corpus", str(tmp_path / "c.jsonl"), "--run", str(tmp_path / "bm25.run"),
                   "--window", "0", "-o", str(tmp_path / "out.run")]) == 0
  got = {}
  for line in (tmp_path / "out.run").read_text().splitlines():
    q, _, d, _, s, _ = line.split()
    got[(q, d)] = float(s)
  expected = {(q, d): s for q, docs in data["scores"].items() for d, s in docs}
  assert got.keys() == expected.keys() and len(got) >= 9
  keys = sorted(expected)
  np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], atol=1e-4)


def test_an_unknown_shipped_name_is_refused_with_the_names(tmp_path):
  with pytest.raises(ValueError, match="no such shipped model.*shipped:monot5"):
    shipped.resolve("shipped:monot6")
  assert shipped.resolve("runs/x/final") == "runs/x/final"
  (tmp_path / "c.jsonl").write_text('{"id": "d1", "text": "car insurance"}\n')
  with pytest.raises(SystemExit, match="no such shipped model"):  # t5rank index says so too
    cli.main(["index", "--encoder", "shipped:monot6", "--corpus", str(tmp_path / "c.jsonl"),
              "-o", str(tmp_path / "index")])
  assert not (tmp_path / "index").exists()


def test_the_shipped_fusion_weights_were_tuned_with_the_shipped_models():
  """t5rank/shipped/insuranceqa_cascade_weights.json (scripts/ship_fusion_weights.py): the demo's
  cascade at its depths and validation queries, each model by today's recipe, each fusion row's
  members by the parameters they have today (a model shipped again fails here until the weights
  are tuned and shipped again)."""
  from t5rank.models.loading import load_reranker
  from t5rank.files import sha256_file
  from t5rank.pipelines.insuranceqa_catalogue import ENGLISH_CASCADE
  from t5rank.ranking.scorer import params_fingerprint

  job = ENGLISH_CASCADE
  with open(os.path.join(shipped.DIRECTORY, job.weights_file), encoding="utf-8") as f:
    weights = json.load(f)
  names = [model for _, model in job.rerankers]
  assert weights["job"] == job.key and weights["cascade"] == [list(p) for p in job.rerankers]
  assert weights["depths"] == list(job.depths) and weights["tune_queries"] == job.tune_queries
  assert weights["recipes"] == {n: shipped.read_recipe(n)["sha256"] for n in names}
  assert weights["manifests"] == {n: sha256_file(os.path.join(shipped.path(n), "manifest.json"))
                                  for n in names}
  fingerprints = {n: params_fingerprint(load_reranker(shipped.path(n))[1]) for n in names}
  rows = weights["fusion"]["weights"]
  assert list(rows) == [f"{row}+fusion" for row, _ in job.rerankers]
  for row, entry in rows.items():
    assert abs(sum(entry["weights"]) - 1) < 1e-9, row
    for member in entry["members"][1:]:  # the first is BM25's run
      assert member["params_sha256"] == fingerprints[member["name"]], (
          f"{row}: shipped:{member['name']} is not the model its weights were tuned with: run "
          f"{weights['command']!r} again and ship its weights (scripts/ship_fusion_weights.py)")
