"""Nothing silently wrong: non-finite scores are refused where they arise, a resume continues only
the same computation, a shard is trusted only when it holds its pairs, bad options fail first.

Each case reproduces a finding of the hostile-user review (issue "Nothing silently wrong").
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from t5rank import cli
from t5rank.data.readers import Document
from t5rank.models.loading import load_reranker
from t5rank.models.monot5 import MonoT5
from t5rank.models.t5_weights import save_checkpoint
from t5rank.models.vocab import load_vocabulary
from t5rank.ranking import scorer, shards
from t5rank.testing import micro_config, random_params

CONFIG = micro_config()
QUERIES = {"q1": "cancel my life policy", "q2": "car insurance rate"}
CORPUS = {f"d{i}": Document(f"policy {'term ' * i}life car rate number {i}") for i in range(6)}
CANDIDATES = {"q1": [(f"d{i}", 0.0) for i in range(6)], "q2": [(f"d{i}", 0.0) for i in range(3)]}
OPTIONS = scorer.ScoringOptions(window=0, shard_size=2, batch_tokens=256)


def write_inputs(directory) -> list[str]:
  (directory / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
  (directory / "c.tsv").write_text("".join(f"{d}\t{doc.text}\n" for d, doc in CORPUS.items()))
  (directory / "run").write_text("".join(f"{q} Q0 {d} {r + 1} {-r} bm25\n"
                                         for q, docs in CANDIDATES.items()
                                         for r, (d, _) in enumerate(docs)))
  return ["--queries", str(directory / "q.tsv"), "--corpus", str(directory / "c.tsv"),
          "--run", str(directory / "run")]


def reranker() -> MonoT5:
  return MonoT5(CONFIG, load_vocabulary(), (1176, 6136), max_length=32)


def score(params, output, **kwargs):
  return scorer.score_candidates(reranker(), params, queries=QUERIES, corpus=CORPUS,
                                 candidates=CANDIDATES, output=str(output), options=OPTIONS,
                                 progress=False, **kwargs)


def test_nan_weights_fail_the_score_command_and_write_nothing(tmp_path):
  params = random_params(CONFIG, std=0.2)
  # after the ReLU: a NaN before it may become 0 there (max(NaN, 0) is 0 or NaN with the
  # vectorization, which follows the batch's shape); x · NaN is NaN whatever x
  params["encoder"]["layers_0"]["mlp"]["wo"]["kernel"][0, 0] = np.nan
  save_checkpoint(str(tmp_path / "ckpt"), params, CONFIG)
  output = tmp_path / "out.run"
  with pytest.raises(SystemExit, match=r"t5rank score: 2 of 2 scores are not finite, e.g. query "
                     r"'q1', document 'd0', window 0: nan"):
    cli.main(["score", "--checkpoint", str(tmp_path / "ckpt"), *write_inputs(tmp_path),
              "--output", str(output), "--window", "0", "--shard-size", "2"])
  assert not output.exists()
  assert not list((tmp_path / "out.run.shards").glob("shard-*"))  # the manifest only


@pytest.mark.parametrize("size", ["0", "-4"])
def test_a_shard_size_below_one_fails_before_the_checkpoint_is_read(tmp_path, size):
  with pytest.raises(SystemExit, match=f"shard_size must be a positive number of passages, got "
                     f"{size}"):
    cli.main(["score", "--checkpoint", str(tmp_path / "no such checkpoint"),
              *write_inputs(tmp_path), "--output", str(tmp_path / "out"), "--shard-size", size])
  assert not (tmp_path / "out").exists() and not (tmp_path / "out.shards").exists()


def interrupted(params, output, after: int) -> None:
  """Scores until `after` shards are written, then stops as Ctrl-C would."""
  written = []
  write = shards.write_shard

  def write_then_stop(*args):
    write(*args)
    written.append(args[0])
    if len(written) == after:
      raise KeyboardInterrupt

  shards.write_shard = write_then_stop
  try:
    with pytest.raises(KeyboardInterrupt):
      score(params, output)
  finally:
    shards.write_shard = write


def test_a_resume_with_other_weights_at_the_same_path_is_refused(tmp_path):
  first, second = random_params(CONFIG, std=0.2), random_params(CONFIG, seed=1, std=0.2)
  whole = score(first, tmp_path / "whole.run")
  interrupted(first, tmp_path / "out.run", after=2)
  with pytest.raises(RuntimeError, match="holds the shards of another job"):
    score(second, tmp_path / "out.run")
  assert score(first, tmp_path / "out.run") == whole  # the same weights continue


@pytest.mark.parametrize("damage, message", [
    (lambda text: "", "checksum line is missing"),
    (lambda text: text.splitlines(keepends=True)[0], "checksum line is missing"),
    (lambda text: text.replace("e", "f", 1), "does not match its rows"),  # a score changed
    (lambda text: "".join(text.splitlines(keepends=True)[1:]), "does not match its rows"),
])
def test_an_emptied_or_cut_shard_is_not_trusted(tmp_path, damage, message):
  params = random_params(CONFIG, std=0.2)
  interrupted(params, tmp_path / "out.run", after=1)
  [first] = (tmp_path / "out.run.shards").glob("shard-*")
  first.write_text(damage(first.read_text()))
  with pytest.raises(shards.ShardError, match=message + ".*delete that file"):
    score(params, tmp_path / "out.run")
  first.unlink()  # as the message says: that shard is scored again
  assert score(params, tmp_path / "out.run") == score(params, tmp_path / "whole.run")


def test_fuse_and_evaluate_refuse_non_finite_scores(tmp_path):
  (tmp_path / "a.run").write_text("q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\n")
  (tmp_path / "b.run").write_text("q1 Q0 d1 1 nan b\nq1 Q0 d2 2 1.0 b\n")
  (tmp_path / "qrels").write_text("q1 0 d1 1\n")
  with pytest.raises(SystemExit, match=r"b.run holds 1 non-finite score\(s\), e.g. query 'q1', "
                     r"document 'd1': nan"):
    cli.main(["fuse", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "--weight", "0.5",
              "-o", str(tmp_path / "fused.run")])
  assert not (tmp_path / "fused.run").exists()
  with pytest.raises(SystemExit, match=r"t5rank evaluate: .*b.run holds 1 non-finite score"):
    cli.main(["evaluate", "--qrels", str(tmp_path / "qrels"), str(tmp_path / "a.run"),
              str(tmp_path / "b.run")])
  (tmp_path / "c.run").write_text("q1 Q0 d1 1 inf c\n")
  with pytest.raises(SystemExit, match="c.run holds 1 non-finite score"):
    cli.main(["evaluate", "--qrels", str(tmp_path / "qrels"), str(tmp_path / "c.run")])


@pytest.mark.parametrize("argv, message", [
    (["score", "--checkpoint", "CKPT", "--queries", "{q}", "--corpus", "{c}", "--run", "{r}",
      "--output", "{r}"], "--output {r} is also --run"),
    (["score", "--checkpoint", "CKPT", "--queries", "{q}", "--corpus", "{c}", "--run", "{r}",
      "--output", "{d}/out", "--per-passage-output", "{c}"], "--per-passage-output {c} is also"),
    (["score", "--checkpoint", "CKPT", "--queries", "{q}", "--corpus", "{c}", "--run", "{r}",
      "--output", "{d}"], "--output {d} is a directory"),
    (["fuse", "{r}", "{r2}", "--weight", "0.5", "-o", "{r2}"], "-o {r2} is also RUN 2"),
    (["retrieve", "--corpus", "{c}", "--queries", "{q}", "--output", "{c}"],
     "--output {c} is also --corpus"),
    (["topics", "{q}", "--field", "title", "--output", "{q}"], "--output {q} is also TOPICS"),
    (["convert", "--input", "{d}", "--output", "{d}/", "--to", "hf"], "--output {d}/ is also --input"),
])
def test_no_command_overwrites_its_own_input(tmp_path, argv, message):
  write_inputs(tmp_path)
  (tmp_path / "run2").write_text((tmp_path / "run").read_text())
  paths = {"q": tmp_path / "q.tsv", "c": tmp_path / "c.tsv", "r": tmp_path / "run",
           "r2": tmp_path / "run2", "d": tmp_path}
  before = {name: path.read_bytes() for name, path in paths.items() if path.is_file()}
  with pytest.raises(SystemExit, match=message.format(**paths).replace(".", r"\.")):
    cli.main([a.format(**paths) for a in argv])
  assert {name: paths[name].read_bytes() for name in before} == before


def test_ids_a_trec_run_cannot_hold_are_refused_before_retrieval(tmp_path):
  (tmp_path / "c.jsonl").write_text('{"id": "d 1", "text": "car insurance"}\n')
  (tmp_path / "q.tsv").write_text("q1\tcar\n")
  with pytest.raises(SystemExit, match=r"c.jsonl: document id 'd 1' cannot be written into a "
                     r"TREC run"):
    cli.main(["retrieve", "--corpus", str(tmp_path / "c.jsonl"), "--queries",
              str(tmp_path / "q.tsv"), "--output", str(tmp_path / "out.run")])
  assert not (tmp_path / "out.run").exists()


def test_a_hugging_face_checkpoint_brings_its_own_vocabulary_and_words(tmp_path, caplog):
  from t5rank.models.t5_weights.hf import save_hf_checkpoint
  from t5rank.models.vocab import VOCABULARIES

  config = micro_config()
  save_hf_checkpoint(str(tmp_path / "bare"), random_params(config, std=0.2), config)
  # no tokenizer in the directory: T5's, with a warning
  reranker, _ = load_reranker(str(tmp_path / "bare"))
  assert reranker.vocab.sha256 == load_vocabulary().sha256
  assert "has no spiece.model; tokenizing with T5's vocabulary" in caplog.text
  config = micro_config(vocab_size=8000)
  directory = tmp_path / "hf"
  save_hf_checkpoint(str(directory), random_params(config, std=0.2), config)
  # its own spiece.model (here the 8k InsuranceQA one, whose ▁true is 961) is used
  (directory / "spiece.model").write_bytes(open(VOCABULARIES["insuranceqa_en_8k"][0], "rb").read())
  reranker, _ = load_reranker(str(directory))
  assert reranker.vocab.base_vocab_size == 8000 and reranker.vocab.extra_ids == 0
  assert reranker.target_ids == (961, 4396)
  # target words beside the weights, and --targets over them
  (directory / "t5rank.json").write_text('{"target_words": ["false", "true"]}')
  assert load_reranker(str(directory))[0].target_ids == (4396, 961)
  assert load_reranker(str(directory), options={"targets": "true_false"})[0].target_ids == (961, 4396)
  # only a tokenizer.json: refused, not silently replaced by T5's vocabulary
  (directory / "spiece.model").unlink()
  (directory / "tokenizer.json").write_text("{}")
  with pytest.raises(ValueError, match="tokenizer.json but no spiece.model"):
    load_reranker(str(directory))


def test_an_mt5_checkpoint_scores_yes_no_by_default(tmp_path):
  import json

  from t5rank.models.t5_weights.hf import save_hf_checkpoint

  config = micro_config()
  save_hf_checkpoint(str(tmp_path), random_params(config, std=0.2), config)
  hf = json.loads((tmp_path / "config.json").read_text())
  (tmp_path / "config.json").write_text(json.dumps(dict(hf, model_type="mt5")))
  vocab = load_vocabulary()
  assert load_reranker(str(tmp_path))[0].target_ids == (vocab.piece_to_id("▁yes"),
                                                       vocab.piece_to_id("▁no"))


def test_convert_to_hf_carries_the_vocabulary_and_target_words(tmp_path):
  from t5rank.models.vocab import VOCABULARIES

  config = micro_config(vocab_size=8000)
  native_dir = tmp_path / "native"
  save_checkpoint(str(native_dir), random_params(config, std=0.2), config,
                  extra_metadata={"vocabulary": "insuranceqa_en_8k.model",
                                  "vocabulary_extra_ids": 0, "target_words": "hot_cold"})
  (native_dir / "insuranceqa_en_8k.model").write_bytes(
      open(VOCABULARIES["insuranceqa_en_8k"][0], "rb").read())
  before = load_reranker(str(native_dir))[0]
  assert cli.main(["convert", "--input", str(native_dir), "--output", str(tmp_path / "hf"),
                   "--to", "hf"]) == 0
  after = load_reranker(str(tmp_path / "hf"))[0]
  assert (after.vocab.sha256, after.target_ids) == (before.vocab.sha256, before.target_ids)


def test_errors_are_one_line_with_the_file_and_a_debug_flag_shows_the_traceback(tmp_path):
  (tmp_path / "hf").mkdir()
  (tmp_path / "hf" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00")  # truncated
  (tmp_path / "hf" / "config.json").write_text('{"model_type": "t5"}')
  argv = ["convert", "--input", str(tmp_path / "hf"), "--output", str(tmp_path / "out"), "--to",
          "native"]
  with pytest.raises(SystemExit, match=r"t5rank convert: .*model.safetensors: not a readable "
                     r"safetensors file"):
    cli.main(argv)
  from t5rank.checkpoints.tree import CheckpointError
  with pytest.raises(CheckpointError):
    cli.main(["--debug", *argv])
  with pytest.raises(SystemExit, match=r"t5rank evaluate: .*No such file or directory: "
                     r"'[^']*missing.qrels'"):
    cli.main(["evaluate", "--qrels", str(tmp_path / "missing.qrels"), str(tmp_path / "run")])


def test_byte_order_marks_modes_conflicting_qrels_and_cut_topics(tmp_path, caplog):
  from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_trec_topics, write_run

  (tmp_path / "q.tsv").write_bytes("\ufeffq1\tcar\n".encode())
  (tmp_path / "c.jsonl").write_bytes('\ufeff{"id": "d1", "text": "car"}\n'.encode())
  assert read_queries(str(tmp_path / "q.tsv")) == {"q1": "car"}
  assert list(read_corpus(str(tmp_path / "c.jsonl"))) == ["d1"]
  old = os.umask(0o022)
  try:
    write_run(str(tmp_path / "out.run"), {"q1": [("d1", 1.0)]}, "t")
  finally:
    os.umask(old)
  assert (tmp_path / "out.run").stat().st_mode & 0o777 == 0o644
  (tmp_path / "qrels").write_text("q1 0 d1 1\nq1 0 d1 1\nq1 0 d2 0\nq1 0 d2 2\n")
  assert read_qrels(str(tmp_path / "qrels")) == {"q1": {"d1": 1, "d2": 2}}
  assert "1 judged pair(s) repeated with conflicting labels" in caplog.text
  (tmp_path / "topics").write_text("<top>\n<num> Number: 301\n<title> cars\n</top>\n"
                                   "<top>\n<num> Number: 302\n<title> boa")
  assert list(read_trec_topics(str(tmp_path / "topics"))) == ["301"]
  assert "topics:5: a <top> block is never closed" in caplog.text


def test_a_shard_of_other_pairs_with_a_valid_checksum_is_refused(tmp_path):
  params = random_params(CONFIG, std=0.2)
  interrupted(params, tmp_path / "out.run", after=1)
  [first] = (tmp_path / "out.run.shards").glob("shard-*")
  rows = [line for line in first.read_text().splitlines(keepends=True) if not line.startswith("#")]
  pairs = [shards.Pair("q1", "d5", 0), shards.Pair("q1", "d1", 0)]
  shards.write_shard(str(first), pairs, np.array([-1.0, -2.0]), np.array([0.3, 0.1]))
  assert len(rows) == 2
  with pytest.raises(shards.ShardError, match=r":1: \('q1', 'd5', 0\) where this shard has"):
    score(params, tmp_path / "out.run")


@pytest.mark.parametrize("extra, message", [
    (["--tag", "a b"], "the run tag must be a non-empty word without whitespace"),
])
def test_bad_options_fail_before_the_checkpoint_is_read(tmp_path, extra, message):
  with pytest.raises(SystemExit, match=message):
    cli.main(["score", "--checkpoint", str(tmp_path / "no such checkpoint"),
              *write_inputs(tmp_path), "--output", str(tmp_path / "out"), *extra])
  assert not (tmp_path / "out.shards").exists()


def test_an_option_of_the_wrong_type_is_a_usage_error_before_anything(tmp_path, capsys):
  """--max-length 0 is refused by the flag's own type (`t5rank.ranking.options`), as argparse
  refuses a usage error: exit 2, one line naming the flag."""
  with pytest.raises(SystemExit) as exit:
    cli.main(["score", "--checkpoint", str(tmp_path / "no such checkpoint"),
              *write_inputs(tmp_path), "--output", str(tmp_path / "out"), "--max-length", "0"])
  assert exit.value.code == 2
  assert "--max-length: expected a positive integer, got 0" in capsys.readouterr().err
  assert not (tmp_path / "out.shards").exists()


def test_a_symlinked_shard_directory_is_refused(tmp_path):
  (tmp_path / "elsewhere").mkdir()
  os.symlink(tmp_path / "elsewhere", tmp_path / "out.shards")
  with pytest.raises(SystemExit, match="out.shards is a symbolic link"):
    cli.main(["score", "--checkpoint", str(tmp_path / "ckpt"), *write_inputs(tmp_path),
              "--output", str(tmp_path / "out")])
  assert not os.listdir(tmp_path / "elsewhere")


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "t5rank convert: no checkpoint found at .*ckpt: expected a t5rank directory"),
    (lambda d: d.mkdir(), "t5rank convert: no checkpoint found at .*ckpt: expected"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text('{"model_type": "bert"}'),
                (d / "model.safetensors").write_bytes(b"")), "model_type 'bert'"),
])
def test_checkpoints_that_are_not_t5_fail_in_one_line(tmp_path, setup, message):
  directory = tmp_path / "ckpt"
  setup(directory)
  with pytest.raises(SystemExit, match=message):
    cli.main(["convert", "--input", str(directory), "--output", str(tmp_path / "out"),
              "--to", "native"])


def test_convert_carries_scoring_settings_hf_to_native_and_back(tmp_path):
  import json

  from t5rank.models.t5_weights.hf import save_hf_checkpoint
  from t5rank.models.vocab import VOCABULARIES

  config = micro_config(vocab_size=8000)
  save_hf_checkpoint(str(tmp_path / "hf"), random_params(config, std=0.2), config)
  (tmp_path / "hf" / "spiece.model").write_bytes(
      open(VOCABULARIES["insuranceqa_en_8k"][0], "rb").read())
  (tmp_path / "hf" / "t5rank.json").write_text(json.dumps(
      {"target_words": "hot_cold", "max_length": 96, "bm25_in_input": True}))
  before = load_reranker(str(tmp_path / "hf"))[0]
  assert cli.main(["convert", "--input", str(tmp_path / "hf"), "--output",
                   str(tmp_path / "native"), "--to", "native"]) == 0
  assert cli.main(["convert", "--input", str(tmp_path / "native"), "--output",
                   str(tmp_path / "hf2"), "--to", "hf"]) == 0
  for directory in ("native", "hf2"):
    after = load_reranker(str(tmp_path / directory))[0]
    assert after.fingerprint() == before.fingerprint(), directory
  assert (before.max_length, before.bm25_in_input, before.vocab.base_vocab_size) == (96, True, 8000)


def test_config_replace_keeps_the_coupling_unless_told():
  from t5rank.models.config import get_config

  assert get_config("t5_base", tie_embeddings=False).scale_decoder_outputs is False
  untied_scaled = get_config("t5_base").replace(tie_embeddings=False, scale_decoder_outputs=True)
  assert untied_scaled.scale_decoder_outputs is True
  with pytest.raises(SystemExit, match="unknown model config 't5-base'"):
    cli.main(["convert", "--input", "x", "--output", "y", "--to", "native", "--config", "t5-base"])
