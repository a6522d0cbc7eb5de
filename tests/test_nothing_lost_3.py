"""Nothing lost, nothing silently wrong, round three: one test per finding of the third hostile-user
review (issue "Nothing lost, round three"), each failing before its fix. Tiny models, tiny inputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from t5rank import cli
from t5rank.checkpoints import shipped
from t5rank.data.readers import read_run
from t5rank.files import OWNER_FILE, atomic_directory
from t5rank.models.t5_weights import save_checkpoint
from t5rank.pipelines.cascade_spec import parse_stage
from t5rank.testing import micro_config, random_params

TEXTS = {f"d{i}": f"policy {'term ' * i}life car rate number {i} {'cover ' * (i % 3)}"
         for i in range(6)}


def fail(argv, capsys) -> str:
  """The one line a refused command prints (its exit status is not 0)."""
  with pytest.raises(SystemExit) as e:
    cli.main(argv)
  assert e.value.code not in (0, None)
  message = str(e.value.code) if isinstance(e.value.code, str) else capsys.readouterr().err
  assert "Traceback" not in message and len(message.strip().splitlines()) == 1, message
  return message


@pytest.fixture
def tiny(tmp_path):
  """A monoT5 and a duoT5 checkpoint, queries, a corpus and a BM25-like run in tmp_path."""
  config = micro_config()
  save_checkpoint(str(tmp_path / "mono"), random_params(config, std=0.5), config)
  save_checkpoint(str(tmp_path / "duo"), random_params(config, seed=1, std=0.5), config,
                  {"model": "duot5"})
  (tmp_path / "q.tsv").write_text("q1\tlife policy term\nq2\tcar rate cover\n")
  (tmp_path / "c.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in TEXTS.items()))
  (tmp_path / "bm25.run").write_text("".join(
      f"{q} Q0 d{i} {i + 1} {10.0 - i} bm25\n" for q in ("q1", "q2") for i in range(6)))
  return tmp_path


# ----------------------------------------------------------------------------------- data lost


def test_teacher_does_not_take_a_folder_with_a_data_entry_for_its_own(tmp_path, capsys):
  project = tmp_path / "project"
  (project / "data").mkdir(parents=True)
  (project / "data" / "labels.csv").write_text("mine")
  message = fail(["teacher", "--checkpoint", "shipped:monot5", "--queries", "2", "-o",
                  str(project)], capsys)
  assert "holds files this command did not write" in message
  assert (project / "data" / "labels.csv").read_text() == "mine"


def test_convert_overwrite_replaces_only_its_own_output(tmp_path, capsys):
  user = tmp_path / "model"
  shutil.copytree(shipped.path("monot5"), user)
  (user / "NOTES.md").write_text("mine")
  message = fail(["convert", "--input", "shipped:monot5", "--to", "native", "-o", str(user),
                  "--overwrite"], capsys)
  assert "did not write" in message and (user / "NOTES.md").read_text() == "mine"
  own = tmp_path / "converted"
  assert cli.main(["convert", "--input", "shipped:monot5", "--to", "hf", "-o", str(own)]) == 0
  assert json.loads((own / OWNER_FILE).read_text()) == {"command": "convert"}
  assert cli.main(["convert", "--input", "shipped:monot5", "--to", "hf", "-o", str(own),
                   "--overwrite"]) == 0
  mode = os.stat(own / "model.safetensors").st_mode & 0o777
  assert mode == 0o666 & ~_umask()  # not mkstemp's 0600


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def test_explain_resolves_shipped_before_its_output_checks(tmp_path, capsys):
  config = os.path.join(shipped.path("tk"), "config.json")
  before = open(config, "rb").read()
  message = fail(["explain", "--checkpoint", "shipped:tk", "--query", "car", "--document",
                  "car policy", "--output", str(tmp_path / "e.html"), "--png", config,
                  "--overwrite"], capsys)
  assert "lies inside --checkpoint" in message
  assert open(config, "rb").read() == before


def test_a_link_given_as_output_stays_the_users_link(tmp_path):
  target = tmp_path / "target"
  with atomic_directory(str(target), owner="convert") as directory:
    open(os.path.join(directory, "a"), "w").write("1")
  link = tmp_path / "link"
  link.symlink_to(target)
  assert cli.main(["convert", "--input", "shipped:monot5", "--to", "hf", "-o", str(link),
                   "--overwrite"]) == 0
  assert os.path.islink(link) and os.readlink(link) == str(target)
  assert (target / "model.safetensors").is_file() and not (target / "a").exists()
  assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []  # nothing moved aside


def test_a_second_writer_of_one_directory_is_refused_naming_the_first(tmp_path):
  from t5rank.files import OutputError

  out = str(tmp_path / "out")
  with atomic_directory(out) as first:
    with pytest.raises(OutputError, match=f"another t5rank process \\(pid {os.getpid()}\\)"):
      with atomic_directory(out):
        pass
    open(os.path.join(first, "x"), "w").write("1")  # the first writer's temporary is intact
  assert os.listdir(out) == ["x"]


# ------------------------------------------------------------------ wrong results with exit 0


def _rerank(tiny, *extra):
  return ["rerank", "--queries", str(tiny / "q.tsv"), "--corpus", str(tiny / "c.tsv"), "--run",
          str(tiny / "bm25.run"), "--stage", f"mono={tiny / 'mono'}@4", "-o",
          str(tiny / "cascade"), *extra]


def test_rerank_rescores_when_the_texts_change_and_on_overwrite(tiny, capsys):
  assert cli.main(_rerank(tiny)) == 0
  before = read_run(str(tiny / "cascade" / "01_mono.run"))
  (tiny / "q.tsv").write_text("q1\tcar rate cover\nq2\tlife policy term\n")  # other texts
  capsys.readouterr()
  assert cli.main(_rerank(tiny)) == 0
  assert "reused" not in capsys.readouterr().out
  after = read_run(str(tiny / "cascade" / "01_mono.run"))
  assert after != before
  # what a fresh directory gives for these texts
  assert cli.main(_rerank(tiny)[:-1] + [str(tiny / "fresh")]) == 0
  assert read_run(str(tiny / "fresh" / "01_mono.run")) == after
  capsys.readouterr()
  assert cli.main(_rerank(tiny, "--overwrite")) == 0
  assert "reused" not in capsys.readouterr().out


def test_a_stage_run_without_its_stamp_is_never_reused(tiny, capsys, monkeypatch):
  """A kill between a stage's run and its stamp: the old stamp is gone before the run is
  written, so the next run scores the stage again."""
  from t5rank.pipelines import cascade

  assert cli.main(_rerank(tiny)) == 0
  stamp = tiny / "cascade" / "01_mono.run.json"
  assert stamp.is_file()
  (tiny / "q.tsv").write_text("q1\tcar rate cover\nq2\tlife policy term\n")

  def killed(*args, **kwargs):
    assert not stamp.exists()  # the old stamp is gone before the new run is written
    raise KeyboardInterrupt

  monkeypatch.setattr(cascade, "score_candidates", killed)
  with pytest.raises(KeyboardInterrupt):
    cli.main(_rerank(tiny))
  (tiny / "q.tsv").write_text("q1\tlife policy term\nq2\tcar rate cover\n")  # the old texts
  monkeypatch.undo()
  capsys.readouterr()
  assert cli.main(_rerank(tiny)) == 0
  assert "reused" not in capsys.readouterr().out


def test_a_reranker_that_contradicts_the_checkpoints_family_is_refused(tiny, capsys):
  base = ["score", "--queries", str(tiny / "q.tsv"), "--corpus", str(tiny / "c.tsv"), "--run",
          str(tiny / "bm25.run"), "-o", str(tiny / "out.run")]
  message = fail(base + ["--checkpoint", "shipped:monot5", "--reranker", "duot5"], capsys)
  assert "is a monot5 checkpoint" in message and not (tiny / "out.run").exists()
  message = fail(_rerank(tiny)[:-2] + ["--stage", "shipped:monot5@3", "--reranker", "duot5",
                                       "-o", str(tiny / "c2")], capsys)
  assert "is a monot5 checkpoint" in message and not (tiny / "c2").exists()


def test_score_depth_refuses_a_run_with_a_non_finite_score(tiny, capsys):
  (tiny / "nan.run").write_text((tiny / "bm25.run").read_text().replace(" 8.0 ", " nan "))
  message = fail(["score", "--checkpoint", str(tiny / "mono"), "--queries", str(tiny / "q.tsv"),
                  "--corpus", str(tiny / "c.tsv"), "--run", str(tiny / "nan.run"), "--depth",
                  "3", "--window", "0", "-o", str(tiny / "out.run")], capsys)
  assert "non-finite" in message and "nan.run" in message and not (tiny / "out.run").exists()


def test_a_dense_first_stage_is_refused_for_a_model_that_reads_bm25_at_stage_one(tiny, capsys):
  from t5rank.pipelines.cascade_spec import RerankStage, check_stages

  with pytest.raises(ValueError, match="dense retrieval"):
    check_stages([RerankStage("shipped:monot5", 10)], "dense")
  assert [s.name for s in check_stages([RerankStage("shipped:tk", 10)], "dense")] == ["tk"]


def test_convert_keeps_the_family(tmp_path, tiny):
  for to in ("native", "hf"):
    out = tmp_path / f"duo_{to}"
    assert cli.main(["convert", "--input", str(tiny / "duo"), "--to", to, "-o", str(out)]) == 0
    from t5rank.checkpoints.resolved import resolve
    checkpoint = resolve(str(out))
    assert (checkpoint.family, checkpoint.family_stated) == ("duot5", True)


def test_an_edited_config_json_is_refused(tmp_path, tiny, capsys):
  from t5rank.models.t5_weights import load_checkpoint

  for source in (str(tiny / "mono"), shipped.path("monot5")):  # manifest entry; metadata copy
    copy = tmp_path / os.path.basename(source) / "copy"
    shutil.copytree(source, copy)
    config = json.loads((copy / "config.json").read_text())
    config["relative_attention_max_distance"] = 64
    (copy / "config.json").write_text(json.dumps(config, indent=2))
    with pytest.raises(ValueError, match="config.json"):
      load_checkpoint(str(copy))


def test_score_takes_the_first_stage_scores_from_their_own_run(tiny, capsys):
  """docs/scoring.md: duoT5 over monoT5's run, the BM25 scores it reads from the BM25 run."""
  shipped_duo = ["--checkpoint", "shipped:duot5"]
  (tiny / "mono.run").write_text("".join(
      f"{q} Q0 d{5 - i} {i + 1} {-0.1 * i} mono\n" for q in ("q1", "q2") for i in range(6)))
  base = ["score", *shipped_duo, "--queries", str(tiny / "q.tsv"), "--corpus",
          str(tiny / "c.tsv"), "--run", str(tiny / "mono.run"), "--depth", "3", "--window", "0"]
  message = fail(base + ["-o", str(tiny / "a.run")], capsys)
  assert "BM25" in message
  assert cli.main(base + ["--first-stage-run", str(tiny / "bm25.run"), "-o",
                          str(tiny / "a.run")]) == 0
  top = read_run(str(tiny / "a.run"))
  assert all(sorted(d for d, _ in docs[:3]) == ["d3", "d4", "d5"] for docs in top.values())


# ----------------------------------------------------------------------------- one line, early


@pytest.mark.parametrize("weights", [5, None, [0.5, [0.5]], [0.5], "x"])
def test_malformed_fusion_weights_are_one_line(tmp_path, weights):
  from t5rank.pipelines.cascade_spec import read_fusion_weights

  path = tmp_path / "results.json"
  path.write_text(json.dumps({"fusion": {"mono+fusion": {"runs": ["bm25", "mono"],
                                                         "weights": weights}}}))
  with pytest.raises(ValueError, match="results.json"):
    read_fusion_weights(str(path))
  path.write_text("[1, 2]")
  with pytest.raises(ValueError, match="holds no tuned fusion weights"):
    read_fusion_weights(str(path))
  path.write_text("{not json")
  with pytest.raises(ValueError, match="results.json: not JSON"):
    read_fusion_weights(str(path))


def test_stage_specs(tmp_path):
  with pytest.raises(ValueError, match="nothing after its @"):
    parse_stage("runs/m@")
  with pytest.raises(ValueError, match="positive number"):
    parse_stage("runs/m@²")
  odd = tmp_path / "model@v2"
  odd.mkdir()
  assert parse_stage(str(odd)).checkpoint == str(odd)
  assert parse_stage(f"{odd}@5").depth == 5


def test_two_stages_with_one_name_and_a_missing_checkpoint_are_refused_before_work(tiny, capsys):
  argv = _rerank(tiny)
  two = argv[:argv.index("-o")] + ["--stage", f"mono={tiny / 'duo'}@2", "-o", argv[-1]]
  assert "named 'mono'" in fail(two, capsys)
  missing = _rerank(tiny)[:-3] + [f"{tiny / 'nothing'}@2", "-o", str(tiny / "c3")]
  assert "no checkpoint found" in fail(missing, capsys)
  assert not (tiny / "cascade").exists() and not (tiny / "c3").exists()


def test_teacher_weights_are_checked_before_any_scoring(tmp_path, capsys):
  message = fail(["teacher", "--checkpoint", "bm25", "--checkpoint", "shipped:monot5",
                  "--weights", "0.7,0.7", "-o", str(tmp_path / "t")], capsys)
  assert "summing to 1" in message and not (tmp_path / "t").exists()


def test_convert_on_a_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
  import safetensors.numpy

  def full(*args, **kwargs):
    from safetensors import SafetensorError
    raise SafetensorError("No space left on device (os error 28)")

  monkeypatch.setattr(safetensors.numpy, "save_file", full)
  message = fail(["convert", "--input", "shipped:monot5", "--to", "hf", "-o",
                  str(tmp_path / "o")], capsys)
  assert "model.safetensors: could not be written" in message and "No space left" in message
  assert not (tmp_path / "o").exists()


def test_a_demo_gin_typo_is_refused_before_any_work(tmp_path, capsys):
  message = fail(["demo", "--monot5-only", "--output", str(tmp_path / "w"),
                  "--gin.TRAIN_STEPZ=3"], capsys)
  assert message.startswith("t5rank demo:") and "TRAIN_STEPZ" in message
  assert not (tmp_path / "w").exists()
  message = fail(["demo", "--output", str(tmp_path / "w"), "--gin.TRAIN_STEPZ=3"], capsys)
  assert "TRAIN_STEPZ" in message and not (tmp_path / "w").exists()
  assert fail(["demo", "--depth", "50,10", "--output", str(tmp_path / "w")],
              capsys).startswith("t5rank demo: --depth: 5 numbers, DUAL_ENCODER,TK,MONOT5,RANKT5,"
                                 "DUOT5, got 50,10")


def test_a_misshaped_checkpoint_is_one_line(tmp_path, capsys):
  config = micro_config()
  save_checkpoint(str(tmp_path / "m"), random_params(config), config)
  shape_changed = json.loads((tmp_path / "m" / "config.json").read_text())
  shape_changed["d_ff"] *= 2
  (tmp_path / "q.tsv").write_text("q1\tcar\n")
  (tmp_path / "c.tsv").write_text("d1\tcar policy\n")
  (tmp_path / "r.run").write_text("q1 Q0 d1 1 1.0 x\n")
  from t5rank.checkpoints.native import MANIFEST_FILE
  os.remove(tmp_path / "m" / MANIFEST_FILE)  # as a checkpoint written before manifests
  (tmp_path / "m" / "config.json").write_text(json.dumps(shape_changed))
  os.remove(tmp_path / "m" / "metadata.json") if (tmp_path / "m" / "metadata.json").exists() \
      else None
  message = fail(["score", "--checkpoint", str(tmp_path / "m"), "--queries",
                  str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
                  str(tmp_path / "r.run"), "--window", "0", "-o", str(tmp_path / "o.run")], capsys)
  assert "misshaped" in message


def test_family_stated_only_where_the_files_say_it(tmp_path, tiny):
  from t5rank.checkpoints.resolved import resolve

  # an earlier convert's duoT5: metadata without `model` or a trainer's task_name
  config = micro_config()
  save_checkpoint(str(tmp_path / "old_convert"), random_params(config), config,
                  {"target_words": "true_false"})
  assert not resolve(str(tmp_path / "old_convert")).family_stated
  assert resolve(shipped.path("monot5")).family_stated  # the trainer's task_name
  # convert without --reranker does not invent a family for a checkpoint that states none
  assert cli.main(["convert", "--input", str(tmp_path / "old_convert"), "--to", "hf", "-o",
                   str(tmp_path / "hf")]) == 0
  assert not resolve(str(tmp_path / "hf")).family_stated
  assert cli.main(["convert", "--input", str(tmp_path / "old_convert"), "--to", "native",
                   "--reranker", "duot5", "-o", str(tmp_path / "duo_native")]) == 0
  assert resolve(str(tmp_path / "duo_native")).family == "duot5"


def test_the_lock_is_never_taken_through_a_link(tmp_path):
  from t5rank.files import OutputError

  victim = tmp_path / "victim.txt"
  victim.write_text("mine")
  (tmp_path / ".out.t5rank-lock").symlink_to(victim)
  with pytest.raises(OutputError, match="cannot lock"):
    with atomic_directory(str(tmp_path / "out")):
      pass
  assert victim.read_text() == "mine"
