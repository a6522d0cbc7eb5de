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
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
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
      process.send_signal(signal.SIGTERM)
      try:
        result["exit"] = process.wait(120)
      except subprocess.TimeoutExpired:
        process.kill()
        result["exit"] = "killed after 120 s"
      result["log_tail"] = open(f"{work}/serve.log").read()[-2000:]
  return result


def cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return f"{names[0]} x {len(names)}" if names else platform.processor()
  except OSError:
    return platform.processor() or "unknown"


def table(result: dict, command: str) -> str:
  """The Markdown report of `measure`'s result."""
  import jax

  offline = result["offline"]
  lines = [f"`{command}`", "",
           f"{datetime.date.today().isoformat()}; CPU: {cpu_model()}; jax {jax.__version__} on "
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


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--checkpoint", default="shipped:monot5")
  parser.add_argument("--clients", default="1,8,32", help="concurrent clients of each phase")
  parser.add_argument("--seconds", type=float, default=60, help="each phase's duration")
  parser.add_argument("--overload-clients", type=int,
                      help="clients of the phase past the queue limit (default: twice what the "
                           "queue holds; 0: no such phase)")
  parser.add_argument("--overload-seconds", type=float, default=20)
  parser.add_argument("--queries", type=int, default=300, help="InsuranceQA test queries")
  parser.add_argument("--texts", default="20,100", help="texts a request, MIN,MAX")
  parser.add_argument("--offline-requests", type=int, default=100,
                      help="requests whose pairs give the offline rate")
  parser.add_argument("--max-requests", type=int, default=100_000, help="a phase's bound")
  parser.add_argument("--max-queue", type=int, default=3200, help="the server's --max-queue")
  parser.add_argument("--table", help="also write the table to this file")
  args, server_args = parser.parse_known_args()  # the rest goes to `t5rank serve`
  low, high = (int(x) for x in args.texts.split(","))

  def show(phase: dict) -> None:
    print(f"{phase['clients']} clients: {phase['answered']} of {phase['requests']} answered, "
          f"{phase['rate']:.0f} pairs/s, median {phase['median_ms']:.0f} ms, p99 "
          f"{phase['p99_ms']:.0f} ms, statuses {phase['statuses']}, lost {phase['lost']}",
          flush=True)

  result = measure(args.checkpoint, clients=[int(c) for c in args.clients.split(",")],
                   seconds=args.seconds, overload_clients=args.overload_clients,
                   overload_seconds=args.overload_seconds, queries=args.queries,
                   texts=(low, high), offline_requests=args.offline_requests,
                   max_requests=args.max_requests, max_queue=args.max_queue,
                   server_args=tuple(server_args), on_row=show)
  report = table(result, "python benchmarks/serve_load.py " + shlex.join(sys.argv[1:]))
  print(report)
  if args.table:
    with open(args.table, "w") as f:
      f.write(report + "\n")


if __name__ == "__main__":
  main()
