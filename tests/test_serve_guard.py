"""`t5rank serve` where a browser or a network can reach it (#67 items 1, 3, 4, 5, 6, 7, 8): the
Host it answers, the API key, JSON bodies only, CORS only when asked, bodies bounded and the
connection closed past them, refusals in t5rank's JSON, /health while the worker lives, /metrics,
Jina's answer fields, ties in input order, a warm-up that plans only what a request can bring."""

from __future__ import annotations

import math
import socket

import pytest
import requests

import t5rank
from t5rank.serving import Limits, make_server
from t5rank.serving.guard import default_allowed_hosts, host_name
from t5rank.serving.warmup import warm_up_inputs
from test_serve import OPTIONS, Running, checkpoint, one_line_error  # noqa: F401

KEY = "s3cret-key"


@pytest.fixture(scope="module")
def ranker(checkpoint):  # noqa: F811
  return t5rank.load(checkpoint, **OPTIONS)


@pytest.fixture(scope="module")
def guarded(ranker):
  running = Running(ranker, limits=Limits(max_texts=40, max_chars=2000), api_key=KEY,
                    warm_up=lambda r: {})
  running.wait_ready(30)
  yield running
  running.stop()


AUTH = {"Authorization": f"Bearer {KEY}"}


def test_host_names_without_their_port():
  assert host_name("LocalHost:8080") == "localhost" and host_name("[::1]:9") == "[::1]"
  assert host_name("127.0.0.1") == "127.0.0.1"
  assert default_allowed_hosts("127.0.0.1") == ("localhost", "127.0.0.1", "[::1]", "::1")
  assert "10.0.0.5" in default_allowed_hosts("10.0.0.5")
  assert default_allowed_hosts("0.0.0.0") == ("localhost", "127.0.0.1", "[::1]", "::1")


def test_a_request_for_another_host_is_refused(guarded):
  body = {"query": "q", "texts": ["a", "b"]}
  rebound = requests.post(guarded.url + "/rerank", json=body,
                          headers={**AUTH, "Host": "rebind.attacker.example"})
  one_line_error(rebound, 400, "rebind.attacker.example", "--allowed-hosts")
  port = guarded.url.rsplit(":", 1)[1]
  for host in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]"):
    ok = requests.post(guarded.url + "/rerank", json=body, headers={**AUTH, "Host": host})
    assert ok.status_code == 200, (host, ok.text)


def test_the_api_key_is_needed_everywhere_but_health(guarded):
  body = {"query": "q", "texts": ["a", "b"]}
  for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
    refused = requests.post(guarded.url + "/rerank", json=body, headers=headers)
    one_line_error(refused, 401, "Authorization: Bearer KEY")
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
  one_line_error(requests.get(guarded.url + "/info"), 401, "API key")
  assert requests.get(guarded.url + "/health").status_code == 200
  assert requests.post(guarded.url + "/v1/rerank", json={"query": "q", "documents": ["a"]},
                       headers=AUTH).status_code == 200


def test_a_body_must_be_json_and_no_origin_is_granted(guarded):
  for kind in ("text/plain", "application/x-www-form-urlencoded", None):
    headers = {**AUTH, **({"Content-Type": kind} if kind else {})}
    refused = requests.post(guarded.url + "/rerank", data=b'{"query": "q", "texts": ["a"]}',
                            headers=headers)
    one_line_error(refused, 415, "application/json")
  ok = requests.post(guarded.url + "/rerank", data=b'{"query": "q", "texts": ["a"]}',
                     headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})
  assert ok.status_code == 200
  preflight = requests.options(guarded.url + "/rerank", headers={
      "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
  assert "access-control-allow-origin" not in {k.lower() for k in preflight.headers}


def test_a_named_origin_may_call_it_from_a_browser(ranker):
  running = Running(ranker, cors_origins=["https://app.example"], warm_up=lambda r: {})
  try:
    running.wait_ready(30)
    preflight = requests.options(running.url + "/rerank", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    other = requests.options(running.url + "/rerank", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert other.headers.get("access-control-allow-origin") != "https://evil.example"
  finally:
    running.stop()


def test_an_oversize_body_is_refused_from_its_length_and_the_connection_closed(guarded):
  port = int(guarded.url.rsplit(":", 1)[1])
  with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
    raw.sendall(b"POST /rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + KEY.encode() + b"\r\n"
                b"Content-Length: 100000000\r\n\r\n")
    answer = raw.makefile("rb").read().decode()  # returns: the server closed the connection
  head = answer.partition("\r\n\r\n")[0]
  assert head.startswith("HTTP/1.1 413") and "connection: close" in head.lower(), head


@pytest.mark.parametrize("name, value", [("max_wait_ms", math.inf), ("max_wait_ms", -1),
                                         ("drain_seconds", math.nan)])
def test_limits_that_are_no_finite_number_are_refused_at_start(ranker, name, value):
  with pytest.raises(ValueError, match=f"{name} must be a finite number >= 0"):
    make_server(ranker, **{name: value})


def test_health_says_503_when_the_worker_is_not_running(ranker):
  running = Running(ranker, warm_up=lambda r: {})
  try:
    running.wait_ready(30)
    running.server.service.batcher.close()
    health = requests.get(running.url + "/health")
    assert health.status_code == 503 and "stopped" in health.json()["status"]
  finally:
    running.stop()


def test_metrics_count_requests_steps_and_inputs(guarded):
  for _ in range(3):
    requests.post(guarded.url + "/rerank", json={"query": "q", "texts": ["a", "b", "c"]},
                  headers=AUTH)
  requests.post(guarded.url + "/rerank", json={"query": "q", "texts": ["a"]})  # 401
  one_line_error(requests.get(guarded.url + "/metrics"), 401, "API key")
  text = requests.get(guarded.url + "/metrics", headers=AUTH).text
  assert 't5rank_requests_total{route="/rerank",status="200"}' in text
  assert 't5rank_requests_total{route="/rerank",status="401"}' in text
  assert "t5rank_batch_inputs_count" in text and "t5rank_inputs_scored_total" in text
  assert "t5rank_request_duration_seconds_bucket" in text and "t5rank_queue_texts 0.0" in text
  scored = [float(line.split()[-1]) for line in text.splitlines()
            if line.startswith("t5rank_inputs_scored_total")]
  assert scored and scored[0] >= 9


def test_the_cohere_answer_carries_jinas_model_and_usage(guarded, ranker):
  answer = requests.post(guarded.url + "/v1/rerank", headers=AUTH, json={
      "query": "term life", "documents": ["a term life policy", "car cover"]}).json()
  assert answer["model"] == ranker.checkpoint and answer["results"]
  planned = ranker.plan_ranking("term life", ["a term life policy", "car cover"])
  assert answer["usage"]["total_tokens"] == sum(len(e) for e in planned.examples) > 0


def test_ties_come_back_in_input_order(guarded, ranker):
  texts = ["the same text"] * 12
  assert [r["corpus_id"] for r in ranker.rank("q", texts)] == list(range(12))
  answer = requests.post(guarded.url + "/rerank", headers=AUTH,
                         json={"query": "q", "texts": texts}).json()
  assert [a["index"] for a in answer] == list(range(12))


def test_warm_up_plans_only_what_a_request_can_bring(ranker):
  """At most `max_examples` copies of a text are ever scored (the TK that never became ready
  compiled batches of 65,536)."""
  inputs = warm_up_inputs(ranker, max_examples=40)
  assert inputs and max(len(examples) for examples, _ in inputs) <= 40
  assert all(len({str(e) for e in examples}) == len(examples) for examples, _ in inputs)


SHIPPED_WARM_UP = """
import sys, time
import t5rank
from t5rank.serving.warmup import warm_up
for name in sys.argv[1:]:
    ranker = t5rank.load(f"shipped:{name}")
    started = time.perf_counter()
    report = warm_up(ranker, 1024)
    print(name, time.perf_counter() - started, len(report["shapes"]))
# VmHWM: this program's peak; ru_maxrss would keep the forking pytest worker's across exec
print("peak", next(int(line.split()[1]) for line in open("/proc/self/status")
                   if line.startswith("VmHWM:")))
"""


def test_every_shipped_family_warms_up_within_a_minute_and_4_gb():
  """Item 1: the warm-up of serve's defaults (--max-texts 1000, --max-batch-pairs 1024) for each
  shipped family, in one child: each under 60 s, the child's peak under 4 GB (TK's compiled
  batches of 65,536 texts before and was killed at 24 GB)."""
  import os
  import subprocess
  import sys

  names = ("monot5", "duot5", "tk", "dual_encoder")
  result = subprocess.run([sys.executable, "-c", SHIPPED_WARM_UP, *names], capture_output=True,
                          text=True, timeout=900, env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert result.returncode == 0, result.stderr[-2000:]
  lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
  for name in names:
    seconds, shapes = lines[name].split()
    assert float(seconds) < 60 and int(shapes) > 0, (name, seconds, shapes)
  assert int(lines["peak"]) < 4 << 20  # kB
