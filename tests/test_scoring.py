"""The scorer: bucketed batches give the definition's scores, windows and aggregation, missing ids,
resumption after SIGKILL, no TensorFlow on the scoring path, and the command end to end.

A 1+1-layer, d_model 32 T5 with T5's vocabulary keeps compilation (about 2 s a shape here) rare.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from t5rank.models.inputs import encode_pairs
from t5rank.ranking.passages import aggregate, document_passages, split_sentences, window_sentences
from t5rank.data.readers import Document, read_run
from t5rank.models.monot5 import MonoT5
from t5rank.models.batching import batch_rows, bucket_batches, bucket_lengths
from t5rank.ranking.prefetch import prefetch
from t5rank.ranking.candidates import MissingIdsError, Pair, check_candidates
from t5rank.ranking.scorer import score_candidates
from t5rank.ranking.passages import rank_documents
from t5rank.models.vocab import load_vocabulary, resolve_target_words
from t5rank.testing import MICRO, random_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))




@pytest.fixture(scope="module")
def model():
  from t5rank.models.config import get_config

  config = get_config("tiny", **MICRO)
  return config, random_params(config, std=0.2)


# ---------------------------------------------------------------------------------------------------
# Windows and aggregation.

def test_sentences_english_and_chinese():
  text = "Dr. Smith sold it for $3.5 million. Was it cheap? No! 保险可以取消吗？可以。"
  sentences = split_sentences(text)
  assert "".join(sentences) == text
  assert [s.strip() for s in sentences] == [
      "Dr. Smith sold it for $3.5 million.", "Was it cheap?", "No!", "保险可以取消吗？", "可以。"]


def test_chinese_documents_get_windows_of_ten_sentences():
  sentences = [f"第{i}句说保险。" for i in range(12)] + ["最后一句？"]
  text = "".join(sentences)  # no spaces between Chinese sentences
  for language in ("zh", "en"):  # the fullwidth stops split in either setting
    assert split_sentences(text, language) == sentences
    assert document_passages(Document(text), language=language) == [
        "".join(sentences[0:10]), "".join(sentences[5:13])]


def test_windows_of_sentences():
  sentences = [f"s{i}. " for i in range(12)]
  windows = window_sentences(sentences, window=10, stride=5)
  assert windows == ["".join(sentences[0:10]).strip(), "".join(sentences[5:12]).strip()]
  assert window_sentences(sentences[:4], window=10, stride=5) == ["s0. s1. s2. s3."]
  assert window_sentences(sentences[:10], window=10, stride=5) == ["".join(sentences[:10]).strip()]
  assert window_sentences([], window=10, stride=5) == [""]


def test_document_passages():
  long = " ".join(f"Sentence {i} is here." for i in range(12))
  assert len(document_passages(Document(long))) == 2
  assert document_passages(Document(long), window=0) == [long]
  assert document_passages(Document("One. Two.", title="Title")) == ["Title One. Two."]
  assert document_passages(Document("")) == [""]  # an empty document is still scored
  assert document_passages(Document("", title="T")) == ["T"]


def test_aggregations_on_hand_made_scores():
  scores = [-2.0, -0.5, -1.0, -0.5]
  assert aggregate(scores, "maxp") == (-0.5, 1)  # the first of equal best windows wins
  assert aggregate(scores, "firstp") == (-2.0, 0)
  assert aggregate(scores, "sump") == (-4.0, 1)
  assert aggregate(scores, "meanp") == (-1.0, 1)
  with pytest.raises(ValueError, match="unknown aggregation 'minp'"):
    aggregate(scores, "minp")


def test_rank_documents_sorts_with_docid_tie_break():
  rows = [(Pair("q", "d2", 0), -1.0, 0.0), (Pair("q", "d2", 1), -0.1, 0.0),
          (Pair("q", "d1", 0), -0.1, 0.0), (Pair("q", "d3", 0), -0.05, 0.0)]
  run, winners = rank_documents(rows, "maxp")
  assert run == {"q": [("d3", -0.05), ("d1", -0.1), ("d2", -0.1)]}
  assert winners[("q", "d2")] == 1
  run, _ = rank_documents(rows, "firstp")
  assert run["q"][-1] == ("d2", -1.0)


# ---------------------------------------------------------------------------------------------------
# Batching and the score definition.

def test_bucket_batches_cover_each_item_once_in_fixed_shapes():
  rng = random.Random(0)
  ids = [[5] * rng.randint(1, 200) for _ in range(100)]
  batches = bucket_batches(ids, batch_tokens=1024, max_length=200, row_multiple=4)
  assert bucket_lengths(200) == [64, 128, 192, 200]
  assert batch_rows(64, 1024, 4) == [16, 8, 4] and batch_rows(192, 1024, 4) == [4]
  assert {b.arrays[0].shape for b in batches} <= {(16, 64), (8, 64), (4, 64), (8, 128), (4, 128),
                                               (4, 192), (4, 200)}
  for b in batches:  # a batch is full, or the last of its bucket in the smallest size holding it
    rows = batch_rows(b.arrays[0].shape[1], 1024, 4)
    assert len(b.items) == rows[0] or b.arrays[0].shape[0] == min(r for r in rows if r >= len(b.items))
  assert sorted(i for b in batches for i in b.items) == list(range(100))
  for b in batches:
    for row, item in enumerate(b.items):
      assert (b.arrays[0][row] != 0).sum() == len(ids[item])
    assert not b.arrays[0][len(b.items):].any()  # rows past the items are padding


def test_a_buckets_rest_joins_the_next_bucket_where_that_pads_fewer_tokens():
  # batch_tokens 1024, rows a multiple of 4: 16 rows at length 64 (partial batches 8 or 4 rows),
  # 8 at 128 (or 4). 17 sequences of 10 ids and 3 of 100: 16 fill a batch; the 17th alone would
  # take a 4-row batch of 64 (256 tokens) beside a 4-row batch of 128 for the 3 (512): 768 tokens.
  # Joining the 3 instead, the 4 fill the 4-row batch of 128: 512 tokens.
  ids = [[5] * 10] * 17 + [[5] * 100] * 3
  batches = bucket_batches(ids, batch_tokens=1024, max_length=200, row_multiple=4)
  assert [b.arrays[0].shape for b in batches] == [(16, 64), (4, 128)]
  assert [sorted(b.items) for b in batches] == [list(range(16)), [16, 17, 18, 19]]
  assert (batches[1].arrays[0] != 0).sum(axis=1).tolist() == [10, 100, 100, 100]
  # 20 short ones: the rest of 4 fills a 4-row batch of 64 (256 tokens), where a 4-row batch of
  # 128 would take 512: it stays.
  batches = bucket_batches([[5] * 10] * 20, batch_tokens=1024, max_length=200, row_multiple=4)
  assert [b.arrays[0].shape for b in batches] == [(16, 64), (4, 64)]
  # One short sequence stays at 64 (4 rows x 64 = 256 tokens; 4 x 128 would be 512, and on to
  # 200, 4 x 200 = 800): a rest moves on only to pad less over the job.
  batches = bucket_batches([[5] * 10], batch_tokens=1024, max_length=200, row_multiple=4)
  assert [b.arrays[0].shape for b in batches] == [(4, 64)]
  # the last bucket keeps its rest: there is no longer length to join.
  batches = bucket_batches([[5] * 199] * 5, batch_tokens=1024, max_length=200, row_multiple=4)
  assert [b.arrays[0].shape for b in batches] == [(4, 200), (4, 200)]


def test_bucket_batches_never_pad_more_than_each_bucket_alone():
  # against each bucket's own batches (its rest in the smallest batch that holds it): the total
  # padded tokens are never more, on random jobs of 1 to 300 sequences.
  rng = random.Random(3)
  for _ in range(50):
    ids = [[5] * rng.randint(1, 300) for _ in range(rng.randint(1, 300))]
    batches = bucket_batches(ids, batch_tokens=2048, max_length=300, row_multiple=2, step=32)
    assert sorted(i for b in batches for i in b.items) == list(range(len(ids)))
    alone, shorter = 0, 0
    for length in bucket_lengths(300, 32):
      n, shorter = sum(shorter < len(x) <= length for x in ids), length
      rows = batch_rows(length, 2048, 2)
      full, rest = divmod(n, rows[0])
      alone += (full * rows[0] + (min(r for r in rows if r >= rest) if rest else 0)) * length
    assert sum(b.arrays[0].size for b in batches) <= alone


def test_shuffled_bucketed_batch_equals_one_pair_at_a_time(model):
  from t5rank.models.monot5 import score_step  # monot5_score, compiled
  from t5rank.ranking.devices import place_params, scoring_mesh
  from t5rank.ranking.scorer import score_batches

  config, params = model
  vocab = load_vocabulary()
  targets = resolve_target_words(vocab, "true_false")
  # 10 pairs with 3 distinct lengths (each length compiles once one at a time), in two buckets.
  documents = ["term life insurance " * n for n in (2, 15, 2, 30, 15, 2, 30, 15, 2, 30)]
  queries = ["what is term life?"] * len(documents)
  order = list(range(len(documents)))
  random.Random(1).shuffle(order)
  ids = encode_pairs(vocab, [queries[i] for i in order], [documents[i] for i in order], 128)
  assert len({len(x) for x in ids}) == 3 and max(map(len, ids)) > 64
  mesh = scoring_mesh()
  reranker = MonoT5(config, vocab, targets, max_length=128)
  batches = bucket_batches(ids, batch_tokens=512, max_length=128)
  log_p, p = score_batches(reranker, place_params(params, reranker.param_axes(), mesh), batches,
                           len(ids), mesh=mesh)
  for i, seq in enumerate(ids):
    expected_log_p, expected_p = score_step(params, np.array([seq]), config=config,
                                            target_ids=targets)
    np.testing.assert_allclose(log_p[i], expected_log_p[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(p[i], expected_p[0], rtol=0, atol=1e-6)


def test_monot5_encode_equals_encode_pairs(model):
  vocab = load_vocabulary()
  queries = ["cancel life insurance?", "保险", "cancel life insurance?", "保险"]
  passages = ["Any time.", "", "You can cancel.", "Any time."]
  reranker = MonoT5(model[0], vocab, resolve_target_words(vocab, "true_false"), max_length=16)
  assert reranker.encode(queries, passages) == encode_pairs(vocab, queries, passages, 16)


def test_prefetch_keeps_order_and_reraises():
  assert list(prefetch(iter(range(10)), size=2)) == list(range(10))

  def failing():
    yield 1
    raise OSError("disk gone")

  with pytest.raises(OSError, match="disk gone"):
    list(prefetch(failing()))
  for item in prefetch(iter(range(1000)), size=1):  # stopping early stops the producer
    break


# ---------------------------------------------------------------------------------------------------
# Bad input.

def test_missing_ids_fail_naming_the_first_few_and_the_count(caplog):
  queries = {"q1": "a", "q2": "b"}
  corpus = {"d1": Document("x")}
  candidates = {"q1": [("d1", 1.0)] + [(f"m{i}", 0.0) for i in range(7)],
                "q9": [("d1", 1.0)], "q2": [("d1", 2.0), ("m0", 1.0)]}
  with pytest.raises(MissingIdsError) as error:
    check_candidates(candidates, queries, corpus, skip_missing=False, sources=("Q.tsv", "C.jsonl"))
  assert str(error.value) == (
      "9 candidate(s) name unknown ids: 1 query id(s) missing from Q.tsv: 'q9'; 7 document id(s) "
      "missing from C.jsonl: 'm0', 'm1', 'm2', 'm3', 'm4', ... (2 more)")
  with caplog.at_level(logging.WARNING):
    kept = check_candidates(candidates, queries, corpus, skip_missing=True)
  assert kept == {"q1": [("d1", 1.0)], "q2": [("d1", 2.0)]}
  assert "skipping 9 candidate(s)" in caplog.text


# ---------------------------------------------------------------------------------------------------
# Resumption, the TensorFlow-free path, the command.

def test_shards_of_another_job_are_not_mixed_in(tmp_path, model):
  config, params = model
  vocab = load_vocabulary()
  (tmp_path / "out.run.shards").mkdir()
  (tmp_path / "out.run.shards" / "manifest.json").write_text('{"fingerprint": "another job"}')
  with pytest.raises(RuntimeError, match="holds the shards of another job"):
    score_candidates(MonoT5(config, vocab, (1176, 6136)), params, queries={"q": "x"}, corpus={"d": Document("y")}, candidates={"q": [("d", 0)]},
                     output=str(tmp_path / "out.run"), progress=False)
  assert not (tmp_path / "out.run").exists()


def _write_inputs(directory, num_queries: int = 5, docs_per_query: int = 10) -> dict[str, str]:
  rng = random.Random(0)
  words = "policy cover claim premium term life car home rate cash value loan".split()
  paths = {name: os.path.join(directory, name) for name in ("q.tsv", "c.jsonl", "cand.run")}
  with open(paths["q.tsv"], "w") as f:
    for q in range(num_queries):
      f.write(f"q{q}\t{' '.join(rng.choices(words, k=4))}?\n")
  with open(paths["c.jsonl"], "w") as f:
    for d in range(num_queries * docs_per_query):
      text = "" if d == 3 else " ".join(rng.choices(words, k=rng.randint(3, 25))) + "."
      f.write(json.dumps({"id": f"d{d}", "text": text}) + "\n")
  with open(paths["cand.run"], "w") as f:
    for q in range(num_queries):
      for r, d in enumerate(rng.sample(range(num_queries * docs_per_query), docs_per_query)):
        f.write(f"q{q} Q0 d{d} {r + 1} {-r} bm25\n")
  return paths


# Scores the inputs with the micro model on 2 CPU devices; SLOW=1 sleeps after each shard so that
# the process can be killed between shards.
SCRIPT = textwrap.dedent("""
    import json, logging, os, sys, time
    from t5rank.data.readers import read_corpus, read_queries, read_run
    from t5rank.models.config import get_config
    from t5rank.models.monot5 import MonoT5
    from t5rank.models.vocab import load_vocabulary, resolve_target_words
    from t5rank.ranking import scorer, shards
    from t5rank.testing import random_params

    logging.basicConfig(level=logging.INFO)
    directory, output = sys.argv[1], sys.argv[2]
    if os.environ.get("PROCESS_ID"):  # one of two hosts
      import jax
      jax.config.update("jax_cpu_collectives_implementation", "gloo")
      jax.distributed.initialize(os.environ["COORDINATOR"], num_processes=2,
                                 process_id=int(os.environ["PROCESS_ID"]))
    if os.environ.get("SLOW"):
      write_shard = shards.write_shard
      shards.write_shard = lambda *a: (write_shard(*a), time.sleep(0.5))
    config = get_config("tiny", **json.loads(sys.argv[3]))
    vocab = load_vocabulary()
    reranker = MonoT5(config, vocab, resolve_target_words(vocab, "true_false"), max_length=64)
    scorer.score_candidates(
        reranker, random_params(config, std=0.2),
        queries=read_queries(os.path.join(directory, "q.tsv")),
        corpus=read_corpus(os.path.join(directory, "c.jsonl")),
        candidates=read_run(os.path.join(directory, "cand.run")), output=output,
        options=scorer.ScoringOptions(window=0, batch_tokens=512, shard_size=5),
        progress=False)
    import jax
    print("devices", jax.local_device_count(), "tensorflow", "tensorflow" in sys.modules)
""")


def _run_script(directory: str, output: str, slow: bool = False, **env_vars) -> subprocess.Popen:
  env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT}/tests", SLOW="1" if slow else "",
             XLA_FLAGS="--xla_force_host_platform_device_count=2",  # batches split over 2 devices
             **env_vars)
  return subprocess.Popen([sys.executable, "-c", SCRIPT, directory, output, json.dumps(MICRO)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_resume_after_sigkill_and_two_hosts_equal_an_uninterrupted_run(tmp_path):
  paths = _write_inputs(tmp_path)
  interrupted, whole = str(tmp_path / "interrupted.run"), str(tmp_path / "whole.run")
  process = _run_script(str(tmp_path), interrupted, slow=True)
  shards = tmp_path / "interrupted.run.shards"
  deadline = time.time() + 120
  while len(list(shards.glob("shard-*.tsv")) if shards.exists() else []) < 3:
    assert process.poll() is None, process.communicate()
    assert time.time() < deadline, "no shards written in time"
    time.sleep(0.05)
  process.send_signal(signal.SIGKILL)
  process.wait()
  done = len(list(shards.glob("shard-*.tsv")))
  assert 3 <= done < 10 and not os.path.exists(interrupted)

  with socket.socket() as s:  # a free port for the two hosts' coordinator
    s.bind(("localhost", 0))
    coordinator = f"localhost:{s.getsockname()[1]}"
  two_hosts = str(tmp_path / "two_hosts.run")
  processes = [_run_script(str(tmp_path), interrupted), _run_script(str(tmp_path), whole)] + [
      _run_script(str(tmp_path), two_hosts, COORDINATOR=coordinator, PROCESS_ID=str(i))
      for i in (0, 1)]
  logs = []
  for process in processes:
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "devices 2 tensorflow False" in stdout  # TensorFlow was never imported
    logs.append(stderr)
  assert f"50 pairs in 10 shards; this host (0 of 1) has 10 shards, {done} already done" in logs[0]
  assert "50 pairs in 10 shards; this host (0 of 2) has 5 shards, 0 already done" in logs[2]
  assert "50 pairs in 10 shards; this host (1 of 2) has 5 shards, 0 already done" in logs[3]
  with open(two_hosts) as a, open(whole) as b:
    assert a.read() == b.read()
  with open(interrupted) as a, open(whole) as b:
    assert a.read() == b.read()
  assert not shards.exists()  # removed once the run is written
  run = read_run(whole)
  assert sorted(run) == [f"q{q}" for q in range(5)] and all(len(d) == 10 for d in run.values())
  assert read_run(paths["cand.run"]).keys() == run.keys()


CLI_SCRIPT = textwrap.dedent("""
    import sys
    from t5rank.cli import main
    code = main(sys.argv[1:])
    print("tensorflow" in sys.modules)
    sys.exit(code)
""")


def test_command_end_to_end_on_a_native_checkpoint(tmp_path, model):
  from t5rank.models.t5_weights import save_checkpoint

  config, params = model
  save_checkpoint(str(tmp_path / "ckpt"), params, config)
  (tmp_path / "q.tsv").write_text("1\tcan i cancel my policy?\n2\twhat is a premium?\n")
  long = " ".join(f"You can cancel in writing, reason {i}." for i in range(12))  # 2 windows
  (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(d) for d in [
      {"id": "long", "text": long}, {"id": "short", "text": "A premium is a payment."},
      {"id": "empty", "text": ""}, {"id": "titled", "title": "Premiums", "text": "Paid monthly."},
  ]) + "\n")
  (tmp_path / "cand.tsv").write_text("1\tlong\n1\tshort\n1\tempty\n2\ttitled\n2\tshort\n2\tlong\n")
  output, passages = str(tmp_path / "out.run"), str(tmp_path / "passages.tsv")
  command = [sys.executable, "-c", CLI_SCRIPT, "score", "--checkpoint", str(tmp_path / "ckpt"),
             "--queries", str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.jsonl"),
             "--run", str(tmp_path / "cand.tsv"), "--output", output, "--max-length", "64",
             "--batch-tokens", "512", "--per-passage-output", passages, "--tag", "mono",
             "--cpu-devices", "3"]  # each batch split over 3 CPU devices
  done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stderr
  wrote, mesh = done.stdout.splitlines()
  assert wrote.startswith(f"wrote 6 documents for 2 queries to {output} in ") and mesh == "False"
  assert wrote.endswith(" pairs/s, start-up and compilation included)")

  lines = [line.split() for line in open(output)]
  assert [(l[0], l[3], l[5]) for l in lines] == [
      ("1", "1", "mono"), ("1", "2", "mono"), ("1", "3", "mono"),
      ("2", "1", "mono"), ("2", "2", "mono"), ("2", "3", "mono")]
  for qid in ("1", "2"):
    ranked = [(-float(l[4]), l[2]) for l in lines if l[0] == qid]
    assert ranked == sorted(ranked)  # score descending, then docid ascending
  rows = [line.rstrip("\n").split("\t") for line in open(passages)]
  assert [r[:3] for r in rows] == [["1", "long", "0"], ["1", "long", "1"], ["1", "short", "0"],
                                   ["1", "empty", "0"], ["2", "titled", "0"], ["2", "short", "0"],
                                   ["2", "long", "0"], ["2", "long", "1"]]
  run = read_run(output)
  for qid, docid, window, log_p, p, winner in rows:
    assert np.isclose(float(p), np.exp(float(log_p)), rtol=1e-6)
    if winner == "1":  # MaxP: the document's score is its winning window's
      assert dict(run[qid])[docid] == float(log_p)
  assert sum(r[5] == "1" for r in rows) == 6  # one winner per document

  one_device = str(tmp_path / "one_device.tsv")  # the same scores from one device using all cores
  command[command.index("--cpu-devices") + 1] = "1"
  command[command.index("--per-passage-output") + 1] = one_device
  command[command.index("--output") + 1] = str(tmp_path / "one_device.run")
  done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stderr
  single = [line.rstrip("\n").split("\t") for line in open(one_device)]
  assert [r[:3] for r in single] == [r[:3] for r in rows]
  np.testing.assert_allclose([float(r[3]) for r in single], [float(r[3]) for r in rows], atol=1e-5)

  (tmp_path / "bad.tsv").write_text("1\tlong\n1\tnowhere\n")
  command[command.index("--run") + 1] = str(tmp_path / "bad.tsv")
  command[command.index("--output") + 1] = str(tmp_path / "bad.run")
  command[command.index("--per-passage-output") + 1] = str(tmp_path / "bad.tsv.passages")
  done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 1
  assert "1 candidate(s) name unknown ids: 1 document id(s) missing from" in done.stderr
  assert "'nowhere' (--skip-missing skips them)" in done.stderr


USE_CPU_DEVICES = textwrap.dedent("""
    import logging, sys
    logging.basicConfig()
    from t5rank.ranking.devices import use_cpu_devices
    try:
      use_cpu_devices(0)
    except ValueError as e:
      print("refused:", e)
    print("set", use_cpu_devices(3))
    import jax
    print("devices", jax.local_device_count(), jax.devices()[0].platform)
    print("later", use_cpu_devices(2))  # the backend exists: nothing changes
""")


def test_use_cpu_devices_before_and_after_jax_starts():
  done = subprocess.run([sys.executable, "-c", USE_CPU_DEVICES], capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu"), timeout=120)
  assert done.returncode == 0, done.stderr
  assert done.stdout.splitlines() == [
      "refused: the number of CPU devices must be >= 1, got 0", "set 3", "devices 3 cpu", "later 3"]
  assert "JAX has started with 3 CPU device(s); 2 asked for are not used" in done.stderr
