"""The HTTP side of `t5rank serve`: a Starlette application run by uvicorn.

    POST /rerank      text-embeddings-inference's shape  (`t5rank.serving.wire`)
    POST /v1/rerank   Cohere's shape (and POST /v2/rerank, where Cohere's v2 clients send it)
    GET  /health      200 once warm-up has compiled every batch shape, 503 before and while stopping
    GET  /info        the model, its family, dtype and device, the compiled shapes, the limits
    GET  /metrics     Prometheus' text format (`t5rank.serving.metrics`)

Before a route, `t5rank.serving.guard` checks the Host header (`allowed_hosts`), the API key
(every route but /health) and that a POST body is JSON; at most `max_readers` bodies are read and
parsed at once, so that bodies hold at most that many times `Limits.max_body_bytes` of memory.

A request is read (at most `Limits.max_body_bytes`), checked (`wire`), admitted to the batcher's
bounded queue (past it: 503 with Retry-After), planned and encoded in a thread of its own, then
scored with the requests that arrive with it (`t5rank.serving.batcher`). Every refusal and every
failure is a JSON object `{"error": "one line"}`; no endpoint reads or writes a file. SIGTERM (or
Ctrl-C) makes new requests 503, lets uvicorn stop listening and answer the requests in flight, then
`serve` returns 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
import threading
import time
from typing import Callable, Optional, Sequence

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from t5rank.ranking.jobs import job_class
from t5rank.serving import wire
from t5rank.serving.batcher import Batcher, Closed, QueueFull
from t5rank.serving.connections import Connections
from t5rank.serving.guard import Guard, default_allowed_hosts
from t5rank.serving.metrics import Metrics

logger = logging.getLogger(__name__)


class ClientGone(Exception):
  """The client closed its connection before its answer was ready."""


class Service:
  """What the routes share: the ranker, its batcher, the request limits, and `stopping` (set on
  SIGTERM: new requests are refused while those in flight finish)."""

  def __init__(self, ranker, batcher: Batcher, limits: wire.Limits, max_readers: int = 4):
    self.ranker, self.batcher, self.limits = ranker, batcher, limits
    self.stopping = False
    self.started = time.time()
    self.max_readers = max_readers
    self.metrics = Metrics(lambda: batcher.held)
    batcher.on_step = self.metrics.step

  def info(self) -> dict:
    """GET /info's answer."""
    ranker, reranker, batcher = self.ranker, self.ranker.reranker, self.batcher
    return {
        "model": ranker.checkpoint, "family": ranker.family, "description": reranker.describe(),
        "dtype": ranker.dtype, "precision": ranker.options.precision,
        "device": f"{ranker.mesh.devices.size}x{ranker.device}",
        "max_length": getattr(reranker, "max_length", None),
        "reads_first_stage_scores": reranker.reads_first_stage,
        "score": ("log P(relevant); normalized: P" if wire.is_log_probability(ranker.family)
                  else "the model's score, not a log-probability; normalized: sigmoid"),
        "batch_tokens": ranker.batch_tokens, "window": ranker.options.window,
        "depth": ranker.options.depth,
        "warm_up": {"ready": batcher.ready.is_set(), **batcher.warm_up_report},
        "limits": {"max_texts": self.limits.max_texts, "max_chars": self.limits.max_chars,
                   "max_body_bytes": self.limits.max_body_bytes, "max_queue": batcher.max_queue,
                   "max_batch_pairs": batcher.max_batch_pairs,
                   "max_wait_ms": batcher.max_wait * 1000},
        "queue": {"texts": batcher.held, **batcher.counts},
        "uptime_s": round(time.time() - self.started, 1),
    }


def error(status: int, message: str, retry_after: Optional[int] = None) -> JSONResponse:
  """A refusal: {"error": one line}, with Retry-After when given."""
  return JSONResponse({"error": " ".join(str(message).split())}, status_code=status,
                      headers={"Retry-After": str(retry_after)} if retry_after else None)


def make_app(service: Service) -> Starlette:
  """The Starlette application of `service` (module docstring); its lifespan starts the batcher
  (warm-up first) and, at shutdown, lets it finish its queue."""
  ranker, batcher, limits = service.ranker, service.batcher, service.limits
  family = ranker.family
  readers = asyncio.Semaphore(service.max_readers)
  num_inputs = job_class(ranker.reranker).num_inputs

  async def rerank(request: Request, read: Callable, answer: Callable) -> Response:
    if service.stopping:
      return error(503, "the server is stopping: send the request to another one", 5)
    async with readers:  # bodies in memory at once: bounded
      try:
        body = await read_body(request, limits.max_body_bytes)
      except ClientDisconnect:
        return Response(status_code=499)
      query = read(await run_in_threadpool(wire.parse_body, body), limits)  # off the event loop
    units = len(query.texts)
    k = min(units, ranker.options.depth or units)  # the texts it reranks
    inputs = num_inputs(k)  # duoT5: k(k-1) ordered pairs
    if inputs > limits.max_texts:
      raise wire.RequestError(413, f"{family} scores the first {k} texts as {inputs} model inputs "
                              f"(every ordered pair), more than --max-texts {limits.max_texts}: "
                              f"send at most the top {most_texts(num_inputs, limits.max_texts)} "
                              "texts, or serve with --depth")
    units = max(units, inputs)
    ticket = batcher.admit(units)
    submitted = False
    try:
      try:
        planned = await run_in_threadpool(ranker.plan_ranking, query.query, query.texts,
                                          query.first_stage_scores)
      except ValueError as e:  # e.g. a model that reads BM25 scores and got none
        raise wire.RequestError(422, str(e)) from None
      tokens = sum(wire.count_tokens(example) for example in planned.examples)
      future = batcher.submit(ticket, planned)
      submitted = True
    finally:
      if not submitted:
        batcher.release(ticket)
    try:
      ranking = await until_answered(request, future)
    except ClientGone:
      return Response(status_code=499)  # nobody reads it
    except Exception as e:  # the step failed (e.g. a NaN score): this request's answer
      logger.error("a request failed: %s: %s", type(e).__name__, e)
      return error(500, f"scoring failed: {type(e).__name__}: {e}")
    return JSONResponse(answer(query, ranking, family, checkpoint=ranker.checkpoint,
                               tokens=tokens))

  async def guarded(request: Request, read: Callable, answer: Callable) -> Response:
    try:
      return await rerank(request, read, answer)
    except (wire.RequestError, QueueFull, Closed, HTTPException):
      raise  # their own handlers answer them
    except Exception as e:  # answered here: the server's log gets one line, not a traceback
      logger.error("%s %s failed: %s: %s", request.method, request.url.path, type(e).__name__, e)
      return error(500, f"scoring failed: {type(e).__name__}: {e}")

  async def tei(request: Request) -> Response:
    return await guarded(request, wire.read_tei, wire.tei_answer)

  async def cohere(request: Request) -> Response:
    version = "2" if request.url.path.startswith("/v2/") else "1"
    return await guarded(request, wire.read_cohere,
                         lambda *answer, **extra: wire.cohere_answer(*answer, version=version,
                                                                     **extra))

  async def health(request: Request) -> Response:
    if service.stopping:
      return JSONResponse({"status": "stopping"}, status_code=503)
    if not batcher.ready.is_set():
      return JSONResponse({"status": "warming up"}, status_code=503,
                          headers={"Retry-After": "5"})
    if not batcher.running:
      return JSONResponse({"status": "the scoring worker has stopped"}, status_code=503)
    return JSONResponse({"status": "ok"})

  async def metrics(request: Request) -> Response:
    body, kind = service.metrics.exposition()
    return Response(body, media_type=kind)

  async def info(request: Request) -> Response:
    return JSONResponse(service.info())

  async def refused(request: Request, e: wire.RequestError) -> Response:
    response = error(e.status, str(e))
    if e.status == 413:  # the rest of the body is not read: the connection cannot be reused
      response.headers["Connection"] = "close"
    return response

  async def full(request: Request, e: QueueFull) -> Response:
    return error(503, str(e), e.retry_after)

  async def closed(request: Request, e: Closed) -> Response:
    return error(503, f"{e}: retry later", 5)

  async def http(request: Request, e: HTTPException) -> Response:
    return error(e.status_code, f"{request.method} {request.url.path}: {e.detail}; the server "
                 "answers POST /rerank, POST /v1/rerank, POST /v2/rerank, GET /health, GET /info, "
                 "GET /metrics")

  async def failed(request: Request, e: Exception) -> Response:
    logger.error("%s %s failed: %s: %s", request.method, request.url.path, type(e).__name__, e)
    return error(500, f"scoring failed: {type(e).__name__}: {e}")

  @contextlib.asynccontextmanager
  async def lifespan(app):
    batcher.start()
    yield
    await run_in_threadpool(batcher.close)

  return Starlette(
      routes=[Route("/rerank", tei, methods=["POST"]),
              Route("/v1/rerank", cohere, methods=["POST"]),
              Route("/v2/rerank", cohere, methods=["POST"]),
              Route("/health", health, methods=["GET"]), Route("/info", info, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])],
      exception_handlers={wire.RequestError: refused, QueueFull: full, Closed: closed,
                          HTTPException: http, Exception: failed},
      lifespan=lifespan)


def most_texts(num_inputs: Callable[[int], int], max_inputs: int) -> int:
  """The most texts k whose `num_inputs(k)` fit `max_inputs` (at least 1)."""
  k = 1
  while num_inputs(k + 1) <= max_inputs:
    k += 1
  return k


async def read_body(request: Request, limit: int) -> bytes:
  """The request's body, refused (413) as soon as it passes `limit` bytes."""
  too_large = wire.RequestError(413, f"the body is larger than {limit} bytes, what --max-texts "
                                     "texts of --max-chars characters take")
  length = request.headers.get("content-length", "")
  if length.isdigit() and int(length) > limit:
    raise too_large
  chunks, size = [], 0
  async for chunk in request.stream():
    size += len(chunk)
    if size > limit:
      raise too_large
    chunks.append(chunk)
  return b"".join(chunks)


async def until_answered(request: Request, future) -> list:
  """The batcher's answer to `future`; ClientGone (and the request dropped from the queue, or its
  answer discarded) when the client disconnects first."""
  answer = asyncio.wrap_future(future)

  async def disconnected() -> None:
    while (await request.receive())["type"] != "http.disconnect":
      pass

  gone = asyncio.ensure_future(disconnected())
  try:
    await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
  finally:
    gone.cancel()
  if not answer.done():
    answer.cancel()  # still queued: the worker skips it
    raise ClientGone()
  return answer.result()


class Server(uvicorn.Server):
  """uvicorn's server that, on SIGTERM or SIGINT, first marks the service stopping (new requests
  503), then stops as uvicorn does: no new connections, the requests in flight answered."""

  def __init__(self, config: uvicorn.Config, service: Service):
    super().__init__(config)
    self.service = service

  def handle_exit(self, sig, frame) -> None:
    if not self.service.stopping:
      logger.info("stopping: new requests are refused; finishing %d queued texts",
                  self.service.batcher.held)
    self.service.stopping = True
    super().handle_exit(sig, frame)


def make_server(ranker, *, host: str = "127.0.0.1", port: int = 8080,
                limits: wire.Limits = wire.Limits(), max_queue: int = 4096,
                max_batch_pairs: int = 1024, max_wait_ms: float = 5.0,
                max_connections: int = 512, drain_seconds: float = 30.0,
                access_log: bool = False, warm_up: Optional[Callable] = None,
                allowed_hosts: Optional[Sequence[str]] = None, api_key: Optional[str] = None,
                cors_origins: Sequence[str] = (), max_readers: int = 4,
                request_timeout: float = 10.0) -> Server:
  """The server of `ranker` (not started): `limits` per request, the batcher's `max_queue`,
  `max_batch_pairs` and `max_wait_ms`, at most `max_connections` open connections (uvicorn
  answers 503 past them), `drain_seconds` to finish the requests in flight after SIGTERM.
  `warm_up(ranker)` (default: `t5rank.serving.warmup.warm_up`, planning what a request of at most
  `limits.max_texts` texts merged into steps of `max_batch_pairs` can bring) runs before /health
  is 200. `allowed_hosts` (default: `host` and the loopback names; "*" any), `api_key` and
  `cors_origins` (the browser origins allowed to call it; none by default): the module
  docstring's `t5rank.serving.guard`; `max_readers` bodies read at once. Each request must arrive
  whole within `request_timeout` seconds of its first byte, a connection with no request is closed
  after min(5, request_timeout) s, and past `max_connections` the longest-waiting connection
  without a whole request makes room (`t5rank.serving.connections`). ValueError for a limit that
  is not a finite number >= 0."""
  for name, value in (("max_wait_ms", max_wait_ms), ("drain_seconds", drain_seconds)):
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
      raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
  if warm_up is None:
    import functools

    from t5rank.serving.warmup import warm_up as planned_warm_up

    warm_up = functools.partial(planned_warm_up,
                                max_examples=max(limits.max_texts, max_batch_pairs))
  batcher = Batcher(ranker, max_queue=max_queue, max_batch_pairs=max_batch_pairs,
                    max_wait_ms=max_wait_ms, warm_up=warm_up)
  service = Service(ranker, batcher, limits, max_readers)
  app = make_app(service)
  if cors_origins:
    from starlette.middleware.cors import CORSMiddleware

    app = CORSMiddleware(app, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                         allow_headers=["Authorization", "Content-Type"])
  app = Guard(app, allowed_hosts=allowed_hosts or default_allowed_hosts(host), api_key=api_key)
  app = service.metrics.middleware(app)
  connections = Connections(max_connections=max_connections, request_timeout=request_timeout,
                            on_close=service.metrics.connection_closed)
  config = uvicorn.Config(app, host=host, port=port, lifespan="on", access_log=access_log,
                          http=connections.protocol(), timeout_keep_alive=connections.idle_timeout,
                          timeout_graceful_shutdown=drain_seconds, log_config=None)
  return Server(config, service)


def serve(ranker, *, sock: Optional[socket.socket] = None, **options) -> int:
  """Serves `ranker` until SIGTERM or SIGINT (`make_server`'s `options`), then returns 0 once the
  requests in flight are answered. `sock`: an already bound socket to serve on."""
  server = make_server(ranker, **options)
  config = server.config
  logger.info("serving %s (%s) on http://%s:%d; warming up", ranker.checkpoint, ranker.family,
              config.host, config.port)
  handlers = {}
  if threading.current_thread() is threading.main_thread():
    # uvicorn sends itself the signal again once stopped; this makes that second one a no-op,
    # so a graceful stop exits 0
    handlers = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
  try:
    server.run(sockets=[sock] if sock is not None else None)
  finally:
    for sig, handler in handlers.items():
      signal.signal(sig, handler)
  if server.service.batcher.counts:
    logger.info("stopped after %s", dict(server.service.batcher.counts))
  return 0
