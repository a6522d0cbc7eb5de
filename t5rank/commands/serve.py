"""`t5rank serve`: a reranking service over HTTP; the server is in `t5rank.serving`.

    t5rank serve --checkpoint shipped:tk --port 8080
    curl -s localhost:8080/rerank -H 'Content-Type: application/json' \\
      -d '{"query": "what is term life", "texts": ["Term life lasts 20 years.", "Car cover."]}'

POST /rerank (text-embeddings-inference's shape), POST /v1/rerank (Cohere's, with Jina's `model`
and `usage`), GET /health (200 once every batch shape is compiled), GET /info, GET /metrics
(Prometheus). Requests that arrive together are scored together; each answer is what `t5rank
score` gives its texts. Only requests for the hosts it serves (--allowed-hosts) with a JSON body
are answered; with an API key (T5RANK_API_KEY, or --api-key) every route but /health needs
`Authorization: Bearer KEY`. docs/serving.md has the clients, the limits and the deployment.
"""

from __future__ import annotations

import argparse
import logging

from t5rank.commands import positive_int
from t5rank.commands.score import parse_targets
from t5rank.ranking import options


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("serve", help="serve a reranker over HTTP (TEI's /rerank, Cohere's "
                            "/v1/rerank)", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--checkpoint", required=True,
                 help="a checkpoint path in any format t5rank reads, shipped:NAME, or a Hugging "
                      "Face Hub id ORG/NAME[@REVISION]")
  p.add_argument("--host", default="127.0.0.1",
                 help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for "
                      "every interface, behind a proxy that authenticates: there is no "
                      "authentication here)")
  p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
  model = p.add_argument_group("the model and its scoring (t5rank score's options; one default "
                               "differs: --window)")
  options.add_arguments(model, "service")
  limits = p.add_argument_group("limits")
  limits.add_argument("--max-texts", type=positive_int, default=1000,
                      help="texts in one request, at most (413 past it; default 1000)")
  limits.add_argument("--max-chars", type=positive_int, default=10_000,
                      help="characters of one text or query, at most (413 past it; default 10000)")
  limits.add_argument("--max-queue", type=positive_int, default=4096,
                      help="texts admitted and not yet answered, over all requests (503 with "
                           "Retry-After past it; default 4096)")
  limits.add_argument("--max-batch-pairs", type=positive_int, default=1024,
                      help="model inputs scored in one step, over the requests it takes (at "
                           "least one request; default 1024)")
  limits.add_argument("--max-wait-ms", type=float, default=5.0,
                      help="how long a step waits for more requests once one is queued "
                           "(default 5)")
  limits.add_argument("--max-connections", type=positive_int, default=512,
                      help="open connections, at most: past it the longest-waiting one without a "
                           "whole request is closed to make room, and only when every one has a "
                           "request being answered is the new one answered 503 (default 512)")
  limits.add_argument("--request-timeout", type=float, default=10.0, metavar="SECONDS",
                      help="a request must arrive whole within this many seconds of its first "
                           "byte (408 and closed past it); a connection with no request is closed "
                           "after min(5, this); past --max-connections the longest-waiting "
                           "connection without a whole request makes room (default 10)")
  limits.add_argument("--drain-seconds", type=float, default=30.0,
                      help="after SIGTERM, how long the requests in flight may take (default 30)")
  access = p.add_argument_group("who may call it")
  access.add_argument("--allowed-hosts", metavar="NAME,...",
                      help="Host header names the server answers, comma-separated, any port; * "
                           "for any (default: the --host address, localhost, 127.0.0.1, [::1]; a "
                           "web page reaching the server under another name, by DNS rebinding, "
                           "is refused)")
  access.add_argument("--api-key", metavar="KEY",
                      help="require `Authorization: Bearer KEY` on every route but /health "
                           "(default: the environment variable T5RANK_API_KEY, which keeps the key "
                           "out of `ps`; none: no key)")
  access.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                      help="a browser origin (https://app.example) allowed to call the server "
                           "from its pages; repeat for several (default: none)")
  p.add_argument("--access-log", action="store_true", help="log every request (uvicorn's log)")
  p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
  import t5rank
  from t5rank.serving import Limits, serve

  logging.basicConfig(level=logging.WARNING,
                      format="%(asctime)s %(levelname)s %(name)s: %(message)s")
  for name in ("t5rank", "uvicorn"):
    logging.getLogger(name).setLevel(logging.INFO)
  import math
  import os

  limits = Limits(max_texts=args.max_texts, max_chars=args.max_chars)  # before the model loads
  for flag, value in (("--max-wait-ms", args.max_wait_ms), ("--drain-seconds", args.drain_seconds)):
    if not math.isfinite(value) or value < 0:
      raise ValueError(f"{flag} must be a finite number >= 0, got {value}")
  api_key = args.api_key or os.environ.get("T5RANK_API_KEY") or None
  hosts = [h.strip() for h in args.allowed_hosts.split(",") if h.strip()] if args.allowed_hosts \
      else None
  if args.host not in ("127.0.0.1", "localhost", "::1") and not api_key:
    logging.getLogger(__name__).warning(
        "serving on %s without an API key: anything that reaches this address can use the "
        "model; set T5RANK_API_KEY (or --api-key)", args.host)
  if not 0 <= args.port < 65536:
    raise ValueError(f"--port must be a port number (0 to 65535), got {args.port}")
  ranker = t5rank.load(
      args.checkpoint, reranker=args.reranker, dtype=args.dtype, precision=args.precision,
      batch_tokens=args.batch_tokens, window=args.window, stride=args.stride,
      passages=args.passages, language=args.language, depth=args.depth,
      aggregate=args.aggregate, targets=parse_targets(args.targets) if args.targets else None,
      vocab=args.vocab, max_length=args.max_length, bm25_in_input=args.bm25_in_input,
      truncation=args.truncation, config=args.config, length_bucket=args.length_bucket, mesh=args.mesh)
  return serve(ranker, host=args.host, port=args.port, limits=limits, max_queue=args.max_queue,
               max_batch_pairs=args.max_batch_pairs, max_wait_ms=args.max_wait_ms,
               max_connections=args.max_connections, drain_seconds=args.drain_seconds,
               access_log=args.access_log, allowed_hosts=hosts, api_key=api_key,
               cors_origins=args.cors_origin, request_timeout=args.request_timeout)
