"""`GET /metrics` of `t5rank serve`, in Prometheus' text format (`prometheus_client`, a registry of
the server's own), named as text-embeddings-inference names its own:

    t5rank_requests_total{route, status}      requests answered, refusals included
    t5rank_request_duration_seconds{route}    from the request's start to its answer (histogram)
    t5rank_queue_texts                        texts admitted and not yet answered
    t5rank_batch_inputs                       model inputs per scoring step (histogram)
    t5rank_batch_duration_seconds             seconds per scoring step (histogram)
    t5rank_inputs_scored_total                model inputs scored
    t5rank_connections_closed_total{reason}   connections the server closed on its own: idle,
                                              slow (408), evicted (to make room), refused (503),
                                              invalid (400)
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

ROUTES = ("/rerank", "/v1/rerank", "/v2/rerank", "/health", "/info", "/metrics")


class Metrics:
  """The server's metrics (module docstring) and an ASGI middleware that counts every request."""

  def __init__(self, queue_texts):
    self.registry = CollectorRegistry()
    self.requests = Counter("t5rank_requests", "requests answered", ["route", "status"],
                            registry=self.registry)
    self.latency = Histogram("t5rank_request_duration_seconds", "seconds to answer a request",
                             ["route"], registry=self.registry,
                             buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
    self.queue = Gauge("t5rank_queue_texts", "texts admitted and not yet answered",
                       registry=self.registry)
    self.queue.set_function(queue_texts)
    self.batch_inputs = Histogram("t5rank_batch_inputs", "model inputs per scoring step",
                                  registry=self.registry,
                                  buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096))
    self.batch_seconds = Histogram("t5rank_batch_duration_seconds", "seconds per scoring step",
                                   registry=self.registry,
                                   buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
    self.scored = Counter("t5rank_inputs_scored", "model inputs scored", registry=self.registry)
    self.closed = Counter("t5rank_connections_closed", "connections the server closed",
                          ["reason"], registry=self.registry)

  def connection_closed(self, reason: str) -> None:
    """Counts a connection the server closed (`t5rank.serving.connections`)."""
    self.closed.labels(reason).inc()

  def step(self, inputs: int, seconds: float) -> None:
    """Records one scoring step of the batcher."""
    self.batch_inputs.observe(inputs)
    self.batch_seconds.observe(seconds)
    self.scored.inc(inputs)

  def exposition(self) -> tuple[bytes, str]:
    """(the text format's body, its content type)."""
    return generate_latest(self.registry), CONTENT_TYPE_LATEST

  def middleware(self, app):
    """`app` with every request counted and timed by route (other paths as "other")."""
    async def counted(scope, receive, send):
      if scope["type"] != "http":
        return await app(scope, receive, send)
      route = scope["path"] if scope["path"] in ROUTES else "other"
      started, status = time.perf_counter(), [500]

      async def sending(message):
        if message["type"] == "http.response.start":
          status[0] = message["status"]
        await send(message)

      try:
        await app(scope, receive, sending)
      finally:
        self.requests.labels(route, str(status[0])).inc()
        self.latency.labels(route).observe(time.perf_counter() - started)
    return counted
