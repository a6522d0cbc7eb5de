"""`t5rank serve` under load on loopback, against `t5rank score`'s offline rate on the same pairs.

    .venv/bin/python benchmarks/serve_load.py                       # 60 s a phase, ~5 minutes
    .venv/bin/python benchmarks/serve_load.py --seconds 20 --overload-seconds 10   # a short check

Requests are real InsuranceQA text: test queries, each with 20 to 100 of its pool's answers (drawn
with a fixed seed) and their BM25 scores (`t5rank.retrieval.bm25.BM25` over the pools' answers,
Anserini's k1 0.9, b 0.4, as the demo), which the shipped monoT5 reads in its input. First the
offline rate: `t5rank.ranking.scorer.score_candidates` (what `t5rank score` runs) over the pairs
of the first --offline-requests requests, once to compile and once timed. Then the script starts
`t5rank serve` itself (127.0.0.1, a free port, --max-queue 3200: what 32 clients of 100 texts can
hold), and for each --clients count runs that many clients, each sending its next request as soon
as it has the answer to the last, for --seconds (and at most --max-requests requests): pairs/s of
the answered requests against the offline rate, median and 99th-percentile latency, requests
failed (any answer but 200) or lost (no answer). Past the queue limit (--overload-clients, by
default twice what the queue holds) the only refusals must be 503 with Retry-After (clients wait
50 ms after one). Then SIGTERM, and the server's exit status. Clients and server share this
machine's cores. Prints a Markdown table with the command, the date and the CPU.

Two more commands load what a hostile or broken client does (#67), each against its own server:

    .venv/bin/python benchmarks/serve_load.py slow      # ~2 minutes
    .venv/bin/python benchmarks/serve_load.py bodies    # ~1 minute, 1 GB of loopback traffic

`slow`: one client sends InsuranceQA requests one after another for --seconds alone, then for
--seconds while another process holds --idle connections that send nothing and --trickling ones
that send a request head a byte a second (each reopened as soon as the server closes it, at most
--max-connects in all), with /health asked twice a second: the client's median and p99 latency in
both phases, every status it and /health got, and how the server closed the attacker's connections
(its /metrics). Server flags after the command go to `t5rank serve` (e.g. --max-connections 2048).
`bodies`: --bodies clients at once send a body past --max-body-bytes three ways: its
Content-Length says so, it is streamed in chunks without one, or it is just under the limit but
one text longer than --max-chars (read and parsed before it is refused); the server's resident
memory is sampled every 10 ms (/proc/PID/status): its peak in each phase, against its size before.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import multiprocessing
import os
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np

SEED = 0


def insuranceqa_requests(num_queries: int, texts: tuple[int, int], seed: int = SEED) -> list[dict]:
  """/rerank bodies: each of the first `num_queries` InsuranceQA test queries with texts[0] to
  texts[1] answers of its pool (a seeded draw) and their BM25 scores, raw scores asked for."""
  from t5rank.data.insuranceqa import load_split
  from t5rank.data.readers import Document
  from t5rank.retrieval.bm25 import BM25

  split = load_split("test", "en", num_queries)
  corpus = {d: Document(split.answers[d]) for d in sorted({d for pool in split.pools.values()
                                                          for d in pool}, key=int)}
  run = BM25.open(corpus, None).retrieve(split.queries, k=1000, candidates={
      q: [(d, 0.0) for d in pool] for q, pool in split.pools.items()})
  rng = np.random.default_rng(seed)
  bodies = []
  for qid, docs in run.items():
    n = min(len(docs), int(rng.integers(texts[0], texts[1] + 1)))
    chosen = [docs[i] for i in sorted(rng.choice(len(docs), n, replace=False))]
    bodies.append({"query": split.queries[qid], "texts": [corpus[d].text for d, _ in chosen],
                   "first_stage_scores": [s for _, s in chosen], "raw_scores": True})
  return bodies


def offline_rate(checkpoint: str, bodies: list[dict], server_args: list[str]) -> dict:
  """`t5rank score`'s rate on the pairs of `bodies` (`score_candidates`, whole texts as the
  server scores them; compiled by a first run, the second timed): pairs, seconds, pairs/s."""
  from t5rank.checkpoints.locate import local_path
  from t5rank.models.loading import load_reranker
  from t5rank.data.readers import Document
  from t5rank.ranking.scorer import ScoringOptions, score_candidates

  options = {"dtype": None, "batch_tokens": None}
  for name in options:  # the server's --dtype and --batch-tokens, when given
    flag = "--" + name.replace("_", "-")
    if flag in server_args:
      options[name] = server_args[server_args.index(flag) + 1]
  reranker, params = load_reranker(local_path(checkpoint), options={"dtype": options["dtype"]})
  queries = {f"r{i}": b["query"] for i, b in enumerate(bodies)}
  corpus = {f"r{i}d{j}": Document(t) for i, b in enumerate(bodies)
            for j, t in enumerate(b["texts"])}
  candidates = {f"r{i}": [(f"r{i}d{j}", s) for j, s in enumerate(b["first_stage_scores"])]
                for i, b in enumerate(bodies)}
  scoring = ScoringOptions(window=0, batch_tokens=int(options["batch_tokens"] or 0) or None,
                           precision="bfloat16" if options["dtype"] == "bfloat16" else "float32")
  with tempfile.TemporaryDirectory() as work:
    for attempt in range(2):
      started = time.perf_counter()
      score_candidates(reranker, params, queries=queries, corpus=corpus, candidates=candidates,
                       output=f"{work}/run{attempt}", options=scoring, progress=False)
      seconds = time.perf_counter() - started
  pairs = sum(map(len, candidates.values()))
  return {"pairs": pairs, "seconds": seconds, "rate": pairs / seconds}


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def start_server(checkpoint: str, args: list[str], log: str, timeout: float) -> tuple:
  """`t5rank serve` in a new process on 127.0.0.1 and a free port: (process, url, seconds until
  /health said ready)."""
  import requests

  port = free_port()
  argv = [sys.executable, "-m", "t5rank.cli", "serve", "--checkpoint", checkpoint, "--port",
          str(port), *args]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get(
      "PYTHONPATH")])))
  started = time.perf_counter()
  process = subprocess.Popen(argv, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
  url = f"http://127.0.0.1:{port}"
  while True:
    if process.poll() is not None:
      raise RuntimeError(f"t5rank serve exited {process.returncode}: "
                         f"{open(log).read()[-1500:]}")
    try:
      if requests.get(url + "/health", timeout=5).status_code == 200:
        return process, url, time.perf_counter() - started
    except requests.ConnectionError:
      pass
    if time.perf_counter() - started > timeout:
      process.kill()
      raise RuntimeError(f"t5rank serve was not ready in {timeout:.0f} s")
    time.sleep(0.2)


def stop_server(process: subprocess.Popen, log: str) -> tuple:
  """SIGTERM, then (exit status, the log's tail)."""
  process.send_signal(signal.SIGTERM)
  try:
    status = process.wait(120)
  except subprocess.TimeoutExpired:
    process.kill()
    status = "killed after 120 s"
  return status, open(log).read()[-2000:]


def load_phase(url: str, bodies: list[dict], clients: int, seconds: float, max_requests: int,
               back_off: float = 0.05) -> dict:
  """`clients` threads, each sending its next body as soon as it has the last answer, for
  `seconds` (at most `max_requests` requests in all): counts, pairs/s and latencies."""
  import requests

  lock = threading.Lock()
  sent = [0]
  latencies, statuses, pairs = [], {}, [0]
  retry_after_missing, lost = [0], [0]
  deadline = time.perf_counter() + seconds

  def client(k: int) -> None:
    session = requests.Session()
    i = k * 7919
    while time.perf_counter() < deadline:
      with lock:
        if sent[0] >= max_requests:
          return
        sent[0] += 1
      body = bodies[i % len(bodies)]
      i += 1
      started = time.perf_counter()
      try:
        response = session.post(url + "/rerank", json=body, timeout=300)
      except requests.RequestException:
        with lock:
          lost[0] += 1
        continue
      took = time.perf_counter() - started
      with lock:
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code == 200:
          latencies.append(took)
          pairs[0] += len(body["texts"])
        elif response.status_code == 503 and "Retry-After" not in response.headers:
          retry_after_missing[0] += 1
      if response.status_code == 503:
        time.sleep(back_off)

  started = time.perf_counter()
  threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  wall = time.perf_counter() - started
  ms = np.array(latencies) * 1000
  return {"clients": clients, "requests": sent[0], "answered": statuses.get(200, 0),
          "pairs": pairs[0], "seconds": wall, "rate": pairs[0] / wall,
          "median_ms": float(np.median(ms)) if ms.size else float("nan"),
          "p99_ms": float(np.percentile(ms, 99)) if ms.size else float("nan"),
          "max_ms": float(ms.max()) if ms.size else float("nan"),
          "statuses": statuses, "lost": lost[0], "retry_after_missing": retry_after_missing[0]}


def measure(checkpoint: str = "shipped:monot5", *, clients=(1, 8, 32), seconds: float = 60,
            overload_clients: Optional[int] = None, overload_seconds: float = 20,
            queries: int = 300,
            texts: tuple[int, int] = (20, 100), offline_requests: int = 100,
            max_requests: int = 100_000, max_queue: int = 3200,
            server_args: tuple[str, ...] = (), start_timeout: float = 600,
            on_row: Optional[Callable[[dict], None]] = None) -> dict:
  """The whole measurement (module docstring): {"offline", "ready_s", "phases": [...],
  "overload", "exit"}; `on_row(phase)` as each phase ends. `overload_clients` None: twice the
  clients the queue holds (2 x max_queue / the mean texts of a request)."""
  from t5rank.ranking.devices import use_cpu_devices

  use_cpu_devices(None)  # before anything starts JAX: the offline rate on the server's devices
  server_args = ["--max-queue", str(max_queue), *server_args]
  bodies = insuranceqa_requests(queries, texts)
  offline = offline_rate(checkpoint, bodies[:offline_requests], server_args)
  result = {"offline": offline, "phases": [], "requests": len(bodies),
            "mean_texts": float(np.mean([len(b["texts"]) for b in bodies]))}
  with tempfile.TemporaryDirectory() as work:
    process, url, result["ready_s"] = start_server(checkpoint, server_args, f"{work}/serve.log",
                                                   start_timeout)
    try:
      for n in clients:
        phase = load_phase(url, bodies, n, seconds, max_requests)
        phase["vs_offline"] = phase["rate"] / offline["rate"]
        result["phases"].append(phase)
        if on_row:
          on_row(phase)
      if overload_clients is None:
        overload_clients = int(np.ceil(2 * max_queue / result["mean_texts"]))
      if overload_clients:
        result["overload"] = load_phase(url, bodies, overload_clients, overload_seconds,
                                        max_requests)
        if on_row:
          on_row(result["overload"])
    finally:
      result["exit"], result["log_tail"] = stop_server(process, f"{work}/serve.log")
  return result


SLOW_HEAD = b"POST /rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 4096


def hold_connections(port: int, idle: int, trickling: int, seconds: float, max_connects: int,
                     report) -> None:
  """(A process of its own.) Holds `idle` connections that send nothing and `trickling` ones that
  send SLOW_HEAD a byte a second to 127.0.0.1:`port` for `seconds`, each reopened as soon as the
  server closes it while fewer than `max_connects` were opened; puts "ready", then the counts, on
  `report`."""
  selector, counts, sent = selectors.DefaultSelector(), collections.Counter(), {}

  def connect(kind: str) -> None:
    sock = socket.socket()
    sock.setblocking(False)
    sock.connect_ex(("127.0.0.1", port))
    selector.register(sock, selectors.EVENT_READ, kind)
    sent[sock] = 0
    counts["connects"] += 1

  for kind, n in (("idle", idle), ("trickling", trickling)):
    for _ in range(n):
      connect(kind)
  report.put("ready")
  deadline, next_byte = time.monotonic() + seconds, time.monotonic()
  while time.monotonic() < deadline:
    for key, _ in selector.select(0.05):
      sock, kind = key.fileobj, key.data
      try:
        data = sock.recv(4096)
      except BlockingIOError:
        continue
      except OSError:
        data = b""
      if data:  # the server's answer before it closes: count its status
        counts[f"{kind} answered {data[9:12].decode(errors='replace')}"] += 1
        continue
      selector.unregister(sock)
      sock.close()
      del sent[sock]
      counts[f"{kind} closed by the server"] += 1
      if counts["connects"] < max_connects:
        connect(kind)
      elif "bound reached after s" not in counts:
        counts["bound reached after s"] = round(seconds - (deadline - time.monotonic()), 1)
    counts["most open"] = max(counts["most open"], len(sent))
    if time.monotonic() >= next_byte:  # a byte of the head on each trickling connection
      next_byte += 1
      for key in list(selector.get_map().values()):
        if key.data == "trickling":
          try:
            key.fileobj.send(SLOW_HEAD[sent[key.fileobj]:sent[key.fileobj] + 1])
            sent[key.fileobj] += 1
          except OSError:
            pass
  for sock in sent:
    sock.close()
  report.put(dict(counts))


def health_probe(url: str, stop: threading.Event, statuses: collections.Counter) -> None:
  """Asks /health twice a second until `stop`; counts its statuses (or "no answer")."""
  import requests

  while not stop.wait(0.5):
    try:
      statuses[requests.get(url + "/health", timeout=10).status_code] += 1
    except requests.RequestException:
      statuses["no answer"] += 1


def metric_values(url: str, name: str) -> dict:
  """{labels: value} of metric `name` in the server's /metrics."""
  import requests
  from prometheus_client.parser import text_string_to_metric_families

  values = {}
  for family in text_string_to_metric_families(requests.get(url + "/metrics").text):
    for sample in family.samples:
      if sample.name == name:
        values[",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))] = sample.value
  return values


def slow_clients(checkpoint: str = "shipped:monot5", *, idle: int = 600, trickling: int = 600,
                 seconds: float = 30, queries: int = 50, texts: tuple[int, int] = (20, 100),
                 max_connects: int = 300_000, server_args: tuple[str, ...] = (),
                 start_timeout: float = 600) -> dict:
  """The `slow` command (module docstring): {"alone", "attacked" (load_phase's), "health",
  "attacker", "closed", "exit"}."""
  bodies = insuranceqa_requests(queries, texts)
  result = {}
  with tempfile.TemporaryDirectory() as work:
    log = f"{work}/serve.log"
    process, url, result["ready_s"] = start_server(checkpoint, list(server_args), log,
                                                   start_timeout)
    try:
      result["alone"] = load_phase(url, bodies, 1, seconds, 100_000)
      report = multiprocessing.get_context("spawn").Queue()
      attacker = multiprocessing.get_context("spawn").Process(target=hold_connections, args=(
          int(url.rsplit(":", 1)[1]), idle, trickling, seconds + 2, max_connects, report))
      attacker.start()
      assert report.get(timeout=60) == "ready"
      stop, health = threading.Event(), collections.Counter()
      prober = threading.Thread(target=health_probe, args=(url, stop, health))
      prober.start()
      result["attacked"] = load_phase(url, bodies, 1, seconds, 100_000)
      stop.set()
      prober.join()
      result["health"] = dict(health)
      result["attacker"] = report.get(timeout=60)
      attacker.join(30)
      result["closed"] = metric_values(url, "t5rank_connections_closed_total")
    finally:
      result["exit"], result["log_tail"] = stop_server(process, log)
  return result


def resident_bytes(pid: int) -> int:
  """A process's resident memory now (VmRSS), in bytes."""
  with open(f"/proc/{pid}/status") as f:
    for line in f:
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) * 1024
  return 0


def send_body(port: int, kind: str, limit: int, payload: bytes) -> str:
  """One oversize body of `kind` (module docstring) to /rerank: the status the server answered
  (or "no answer")."""
  head = b"POST /rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
  answer = b""
  with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
    try:
      if kind == "declared":
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % (limit + 1) + payload[:65536])
      elif kind == "streamed":
        sock.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
        step = 1 << 20
        for start in range(0, len(payload), step):
          piece = payload[start:start + step]
          sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
      else:
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    except OSError:
      pass  # the server refused and closed before the whole body was sent
    try:
      while chunk := sock.recv(65536):
        answer += chunk
        if b"\r\n\r\n" in answer and b"connection: close" not in answer.lower():
          break
    except OSError:
      pass
  return answer[9:12].decode() if answer.startswith(b"HTTP/1.1") else "no answer"


def big_bodies(checkpoint: str = "shipped:monot5", *, bodies: int = 16,
               server_args: tuple[str, ...] = (), start_timeout: float = 600) -> dict:
  """The `bodies` command (module docstring): {"limit", "baseline", "phases": [{"kind",
  "statuses", "peak", "seconds"}], "exit"}."""
  import requests

  result = {"phases": []}
  with tempfile.TemporaryDirectory() as work:
    log = f"{work}/serve.log"
    process, url, result["ready_s"] = start_server(checkpoint, list(server_args), log,
                                                   start_timeout)
    try:
      info = requests.get(url + "/info").json()
      limit, max_chars = info["limits"]["max_body_bytes"], info["limits"]["max_chars"]
      result["limit"] = limit
      port = int(url.rsplit(":", 1)[1])
      text = "a" * (limit - 100)  # one text past --max-chars, in a body just under the limit
      parsed = json.dumps({"query": "q", "texts": [text]}).encode()
      streamed = parsed[:-3] + b"a" * (8 << 20)  # past the limit by 8 MB
      assert len(parsed) <= limit < len(streamed) and len(text) > max_chars
      result["baseline"] = resident_bytes(process.pid)
      for kind, payload in (("declared", parsed), ("streamed", streamed), ("parsed", parsed)):
        peak, done = [resident_bytes(process.pid)], threading.Event()

        def sample() -> None:
          while not done.wait(0.01):
            peak[0] = max(peak[0], resident_bytes(process.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        statuses, lock, start = collections.Counter(), threading.Lock(), threading.Barrier(bodies)

        def client() -> None:
          start.wait()
          status = send_body(port, kind, limit, payload)
          with lock:
            statuses[status] += 1

        started = time.perf_counter()
        clients = [threading.Thread(target=client) for _ in range(bodies)]
        for thread in clients:
          thread.start()
        for thread in clients:
          thread.join()
        seconds = time.perf_counter() - started
        time.sleep(0.5)
        done.set()
        sampler.join()
        result["phases"].append({"kind": kind, "statuses": dict(statuses), "peak": peak[0],
                                 "seconds": seconds})
      result["health"] = requests.get(url + "/health").status_code
    finally:
      result["exit"], result["log_tail"] = stop_server(process, log)
  return result


def table(result: dict, command: str) -> str:
  """The Markdown report of `measure`'s result."""
  import jax

  from t5rank.benchmarking import cpu

  offline = result["offline"]
  lines = [f"`{command}`", "",
           f"{datetime.date.today().isoformat()}; CPU: {cpu()}; jax {jax.__version__} on "
           f"{jax.devices()[0].platform}; {result['requests']} requests of "
           f"{result['mean_texts']:.0f} texts on average; server ready in "
           f"{result['ready_s']:.1f} s; exit status after SIGTERM: {result['exit']}", "",
           f"Offline (`t5rank score`'s score_candidates, warm): {offline['pairs']} pairs in "
           f"{offline['seconds']:.1f} s = {offline['rate']:.0f} pairs/s", "",
           "| clients | requests | answered | pairs/s | vs offline | median ms | p99 ms | failed "
           "| lost | 503 |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  phases = result["phases"] + ([dict(result["overload"], overload=True)]
                               if "overload" in result else [])
  for p in phases:
    failed = sum(n for status, n in p["statuses"].items() if status != 200)
    refused = p["statuses"].get(503, 0)
    label = f"{p['clients']} (past the queue)" if p.get("overload") else str(p["clients"])
    vs = f"{p['rate'] / offline['rate']:.0%}"
    with_retry = " (all with Retry-After)" if refused and not p["retry_after_missing"] else ""
    lines.append(f"| {label} | {p['requests']} | {p['answered']} | {p['rate']:.0f} | {vs} | "
                 f"{p['median_ms']:.0f} | {p['p99_ms']:.0f} | "
                 f"{failed - refused if p.get('overload') else failed} | {p['lost']} | "
                 f"{refused}{with_retry} |")
  return "\n".join(lines)


def heading(command: str) -> str:
  from t5rank.benchmarking import cpu

  return (f"`{command}`\n\n{datetime.date.today().isoformat()}; CPU: {cpu()}; clients and "
          "server on this machine's cores")


def slow_table(result: dict, command: str) -> str:
  """The Markdown report of `slow_clients`' result."""
  rows = ["| client | requests | 200 | other answers | lost | median ms | p99 ms | max ms |",
          "| --- " * 8 + "|"]
  for label, phase in (("alone", result["alone"]), ("with the attack", result["attacked"])):
    other = {k: v for k, v in phase["statuses"].items() if k != 200} or ""
    rows.append(f"| {label} | {phase['requests']} | {phase['answered']} | {other} | "
                f"{phase['lost']} | {phase['median_ms']:.0f} | {phase['p99_ms']:.0f} | "
                f"{phase['max_ms']:.0f} |")
  return "\n".join([heading(command), "", *rows, "",
                    f"/health during the attack: {result['health']}; the attacker: "
                    f"{result['attacker']}; closed by the server: {result['closed']}; exit "
                    f"status after SIGTERM: {result['exit']}"])


def bodies_table(result: dict, command: str) -> str:
  """The Markdown report of `big_bodies`' result."""
  mb = 1 << 20
  rows = [f"--max-body-bytes {result['limit']} ({result['limit'] / mb:.0f} MiB); server resident "
          f"before: {result['baseline'] / mb:.0f} MiB; /health after: {result['health']}; exit "
          f"status after SIGTERM: {result['exit']}", "",
          "| bodies at once | how | answers | seconds | peak resident | above before |",
          "| --- " * 6 + "|"]
  for p in result["phases"]:
    rows.append(f"| {sum(p['statuses'].values())} | {p['kind']} | {p['statuses']} | "
                f"{p['seconds']:.1f} | {p['peak'] / mb:.0f} MiB | "
                f"{(p['peak'] - result['baseline']) / mb:.0f} MiB |")
  return "\n".join([heading(command), "", *rows])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("command", nargs="?", choices=("load", "slow", "bodies"), default="load")
  parser.add_argument("--checkpoint", default="shipped:monot5")
  parser.add_argument("--clients", default="1,8,32", help="concurrent clients of each phase")
  parser.add_argument("--seconds", type=float, help="each phase's duration (default: 60; slow: 30)")
  parser.add_argument("--overload-clients", type=int,
                      help="clients of the phase past the queue limit (default: twice what the "
                           "queue holds; 0: no such phase)")
  parser.add_argument("--overload-seconds", type=float, default=20)
  parser.add_argument("--queries", type=int, help="InsuranceQA test queries (300; slow: 50)")
  parser.add_argument("--texts", default="20,100", help="texts a request, MIN,MAX")
  parser.add_argument("--offline-requests", type=int, default=100,
                      help="requests whose pairs give the offline rate")
  parser.add_argument("--max-requests", type=int, default=100_000, help="a phase's bound")
  parser.add_argument("--max-queue", type=int, default=3200, help="the server's --max-queue")
  parser.add_argument("--idle", type=int, default=600, help="slow: connections sending nothing")
  parser.add_argument("--trickling", type=int, default=600,
                      help="slow: connections sending a head a byte a second")
  parser.add_argument("--max-connects", type=int, default=300_000,
                      help="slow: connections the attacker opens, at most")
  parser.add_argument("--bodies", type=int, default=16, help="bodies: bodies sent at once")
  parser.add_argument("--table", help="also write the table to this file")
  args, server_args = parser.parse_known_args()  # the rest goes to `t5rank serve`
  low, high = (int(x) for x in args.texts.split(","))
  command = "python benchmarks/serve_load.py " + shlex.join(sys.argv[1:])

  def show(phase: dict) -> None:
    print(f"{phase['clients']} clients: {phase['answered']} of {phase['requests']} answered, "
          f"{phase['rate']:.0f} pairs/s, median {phase['median_ms']:.0f} ms, p99 "
          f"{phase['p99_ms']:.0f} ms, statuses {phase['statuses']}, lost {phase['lost']}",
          flush=True)

  if args.command == "slow":
    result = slow_clients(args.checkpoint, idle=args.idle, trickling=args.trickling,
                          seconds=args.seconds or 30, queries=args.queries or 50,
                          texts=(low, high), max_connects=args.max_connects,
                          server_args=tuple(server_args))
    report = slow_table(result, command)
  elif args.command == "bodies":
    report = bodies_table(big_bodies(args.checkpoint, bodies=args.bodies,
                                     server_args=tuple(server_args)), command)
  else:
    result = measure(args.checkpoint, clients=[int(c) for c in args.clients.split(",")],
                     seconds=args.seconds or 60, overload_clients=args.overload_clients,
                     overload_seconds=args.overload_seconds, queries=args.queries or 300,
                     texts=(low, high), offline_requests=args.offline_requests,
                     max_requests=args.max_requests, max_queue=args.max_queue,
                     server_args=tuple(server_args), on_row=show)
    report = table(result, command)
  print(report)
  if args.table:
    with open(args.table, "w") as f:
      f.write(report + "\n")


if __name__ == "__main__":
  main()
