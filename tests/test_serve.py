"""`t5rank serve` over HTTP on 127.0.0.1, with a micro monoT5 (random weights, max_length 128,
batch_tokens 512: five batch shapes): both wire shapes; concurrent requests batched together, each
answered with `t5rank score`'s scores of its own texts and nothing compiled after warm-up; every
bad request answered with one line of JSON; 503 with Retry-After past the queue; a client that
leaves is dropped; /health 503 until warm-up; SIGTERM drains and exits 0 (a real process)."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest
import requests

import t5rank
from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.serving import Limits, make_server
from t5rank.serving.wire import relevance as wire_relevance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = dict(max_length=128, batch_tokens=512)
WORDS = "life term policy car accident cover claim premium home rider benefit rate".split()
rng = np.random.default_rng(0)
QUERIES = [" ".join(rng.choice(WORDS, 3 + i % 4)) for i in range(12)]
TEXTS = [[" ".join(rng.choice(WORDS, 2 + (7 * i + 5 * j) % 90)) for j in range(2 + (5 * i) % 17)]
         for i in range(12)]  # 2 to 18 texts a query, 2 to 91 words: both length buckets


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.testing import micro_config, random_params

  path = str(tmp_path_factory.mktemp("serve") / "mono")
  config = micro_config()
  save_checkpoint(path, random_params(config, std=0.5), config)
  return path


@pytest.fixture(scope="module")
def ranker(checkpoint):
  return t5rank.load(checkpoint, **OPTIONS)


class Running:
  """A server in a thread of this process, on a socket bound to 127.0.0.1 and a free port."""

  def __init__(self, ranker, **options):
    self.sock = socket.socket()
    self.sock.bind(("127.0.0.1", 0))
    self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
    self.server = make_server(ranker, **options)
    self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                   daemon=True)
    self.thread.start()
    deadline = time.monotonic() + 30
    while not self.server.started:
      assert time.monotonic() < deadline, "the server did not start"
      time.sleep(0.02)

  def wait_ready(self, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while requests.get(self.url + "/health").status_code != 200:
      assert time.monotonic() < deadline, "warm-up did not finish"
      time.sleep(0.05)

  def stop(self) -> None:
    self.server.should_exit = True
    self.thread.join(30)
    assert not self.thread.is_alive()


@pytest.fixture(scope="module")
def served(ranker):
  running = Running(ranker, limits=Limits(max_texts=40, max_chars=2000), max_wait_ms=100)
  running.wait_ready()
  yield running
  running.stop()


def one_line_error(response, status: int, *words: str) -> str:
  assert response.status_code == status, (response.status_code, response.text)
  assert "\n" not in response.text.strip() and "Traceback" not in response.text
  body = response.json()
  assert list(body) == ["error"], body
  for word in words:
    assert word in body["error"], body["error"]
  return body["error"]


def test_health_is_503_until_every_shape_is_compiled(ranker):
  gate = threading.Event()
  running = Running(ranker, warm_up=lambda r: gate.wait(30) and {"shapes": []})
  try:
    health = requests.get(running.url + "/health")
    assert health.status_code == 503 and health.json() == {"status": "warming up"}
    refused = requests.post(running.url + "/rerank", json={"query": "q", "texts": ["a"]})
    one_line_error(refused, 503, "warming up")
    assert int(refused.headers["Retry-After"]) >= 1
    assert requests.get(running.url + "/info").json()["warm_up"]["ready"] is False
    gate.set()
    running.wait_ready(10)
    assert requests.get(running.url + "/health").json() == {"status": "ok"}
  finally:
    gate.set()
    running.stop()


def test_both_shapes_answer_the_rankers_scores(served, ranker):
  query, texts = QUERIES[0], TEXTS[0]
  expected = ranker.rank(query, texts)
  tei = requests.post(served.url + "/rerank",
                      json={"query": query, "texts": texts, "raw_scores": True}).json()
  assert [r["index"] for r in tei] == [r["corpus_id"] for r in expected]
  np.testing.assert_allclose([r["score"] for r in tei], [r["score"] for r in expected], atol=1e-5)
  normalized = requests.post(served.url + "/rerank",
                             json={"query": query, "texts": texts, "return_text": True}).json()
  assert [r["index"] for r in normalized] == [r["index"] for r in tei]
  np.testing.assert_allclose([r["score"] for r in normalized],
                             [math.exp(r["score"]) for r in tei], rtol=1e-5)  # P(true)
  assert [r["text"] for r in normalized] == [texts[r["index"]] for r in tei]
  cohere = requests.post(served.url + "/v1/rerank", json={
      "model": "ignored", "query": query, "documents": [{"text": t} for t in texts],
      "top_n": 3, "return_documents": True}).json()
  assert [r["index"] for r in cohere["results"]] == [r["index"] for r in tei[:3]]
  np.testing.assert_allclose([r["relevance_score"] for r in cohere["results"]],
                             [r["score"] for r in normalized[:3]], rtol=1e-6)
  assert [r["document"]["text"] for r in cohere["results"]] == [r["text"] for r in normalized[:3]]
  assert cohere["id"] and cohere["meta"]["api_version"]["version"] == "1"
  plain = requests.post(served.url + "/v1/rerank", json={"query": query, "documents": texts})
  assert [set(r) for r in plain.json()["results"]] == [{"index", "relevance_score"}] * len(texts)
  v2 = requests.post(served.url + "/v2/rerank", json={  # what cohere.ClientV2 sends
      "model": "t5rank", "query": query, "documents": texts, "top_n": 2,
      "max_tokens_per_doc": 4000}).json()
  assert v2["results"] == plain.json()["results"][:2]
  assert v2["meta"]["api_version"]["version"] == "2"
  info = requests.get(served.url + "/info").json()
  assert info["family"] == "monot5" and info["model"] == ranker.checkpoint
  assert info["limits"]["max_texts"] == 40 and info["device"].endswith("cpu")
  # max_length 128 in buckets of 64: two lengths, each with its row counts
  assert {tuple(s[0])[1] for s in info["warm_up"]["shapes"]} == {64, 128}


def test_concurrent_requests_are_batched_and_each_gets_its_offline_scores(served, ranker,
                                                                          tmp_path, caplog):
  start, answers = threading.Barrier(len(QUERIES)), [None] * len(QUERIES)

  def client(i: int) -> None:
    start.wait()
    answers[i] = requests.post(served.url + "/rerank", json={
        "query": QUERIES[i], "texts": TEXTS[i], "raw_scores": True}, timeout=60)

  before = requests.get(served.url + "/info").json()["queue"]
  jax.config.update("jax_log_compiles", True)
  try:
    with caplog.at_level(logging.DEBUG):
      threads = [threading.Thread(target=client, args=(i,)) for i in range(len(QUERIES))]
      for thread in threads:
        thread.start()
      for thread in threads:
        thread.join(120)
    compiled = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
  finally:
    jax.config.update("jax_log_compiles", False)
  assert compiled == [], compiled[:3]  # warm-up compiled every shape a request brings
  after = requests.get(served.url + "/info").json()["queue"]
  steps = after["steps"] - before.get("steps", 0)
  assert after["requests"] - before.get("requests", 0) == len(QUERIES)
  assert steps < len(QUERIES), "the requests were not scored together"
  # offline: `t5rank score` over all the queries at once, and rank() alone for each
  (tmp_path / "q.tsv").write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(QUERIES)))
  (tmp_path / "c.tsv").write_text("".join(f"q{i}d{j}\t{t}\n" for i, texts in enumerate(TEXTS)
                                          for j, t in enumerate(texts)))
  (tmp_path / "c.run").write_text("".join(f"q{i} q{i}d{j}\n" for i, texts in enumerate(TEXTS)
                                          for j in range(len(texts))))
  assert cli.main(["score", "--checkpoint", served.server.service.ranker.checkpoint,
                   "--queries", str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"),
                   "--run", str(tmp_path / "c.run"), "--window", "0", "--max-length", "128",
                   "-o", str(tmp_path / "out.run")]) == 0
  offline = read_run(str(tmp_path / "out.run"))
  for i, response in enumerate(answers):
    assert response.status_code == 200, response.text
    got = {r["index"]: r["score"] for r in response.json()}
    alone = {r["corpus_id"]: r["score"] for r in ranker.rank(QUERIES[i], TEXTS[i])}
    scored = {int(d.split("d")[1]): s for d, s in offline[f"q{i}"]}
    assert sorted(got) == list(range(len(TEXTS[i])))
    for j in got:
      assert abs(got[j] - alone[j]) < 1e-5 and abs(got[j] - scored[j]) < 1e-5, (i, j)


@pytest.mark.parametrize("path, body, status, words", [
    ("/rerank", b'{"query": "q", "texts": ["a"', 400, ["not JSON"]),
    ("/rerank", b'\xff\xfe{"query": 1}', 400, ["not UTF-8"]),
    ("/rerank", b"", 400, ["empty"]),
    ("/rerank", b'{"query": "q", "texts": [NaN]}', 400, ["NaN"]),
    ("/rerank", b'["q", ["a"]]', 422, ["JSON object"]),
    ("/rerank", b'{"texts": ["a"]}', 422, ["query", "missing"]),
    ("/rerank", b'{"query": "q", "texts": "a"}', 422, ["texts", "array"]),
    ("/rerank", b'{"query": "q", "texts": []}', 422, ["texts is empty"]),
    ("/rerank", b'{"query": "q", "texts": ["a", 2]}', 422, ["texts[1]", "string"]),
    ("/rerank", b'{"query": "q", "texts": ["a"], "raw_scores": "yes"}', 422, ["raw_scores"]),
    ("/rerank", b'{"query": "q", "texts": ["a"], "first_stage_scores": [1, 2]}', 422,
     ["first_stage_scores", "1 finite"]),
    ("/rerank", b'{"query": "q", "texts": ["\\ud800"]}', 422, ["surrogate"]),
    ("/rerank", json.dumps({"query": "q", "texts": ["a"] * 41}).encode(), 413,
     ["41 texts", "--max-texts 40"]),
    ("/rerank", json.dumps({"query": "q", "texts": ["a" * 2001]}).encode(), 413,
     ["2001 characters", "--max-chars 2000"]),
    ("/rerank", json.dumps({"query": "q" * 2001, "texts": ["a"]}).encode(), 413, ["query"]),
    ("/v1/rerank", b'{"query": "q", "documents": ["a"], "top_n": 0}', 422, ["top_n"]),
    ("/v1/rerank", b'{"query": "q", "documents": [{"title": "a"}]}', 422, ["documents[0]"]),
    ("/v1/rerank", b'{"query": "q", "texts": ["a"]}', 422, ["documents", "missing"]),
    ("/nowhere", b"{}", 404, ["/rerank"]),
])
def test_bad_requests_get_one_line_and_the_worker_lives(served, path, body, status, words):
  response = requests.post(served.url + path, data=body,
                           headers={"Content-Type": "application/json"})
  one_line_error(response, status, *words)
  good = requests.post(served.url + "/rerank", json={"query": "q", "texts": ["a", "b"]})
  assert good.status_code == 200 and len(good.json()) == 2


def test_a_body_past_the_limit_is_refused_before_it_is_read(served):
  port = int(served.url.rsplit(":", 1)[1])
  with socket.create_connection(("127.0.0.1", port)) as raw:
    raw.sendall(b"POST /rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Connection: close\r\nContent-Length: 100000000\r\n\r\n")
    answer = raw.makefile("rb").read().decode()
  head, _, body = answer.partition("\r\n\r\n")
  assert head.startswith("HTTP/1.1 413"), head
  assert json.loads(body)["error"].startswith("the body is larger than 558848 bytes")


def test_a_model_that_reads_bm25_scores_needs_them(checkpoint, served):
  one_line_error(requests.get(served.url + "/rerank"), 405, "GET /rerank")
  reads = t5rank.load(checkpoint, bm25_in_input=True, **OPTIONS)
  running = Running(reads, warm_up=lambda r: {})
  try:
    running.wait_ready(10)
    for path, field in (("/rerank", "texts"), ("/v1/rerank", "documents")):
      one_line_error(requests.post(running.url + path, json={"query": "q", field: ["a", "b"]}),
                     422, "first_stage_scores", "BM25")
    answer = requests.post(running.url + "/rerank", json={
        "query": QUERIES[1], "texts": TEXTS[1][:4], "first_stage_scores": [3, 9.5, 0, 1.25],
        "raw_scores": True}).json()
    expected = reads.rank(QUERIES[1], TEXTS[1][:4], first_stage_scores=[3, 9.5, 0, 1.25])
    assert [r["index"] for r in answer] == [r["corpus_id"] for r in expected]
    np.testing.assert_allclose([r["score"] for r in answer], [r["score"] for r in expected],
                               atol=1e-5)
  finally:
    running.stop()


def test_duot5_requests_batched_together_each_get_their_own_ranking():
  duo = t5rank.load("shipped:duot5", depth=4)
  running = Running(duo, warm_up=lambda r: {}, max_wait_ms=1000)
  try:
    running.wait_ready(10)
    start, answers = threading.Barrier(2), [None, None]
    bodies = [{"query": QUERIES[i], "documents": TEXTS[i][:6], "return_documents": True,
               "first_stage_scores": [float(9 - j) for j in range(6)]} for i in (2, 3)]

    def client(i: int) -> None:
      start.wait()
      answers[i] = requests.post(running.url + "/v1/rerank", json=bodies[i], timeout=60).json()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(60)
    assert running.server.service.batcher.counts["steps"] == 1  # both in one step
    for body, answer in zip(bodies, answers):
      alone = duo.rank(body["query"], body["documents"],
                       first_stage_scores=body["first_stage_scores"])
      assert [r["index"] for r in answer["results"]] == [r["corpus_id"] for r in alone]
      # duoT5's sym-sum over the top 4's pairs; the two below the depth kept in BM25's order
      np.testing.assert_allclose([r["relevance_score"] for r in answer["results"]],
                                 [wire_relevance(r["score"], "duot5") for r in alone], rtol=1e-5)
      assert [r["document"]["text"] for r in answer["results"]] == [
          body["documents"][r["corpus_id"]] for r in alone]
  finally:
    running.stop()


class Gated:
  """`ranker` whose scoring waits for `gate`: a worker kept busy on demand."""

  def __init__(self, ranker, gate: threading.Event):
    self._ranker, self._gate = ranker, gate
    self.entered = threading.Event()

  def __getattr__(self, name):
    return getattr(self._ranker, name)

  def score_examples(self, examples):
    self.entered.set()
    assert self._gate.wait(60)
    return self._ranker.score_examples(examples)


def test_past_the_queue_503_with_retry_after_and_a_client_that_leaves_is_dropped(ranker):
  gate = threading.Event()
  gated = Gated(ranker, gate)
  running = Running(gated, max_queue=4, max_wait_ms=0, warm_up=lambda r: {})
  batcher = running.server.service.batcher
  try:
    running.wait_ready(10)
    first = {}
    thread = threading.Thread(target=lambda: first.update(response=requests.post(
        running.url + "/rerank", json={"query": "q", "texts": ["a", "b", "c"]}, timeout=60)))
    thread.start()
    assert gated.entered.wait(10)  # the worker is scoring the first request
    deadline = time.monotonic() + 10
    # a client that sends one text and leaves while the worker is busy
    body = json.dumps({"query": "q", "texts": ["gone"]}).encode()
    port = int(running.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as leaving:
      leaving.sendall(b"POST /rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
      while batcher.held < 4:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    full = requests.post(running.url + "/v1/rerank", json={"query": "q", "documents": ["d", "e"]})
    one_line_error(full, 503, "queue is full", "--max-queue 4")
    assert 1 <= int(full.headers["Retry-After"]) <= 60
    time.sleep(0.3)  # the server sees the leaving client's connection closed
    gate.set()
    thread.join(30)
    assert first["response"].status_code == 200 and len(first["response"].json()) == 3
    while batcher.held:
      assert time.monotonic() < deadline + 20
      time.sleep(0.01)
    assert batcher.counts["dropped"] == 1 and batcher.counts["requests"] == 1
    again = requests.post(running.url + "/v1/rerank", json={"query": "q", "documents": ["d", "e"]})
    assert again.status_code == 200 and len(again.json()["results"]) == 2
  finally:
    gate.set()
    running.stop()


def test_sigterm_finishes_the_requests_in_flight_then_exits_0(checkpoint, tmp_path):
  with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
  url = f"http://127.0.0.1:{port}"
  process = subprocess.Popen(
      [sys.executable, "-m", "t5rank.cli", "serve", "--checkpoint", checkpoint, "--port",
       str(port), "--max-length", "128", "--batch-tokens", "512", "--max-wait-ms", "0"],
      env=dict(os.environ, PYTHONPATH=ROOT), stdout=open(tmp_path / "log", "w"),
      stderr=subprocess.STDOUT)
  try:
    deadline = time.monotonic() + 120
    while True:
      assert process.poll() is None, (tmp_path / "log").read_text()
      try:
        if requests.get(url + "/health", timeout=5).status_code == 200:
          break
      except requests.ConnectionError:
        pass
      assert time.monotonic() < deadline, "the server did not get ready"
      time.sleep(0.2)
    texts = [" ".join(rng.choice(WORDS, 60)) for _ in range(1000)]
    flight = {}
    thread = threading.Thread(target=lambda: flight.update(response=requests.post(
        url + "/rerank", json={"query": "life cover", "texts": texts}, timeout=120)))
    thread.start()
    while requests.get(url + "/info").json()["queue"]["texts"] == 0:
      assert thread.is_alive() and time.monotonic() < deadline + 30
      time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    try:  # a new request: refused, by the application (503) or by the closed socket
      late = requests.post(url + "/rerank", json={"query": "q", "texts": ["a"]}, timeout=30)
      one_line_error(late, 503, "stopping")
    except requests.ConnectionError:
      pass
    thread.join(120)
    assert flight["response"].status_code == 200
    assert sorted(r["index"] for r in flight["response"].json()) == list(range(1000))
    assert process.wait(60) == 0
    log = (tmp_path / "log").read_text()
    assert "Traceback" not in log, log[-3000:]
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()


def test_a_duot5_request_is_limited_by_its_pairs():
  from t5rank.ranking.duo_pairs import PairJob
  from t5rank.serving.app import most_texts

  assert [most_texts(PairJob.num_inputs, n) for n in (2, 5, 6, 30, 1000)] == [2, 2, 3, 6, 32]
  duo = t5rank.load("shipped:duot5")  # no --depth: every ordered pair of a request's texts
  running = Running(duo, warm_up=lambda r: {}, limits=Limits(max_texts=30, max_chars=2000))
  try:
    running.wait_ready(10)
    body = {"query": QUERIES[2], "documents": TEXTS[2][:7],
            "first_stage_scores": [float(9 - j) for j in range(7)]}
    answer = requests.post(running.url + "/v1/rerank", json=body, timeout=60)
    assert answer.status_code == 413 and "as 42 model inputs" in answer.json()["error"], answer.text
    body = {**body, "documents": TEXTS[2][:6], "first_stage_scores": body["first_stage_scores"][:6]}
    assert requests.post(running.url + "/v1/rerank", json=body, timeout=60).status_code == 200
  finally:
    running.stop()
