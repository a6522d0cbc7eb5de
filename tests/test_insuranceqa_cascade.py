"""`t5rank demo`: the cascade BM25 → dual encoder → TK → monoT5 → RankT5 → duoT5 on InsuranceQA
with the shipped models, fusion weights tuned on validation queries and applied unchanged to the test
queries; what it writes is what `t5rank rerank` gives for the same stages; `--retrain` trains every
model by its recipe, duoT5 from the new monoT5."""

from __future__ import annotations

import json
import os

import pytest

from t5rank import cli
from t5rank.checkpoints import shipped
from t5rank.data.readers import read_run
from t5rank.pipelines import insuranceqa_cascade as job
from t5rank.pipelines import insuranceqa_provisioning as provisioning
from t5rank.pipelines.insuranceqa_catalogue import ENGLISH_CASCADE, MODELS, XPR_CASCADE, XPR_MODELS
from t5rank.training import gin_config

DEPTHS = (12, 12, 6, 4, 3)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("demo") / "iqa")
  results = job.run_insuranceqa_cascade(workdir=workdir, num_queries=3, depths=DEPTHS,
                                        tune_queries=5, progress=False)
  return workdir, results


def test_the_demo_runs_the_shipped_models_and_fuses_with_validation_weights(demo):
  workdir, results = demo
  assert {n: m["source"] for n, m in results["models"].items()} == {
      "dual_encoder": "shipped", "tk": "shipped", "monot5": "shipped", "rankt5": "shipped",
      "duot5": "shipped"}
  assert [r["name"] for r in results["evaluation"]["stages"]] == [
      "bm25", "dual_encoder", "dual_encoder+fusion", "tk", "tk+fusion", "monot5", "monot5+fusion",
      "rankt5", "rankt5+fusion", "duot5", "duot5+fusion"]
  assert results["queries"] == 3 and results["evaluation"]["queries"] == 3
  valid = json.loads(open(os.path.join(workdir, "valid_cascade", "results.json")).read())
  assert valid["evaluation"]["queries"] == 5
  for row, entry in results["fusion"]["weights"].items():
    assert entry["weights"] == valid["fusion"][row]["weights"]  # tuned there, applied here
    assert "tuning_MRR" in valid["fusion"][row] and "tuning_MRR" not in entry
  assert results["fusion"]["weights"]["duot5+fusion"]["runs"] == [
      "bm25", "dual_encoder", "tk", "monot5", "rankt5", "duot5"]
  assert os.path.getsize(os.path.join(workdir, "results.png")) > 10_000
  # every test query keeps its whole pool, reranked at each depth
  bm25 = read_run(os.path.join(workdir, "cascade", "00_bm25.run"))
  final = read_run(os.path.join(workdir, "cascade", "05_duot5+fusion.run"))
  assert {q: sorted(d for d, _ in docs) for q, docs in final.items()} == {
      q: sorted(d for d, _ in docs) for q, docs in bm25.items()}


def assert_t5rank_rerank_gives_the_demos_runs(workdir, cascade, depths, tmp_path):
  """`t5rank rerank` with the demo's stages (`cascade`: (row, shipped model) pairs) and its
  validation weights writes the runs the demo wrote."""
  data = os.path.join(workdir, "data")
  (tmp_path / "q.tsv").write_text("".join(
      line for line in open(os.path.join(data, "queries.tsv"), encoding="utf-8")
      if line.split("\t")[0] in read_run(os.path.join(workdir, "bm25.run"))), encoding="utf-8")
  argv = ["rerank", "--queries", str(tmp_path / "q.tsv"), "--corpus",
          os.path.join(data, "corpus.jsonl"), "--run", os.path.join(workdir, "bm25.run")]
  for (row, model), depth in zip(cascade, depths):
    argv += ["--stage", f"{row}=shipped:{model}@{depth}", "--fuse"]
  argv += ["--fusion-weights", os.path.join(workdir, "valid_cascade", "results.json"), "-o",
           str(tmp_path / "rerank")]
  assert cli.main(argv) == 0
  compared = [path for path in sorted(os.listdir(os.path.join(workdir, "cascade")))
              if path.endswith(".run") and not path.startswith("00_")]
  assert len(compared) == 2 * len(cascade)  # each reranker's run and its fusion's
  for path in compared:
    assert read_run(str(tmp_path / "rerank" / path)) == read_run(
        os.path.join(workdir, "cascade", path)), path


def test_the_demo_is_t5rank_rerank_with_the_shipped_models(demo, tmp_path):
  assert_t5rank_rerank_gives_the_demos_runs(demo[0], ENGLISH_CASCADE.rerankers, DEPTHS, tmp_path)


def test_the_same_command_again_reuses_every_stage(demo, capsys):
  workdir, results = demo
  again = job.run_insuranceqa_cascade(workdir=workdir, num_queries=3, depths=DEPTHS,
                                      tune_queries=5, progress=False)
  assert all(t.get("reused") for t in again["timings"][1:] if "+fusion" not in t["name"])
  assert again["evaluation"] == results["evaluation"]


def test_with_the_shipped_models_the_demo_reads_the_shipped_weights(tmp_path):
  workdir = str(tmp_path / "iqa")
  results = job.run_insuranceqa_cascade(workdir=workdir, num_queries=2, progress=False)
  with open(os.path.join(shipped.DIRECTORY, ENGLISH_CASCADE.weights_file)) as f:
    weights = json.load(f)
  assert results["fusion"]["shipped"].endswith(ENGLISH_CASCADE.weights_file)
  assert results["fusion"]["tune_queries"] == 1000
  assert {row: e["weights"] for row, e in results["fusion"]["weights"].items()} == {
      row: e["weights"] for row, e in weights["fusion"]["weights"].items()}
  assert results["fusion"]["validation"] == weights["validation"]
  assert not os.path.exists(os.path.join(workdir, "valid_cascade"))  # nothing tuned again


def test_the_shipped_weights_are_the_runs_only_with_its_models_depths_and_queries():
  cascade = ENGLISH_CASCADE
  models = {n: {"source": "shipped", "recipe_sha256": shipped.read_recipe(n)["sha256"]}
            for _, n in cascade.rerankers}

  def found(rerankers=cascade.rerankers, depths=cascade.depths, queries=1000, **changed):
    return provisioning.shipped_weights(cascade, rerankers, depths, queries,
                                        dict(models, **changed))

  assert found() is not None
  assert found(depths=(1000, 1000, 1000, 100, 10)) is None and found(queries=200) is None
  assert found(duot5=dict(models["duot5"], source="trained")) is None  # --retrain
  assert found(tk=dict(models["tk"], recipe_sha256="0" * 64)) is None  # another recipe
  distilled = [("tk_distilled", "tk_distilled") if row == "tk" else (row, m)
               for row, m in cascade.rerankers]
  assert found(rerankers=distilled, tk_distilled=models["tk"]) is None  # --distil
  assert provisioning.shipped_weights(XPR_CASCADE, XPR_CASCADE.rerankers, XPR_CASCADE.depths,
                                      200, {}) is None  # the cross-lingual cascade ships none


def test_shipped_weights_are_not_used_for_other_model_files_and_a_broken_file_is_said(
    tmp_path, monkeypatch):
  """A copy of the package's shipped directory, its models' manifests only: the weights apply
  while every manifest is the one they were tuned with; a changed one (a model shipped again),
  no file, another job's file: none; a broken file: an error that says so."""
  cascade = ENGLISH_CASCADE
  models = {n: {"source": "shipped", "recipe_sha256": shipped.read_recipe(n)["sha256"]}
            for _, n in cascade.rerankers}
  weights = (open(os.path.join(shipped.DIRECTORY, cascade.weights_file)).read())
  for _, name in cascade.rerankers:
    (tmp_path / name).mkdir()
    (tmp_path / name / "manifest.json").write_bytes(
        open(os.path.join(shipped.path(name), "manifest.json"), "rb").read())
  monkeypatch.setattr(shipped, "DIRECTORY", str(tmp_path))
  monkeypatch.setattr(shipped, "path", lambda name: os.path.join(str(tmp_path), name))
  found = lambda: provisioning.shipped_weights(cascade, cascade.rerankers, cascade.depths, 1000,
                                               models)
  assert found() is None  # no file
  (tmp_path / cascade.weights_file).write_text(weights)
  assert found() is not None
  (tmp_path / "tk" / "manifest.json").write_text("{}")  # TK shipped again
  assert found() is None
  (tmp_path / cascade.weights_file).write_text(json.dumps(dict(json.loads(weights), job="other")))
  assert found() is None
  (tmp_path / cascade.weights_file).write_text("{not json")
  with pytest.raises(ValueError, match="not JSON"):
    found()
  (tmp_path / cascade.weights_file).write_text(json.dumps({"job": cascade.key}))
  with pytest.raises(ValueError, match="holds no fusion weights"):
    found()


def test_ship_fusion_weights_takes_a_demos_tuned_weights_of_the_shipped_models(demo):
  from scripts.ship_fusion_weights import weights_entry

  workdir, results = demo
  entry = weights_entry(results, "t5rank demo ...")
  assert entry["depths"] == list(DEPTHS) and entry["tune_queries"] == 5
  assert entry["fusion"]["weights"] == results["fusion"]["weights"]
  assert entry["recipes"] == {n: shipped.read_recipe(n)["sha256"]
                              for _, n in ENGLISH_CASCADE.rerankers}
  trained = dict(results, models=dict(results["models"], tk=dict(results["models"]["tk"],
                                                                   source="trained")))
  with pytest.raises(ValueError, match=r"\['tk'\] were not the shipped models"):
    weights_entry(trained, "")
  with pytest.raises(ValueError, match="read from the shipped file"):
    weights_entry(dict(results, fusion=dict(results["fusion"], shipped="x.json")), "")


@pytest.fixture
def training(monkeypatch):
  """The (model, gin files, bindings, retrain) of each model the job would train; each is said to
  be trained to MODEL_DIR/final."""
  calls = []

  def prepare_model(model_dir, gin_files, bindings, *, retrain=False, extra=None):
    calls.append((os.path.basename(model_dir), gin_files, list(bindings), retrain))
    return os.path.join(model_dir, "final"), True

  monkeypatch.setattr(provisioning, "prepare_model", prepare_model)
  return calls


def test_retrain_trains_every_model_by_its_recipe_duot5_from_the_new_monot5(tmp_path, training):
  calls = training
  trained = {}
  for model in MODELS:
    provisioning.prepare(model, str(tmp_path), retrain=True, trained=trained)
  assert [c[0] for c in calls] == ["dual_encoder", "tk", "monot5", "rankt5", "duot5"]
  assert all(c[3] for c in calls)
  assert calls[4][2] == [f"INIT_CHECKPOINT = {os.path.join(str(tmp_path), 'monot5', 'final')!r}"]
  # a binding changes every recipe: nothing shipped fits, each is trained (no --retrain needed)
  calls.clear()
  trained = {}
  for model in MODELS:
    _, info = provisioning.prepare(model, str(tmp_path), bindings=["TRAIN_STEPS = 2"],
                                   trained=trained)
    assert info["source"] == "trained"
  # after the model's own (monoT5's 16,000 steps), so that the command line's wins
  init = f"INIT_CHECKPOINT = {os.path.join(str(tmp_path), 'monot5', 'final')!r}"
  assert [c[2] for c in calls] == [["TRAIN_STEPS = 2"], ["TRAIN_STEPS = 2"],
                                   ["TRAIN_STEPS = 16000", "TRAIN_STEPS = 2"],
                                   ["TRAIN_STEPS = 32000", "TRAIN_STEPS = 2"],
                                   ["TRAIN_STEPS = 2", init]]
  assert "TRAIN_STEPS = 2\n" in gin_config.recipe([calls[2][1][0]], calls[2][2])["gin"]
  # without either, the shipped models, whose recipes are the repository's
  trained = {}
  for model in MODELS:
    checkpoint, info = provisioning.prepare(model, str(tmp_path / "fresh"), trained=trained)
    assert info["source"] == "shipped" and checkpoint == shipped.path(model.name)
    assert info["recipe_sha256"] == shipped.read_recipe(model.name)["sha256"]


def test_each_demo_job_refuses_the_others_work_directory(demo, tmp_path):
  workdir, _ = demo
  with pytest.raises(SystemExit, match="holds files this command did not write"):
    cli.main(["demo", "--monot5-only", "--output", workdir])
  single = tmp_path / "single"
  (single / "model").mkdir(parents=True)
  (single / "model" / "recipe.json").write_text("{}")
  (single / "results.json").write_text("{}")
  with pytest.raises(SystemExit, match="holds files this command did not write"):
    cli.main(["demo", "--output", str(single)])


def test_a_model_trained_from_another_init_is_not_reused(tmp_path, monkeypatch):
  from t5rank.pipelines import training_runs
  from t5rank.training import gin_config

  model = next(m for m in MODELS if m.name == "duot5")  # from monoT5
  wanted = gin_config.recipe([model.gin_file], ["INIT_CHECKPOINT = '/m/final'"])
  model_dir = tmp_path / "duot5"
  model_dir.mkdir()
  (model_dir / "recipe.json").write_text(json.dumps({**wanted, "model_sha256": "old"}))
  trained = []
  monkeypatch.setattr(gin_config, "train_configured", lambda record: trained.append(record))
  training_runs.prepare_model(str(model_dir), [model.gin_file], ["INIT_CHECKPOINT = '/m/final'"],
                            extra={"model_sha256": "new"})
  assert trained and json.loads(trained[0]["recipe.json"])["model_sha256"] == "new"
  assert os.path.isdir(str(model_dir) + ".previous")  # the old run moved aside, not reused


def test_distil_puts_a_tk_distilled_from_the_fused_teacher_in_tks_place(tmp_path, monkeypatch):
  from t5rank.data.teacher import teacher_recipe_sha256
  from t5rank.training import gin_config

  calls = []

  def prepare_model(model_dir, gin_files, bindings, *, retrain=False, extra=None):
    calls.append((os.path.basename(model_dir), gin_files, list(bindings), extra, retrain))
    return shipped.path("tk"), True  # stands for the distilled TK: training is tested elsewhere

  monkeypatch.setattr(provisioning, "prepare_model", prepare_model)
  workdir = str(tmp_path / "iqa")
  run = lambda n=3: job.run_insuranceqa_cascade(workdir=workdir, num_queries=2, depths=DEPTHS,
                                                tune_queries=3, distil=True, teacher_queries=n,
                                                progress=False)
  results = run()
  teacher = json.loads(open(os.path.join(workdir, "teacher", "teacher.json")).read())
  assert teacher["split"] == "train" and teacher["queries"] == 3 and teacher["negatives"] == 20
  assert [m["checkpoint"] for m in teacher["teacher"]["fusion"]] == [
      "bm25", "shipped:tk", "shipped:monot5"]  # the shipped models, by their recipes' hashes
  assert teacher["teacher"]["weights"] == [0.05, 0.55, 0.4]
  (name, gin_files, bindings, extra, retrain), = calls
  assert name == "tk_distilled" and gin_files == ["gin/experiments/tk_distill_insuranceqa_cpu.gin"]
  assert retrain  # new teacher scores: a distilled TK in the work directory is not reused
  assert bindings == [f"TEACHER_SCORES = {os.path.join(workdir, 'teacher')!r}"]
  # its recipe hash covers the teacher, as a shipped distilled model's would
  assert extra == {"model_sha256": gin_config.model_recipe(
      gin_files, [], teacher_sha256=teacher_recipe_sha256(teacher))["sha256"]}
  assert [r["name"] for r in results["evaluation"]["stages"]] == [
      "bm25", "dual_encoder", "dual_encoder+fusion", "tk_distilled", "tk_distilled+fusion",
      "monot5", "monot5+fusion", "rankt5", "rankt5+fusion", "duot5", "duot5+fusion"]
  assert results["depths"] == {"dual_encoder": 12, "tk_distilled": 12, "monot5": 6, "rankt5": 4,
                               "duot5": 3}
  assert results["teacher"]["source"] == "made" and results["teacher"]["pairs"] == teacher["pairs"]
  # the same command again reuses the teacher's scores
  scores = os.path.join(workdir, "teacher", "scores.run")
  made = os.stat(scores).st_mtime_ns
  again = run()
  assert again["teacher"]["source"] == "reused" and os.stat(scores).st_mtime_ns == made
  assert again["evaluation"] == results["evaluation"] and calls[-1][4] is False
  # damaged scores, or another number of questions: made again, the old ones moved aside
  with open(scores, "a") as f:
    f.write("\n")
  assert run()["teacher"]["source"] == "made" and calls[-1][4] is True
  assert os.path.isdir(os.path.join(workdir, "teacher.previous"))
  assert run(4)["teacher"]["queries"] == 4
  assert json.loads(open(os.path.join(workdir, "teacher.previous", "teacher.json")).read())[
      "queries"] == 3


def test_the_teacher_is_made_again_when_a_member_is_retrained_in_place(tmp_path, monkeypatch):
  import shutil

  from t5rank.data import teacher as teacher_data
  from t5rank.pipelines import teacher as teacher_pipeline
  from t5rank.pipelines.insuranceqa_catalogue import CascadeJobRecord

  made, info = [], {"queries": 2, "pairs": 44}

  def build(directory, checkpoints, **kwargs):  # the scoring itself is tested in test_teacher.py
    made.append(checkpoints)
    os.makedirs(directory, exist_ok=True)
    return info

  monkeypatch.setattr(teacher_pipeline, "build_teacher_scores", build)
  monkeypatch.setattr(teacher_data, "read_teacher", lambda directory: info)
  monkeypatch.setattr(teacher_data, "teacher_recipe_sha256", lambda info: "the teacher's recipe")
  monot5_dir = tmp_path / "monot5"
  shutil.copytree(shipped.path("monot5"), monot5_dir)
  record = CascadeJobRecord(
      str(tmp_path), trained={"tk": ("tk recipe", shipped.path("tk"), False),
                              "monot5": ("monot5 recipe", str(monot5_dir), False)},
      models={"tk": {"source": "shipped", "checkpoint": shipped.path("tk")},
              "monot5": {"source": "reused", "checkpoint": str(monot5_dir)}})
  provisioning.teacher_stage(False, 2, record)
  provisioning.teacher_stage(False, 2, record)
  assert len(made) == 1 and record.teacher["source"] == "reused"
  # trained again at the same path by the same recipe: other weights, so other teacher scores
  manifest = json.loads((monot5_dir / "manifest.json").read_text())
  manifest["metadata.json"]["sha256"] = "0" * 64
  (monot5_dir / "manifest.json").write_text(json.dumps(manifest))
  provisioning.teacher_stage(False, 2, record)
  assert len(made) == 2 and record.teacher["source"] == "made"
  assert (tmp_path / "teacher.previous").is_dir()


def test_distil_goes_with_the_cascade_only(tmp_path):
  with pytest.raises(SystemExit, match="--distil goes with the English cascade"):
    cli.main(["demo", "--distil", "--monot5-only", "--output", str(tmp_path / "w")])
  with pytest.raises(SystemExit, match="--teacher-queries goes with --distil"):
    cli.main(["demo", "--teacher-queries", "3", "--output", str(tmp_path / "w")])


# ------------------------------------------------------------------- the cross-lingual cascade

XPR_DEPTHS = (10, 4)


@pytest.fixture(scope="module")
def xpr_demo(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("xpr") / "xpr")
  results = job.run_insuranceqa_cascade(workdir=workdir, num_queries=4, depths=XPR_DEPTHS,
                                        tune_queries=5, progress=False, job=XPR_CASCADE)
  return workdir, results


def test_the_cross_lingual_demo_runs_the_shipped_bilingual_models(xpr_demo):
  workdir, results = xpr_demo
  assert {n: m["source"] for n, m in results["models"].items()} == {
      "xpr_pretrained": "shipped", "xpr_monot5": "shipped", "xpr_dual_encoder_xpi": "shipped",
      "xpr_dual_encoder": "shipped"}
  rows = ["bm25", "dual_encoder", "dual_encoder+fusion", "monot5", "monot5+fusion"]
  assert [r["name"] for r in results["evaluation"]["stages"]] == rows
  assert results["evaluation"]["metrics"] == ["P@1", "acc@10", "MRR", "MAP"]
  assert results["first_stage"]["bm25"]["language"] == "zh"
  assert results["depths"] == {"xpr_dual_encoder": 10, "xpr_monot5": 4}
  assert results["fusion"]["weights"]["monot5+fusion"]["runs"] == ["bm25", "dual_encoder",
                                                                  "monot5"]
  # every row by query and answer language
  assert sorted(results["languages"]) == sorted(rows)
  first = os.path.join(workdir, "cascade", "00_bm25.run")  # BM25 over the 4 queries' pools
  with open(os.path.join(workdir, "data", "queries.tsv"), encoding="utf-8") as f:
    queries = [line for line in f if line.split("\t")[0] in read_run(first)]
  assert len(queries) == 4


def test_the_cross_lingual_cascade_is_t5rank_rerank_with_the_shipped_models(xpr_demo, tmp_path):
  assert_t5rank_rerank_gives_the_demos_runs(xpr_demo[0], XPR_CASCADE.rerankers, XPR_DEPTHS,
                                            tmp_path)


def test_the_cross_lingual_models_train_from_the_pretrained_one_and_the_first_stage(tmp_path,
                                                                                    training):
  calls = training
  trained = {}
  steps = {"xpr_pretrained": ["TRAIN_STEPS = 7"], "xpr_dual_encoder_xpi": ["TRAIN_STEPS = 5"]}
  for model in XPR_MODELS:
    provisioning.prepare(model, str(tmp_path), bindings=steps.get(model.name, ()), trained=trained)
  assert [c[0] for c in calls] == ["xpr_pretrained", "xpr_monot5", "xpr_dual_encoder_xpi",
                                   "xpr_dual_encoder"]
  assert calls[0][2] == ["TRAIN_STEPS = 7"]
  assert calls[1][2] == [f"INIT_CHECKPOINT = {str(tmp_path / 'xpr_pretrained' / 'final')!r}"]
  assert calls[1][3]  # from a model trained now: trained anew too
  assert calls[2][2] == ["MIXTURE_OR_TASK_NAME = 'xpi_enzh'", "TRAIN_STEPS = 2000",
                         "TRAIN_STEPS = 5"]  # the later binding of a name wins
  assert calls[3][2] == [f"INIT_CHECKPOINT = {str(tmp_path / 'xpr_dual_encoder_xpi' / 'final')!r}"]
  assert calls[3][3]


def test_the_cascades_depths_and_directories_are_their_own(xpr_demo, demo, tmp_path):
  with pytest.raises(SystemExit, match="--depth: 2 numbers, DUAL_ENCODER,MONOT5"):
    cli.main(["demo", "--cross-lingual", "--depth", "10,5,2", "-o", str(tmp_path / "w")])
  with pytest.raises(SystemExit, match="--depth: with --monot5-only one number"):
    cli.main(["demo", "--monot5-only", "--depth", "10,5,2", "-o", str(tmp_path / "w")])
  with pytest.raises(SystemExit, match="--depth: 2 numbers, DUAL_ENCODER,MONOT5, got 50"):
    cli.main(["demo", "--cross-lingual", "--depth", "50", "-o", str(tmp_path / "w")])
  with pytest.raises(SystemExit, match="--depth: 2 numbers"):  # the old spelling still works
    cli.main(["demo", "--cross-lingual", "--depths", "1,2,3", "--workdir", str(tmp_path / "w")])
  with pytest.raises(SystemExit, match="--pretrain-steps and --dense-steps go with"):
    cli.main(["demo", "--pretrain-steps", "3", "-o", str(tmp_path / "w")])
  assert not (tmp_path / "w").exists()
  with pytest.raises(ValueError, match="the work directory of 't5rank demo --cross-lingual"):
    job.run_insuranceqa_cascade(workdir=xpr_demo[0], num_queries=2, progress=False)
  with pytest.raises(ValueError, match="the work directory of 't5rank demo: the InsuranceQA"):
    job.run_insuranceqa_cascade(workdir=demo[0], num_queries=2, progress=False, job=XPR_CASCADE)
