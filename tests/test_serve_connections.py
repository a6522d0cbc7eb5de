"""Idle and slow connections (#67 item 2, `t5rank.serving.connections`): a request must arrive whole
within --request-timeout of its first byte (408), a connection with no request is closed, and
past --max-connections idle and trickling clients make room instead of locking a client out;
only when every connection has a request being answered is a newcomer answered 503 as JSON."""

from __future__ import annotations

import json
import socket
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from t5rank.serving import Limits
from test_serve import Running, checkpoint, ranker  # noqa: F401 (fixtures)

KEY = "s3cret-key"


def port_of(running: Running) -> int:
  return int(running.url.rsplit(":", 1)[1])


def exchange(port: int, data: bytes, *, seconds: float = 10) -> tuple[int, dict, bytes, bool]:
  """Sends `data` on a new connection, reads until the server closes it or `seconds` pass:
  (status, headers, body, closed by the server)."""
  with socket.create_connection(("127.0.0.1", port), timeout=seconds) as raw:
    raw.sendall(data)
    answer, closed = b"", False
    try:
      while chunk := raw.recv(65536):
        answer += chunk
      closed = True
    except socket.timeout:
      pass
  head, _, body = answer.partition(b"\r\n\r\n")
  lines = head.decode().split("\r\n")
  headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
  return int(lines[0].split()[1]) if lines[0] else 0, headers, body, closed


def post(path: str, body: bytes, *, host: str = "localhost", kind: str = "application/json",
         extra: str = "") -> bytes:
  return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {kind}\r\n{extra}"
          f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def metric(text: str, name: str, **labels) -> float:
  """The value of sample `name` with `labels` in a /metrics answer (0 when absent)."""
  for family in text_string_to_metric_families(text):
    for sample in family.samples:
      if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
        return sample.value
  return 0.0


BODY = json.dumps({"query": "term life", "texts": ["a term life policy", "car cover"]}).encode()


@pytest.fixture(scope="module")
def guarded(ranker):
  """A server with the API key, a small connection bound and short deadlines."""
  running = Running(ranker, warm_up=lambda r: {}, api_key=KEY, max_connections=10,
                    request_timeout=1.5, cors_origins=["https://app.example"],
                    limits=Limits(max_texts=40, max_chars=2000))
  running.wait_ready(30)
  yield running
  running.stop()


def test_idle_and_trickling_connections_are_closed_and_lock_nobody_out(guarded):
  port = port_of(guarded)
  health = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
  kept = socket.create_connection(("127.0.0.1", port), timeout=5)  # a client's, kept alive
  kept.sendall(health)
  assert kept.recv(4096).startswith(b"HTTP/1.1 200")
  idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]  # past 10
  trickling = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
  started = time.monotonic()
  try:
    kept.sendall(health)  # the new idle ones were closed to make room, not this one
    assert kept.recv(4096).startswith(b"HTTP/1.1 200")
    for s in trickling:
      s.sendall(b"POST /rerank HTTP/1.1\r\nHo")
    for _ in range(5):  # /health and a ranking, each on a new connection, while they are held
      assert requests.get(guarded.url + "/health", timeout=5).status_code == 200
      answer = requests.post(guarded.url + "/rerank", data=BODY, timeout=30, headers={
          "Content-Type": "application/json", "Authorization": f"Bearer {KEY}",
          "Connection": "close"})
      assert answer.status_code == 200 and len(answer.json()) == 2
      for s in trickling:
        try:
          s.sendall(b"s")  # a byte now and then: a per-read timeout would never fire
        except OSError:
          pass
      time.sleep(0.1)
    # every trickler is closed within --request-timeout of its first byte, answered 408 as JSON
    # unless it was closed first to make room (503)
    for s in trickling:
      s.settimeout(5)
      answer = b""
      try:
        while chunk := s.recv(4096):
          answer += chunk
      except ConnectionResetError:
        pass
      assert time.monotonic() - started < 1.5 + 3
      if answer:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split()[1] in (b"408", b"503"), head
        assert b"--request-timeout 1.5" in body or b"--max-connections 10" in body, body
    for s in idle:  # closed to make room, or after min(5, 1.5) s idle
      s.settimeout(5)
      try:
        assert s.recv(1) == b""
      except ConnectionResetError:
        pass
  finally:
    for s in idle + trickling + [kept]:
      s.close()
  text = requests.get(guarded.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
  closed = {r: metric(text, "t5rank_connections_closed_total", reason=r)
            for r in ("idle", "slow", "evicted")}
  assert closed["evicted"] >= 10 and closed["slow"] + closed["evicted"] >= 5, closed


def test_a_slow_body_gets_408_and_a_keep_alive_connection_is_closed_when_idle(guarded):
  port = port_of(guarded)
  head = (f"POST /rerank HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
          f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n").encode()
  status, _, body, closed = exchange(port, head + BODY[:10])
  assert status == 408 and closed
  assert json.loads(body)["error"].startswith("the request was not received whole within "
                                              "--request-timeout 1.5 s")
  with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
    raw.sendall(head + BODY)  # answered, then left idle: closed after 1.5 s
    started, answer = time.monotonic(), b""
    while chunk := raw.recv(65536):
      answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and 1.0 < time.monotonic() - started < 5


def test_503_as_json_when_every_connection_has_a_request_being_answered(ranker):
  from test_serve import Gated
  import threading

  gate = threading.Event()
  gated = Gated(ranker, gate)
  running = Running(gated, warm_up=lambda r: {}, max_connections=2, max_wait_ms=0)
  try:
    running.wait_ready(10)
    port = port_of(running)
    busy = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    for s in busy:
      s.sendall(post("/rerank", BODY))
    assert gated.entered.wait(10)
    time.sleep(0.2)
    status, headers, body, closed = exchange(port, b"GET /health HTTP/1.1\r\nHost: localhost"
                                                   b"\r\n\r\n")
    assert status == 503 and headers["retry-after"] == "1" and closed
    assert "--max-connections 2" in json.loads(body)["error"]
    gate.set()
    for s in busy:
      s.settimeout(30)
      assert s.recv(65536).startswith(b"HTTP/1.1 200")
      s.close()
  finally:
    gate.set()
    running.stop()
