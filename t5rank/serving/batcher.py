"""Batching across requests: the requests that arrive together are scored together.

    request ─► admit (a bounded queue, counted in texts: past it QueueFull, a 503) ─► plan and
    encode (the request's own thread) ─► queue ─► ONE worker thread: wait at most `max_wait_ms` for
    more, take up to `max_batch_pairs` model inputs, score them in one `Ranker.score_examples`
    call ─► each request's slice of the scores ─► its own ranking (`PlannedRun.ranking`)

Each request is planned on its own (its query, its texts), so its answer is what `Ranker.rank`
gives it alone, whatever else was in its step: a model input's score does not depend on its
neighbours in a batch (they only share padding), up to float rounding. A request whose client has
gone before its step is dropped unscored; one that has gone during its step has its answer
discarded. The worker outlives every error of a step: the step's requests get the error, the next
step goes on.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import math
import threading
import time
from typing import Callable, Optional

import numpy as np

logger = logging.getLogger(__name__)


class QueueFull(Exception):
  """The queue holds `max_queue` texts: try again after `retry_after` seconds."""

  def __init__(self, message: str, retry_after: int):
    super().__init__(message)
    self.retry_after = retry_after


class Closed(Exception):
  """The batcher takes no more requests (warming up, or stopping)."""


@dataclasses.dataclass(eq=False)
class Ticket:
  """A request's place in the queue: `texts` of capacity, held from `Batcher.admit` until the
  request is answered or dropped."""
  texts: int
  future: concurrent.futures.Future = dataclasses.field(default_factory=concurrent.futures.Future)
  planned: object = None  # t5rank.ranker.PlannedRun, once submitted
  released: bool = False


class Batcher:
  """One worker thread scoring queued requests with `ranker` (module docstring). `max_queue`:
  texts admitted and not yet answered, at most (a request of more texts is refused outright);
  `max_batch_pairs`: model inputs a step takes (at least one request); `max_wait_ms`: how long a
  step waits for more requests once one is there. `warm_up` (a function of the ranker) runs on the
  worker thread before the first step; `ready` is set when it has finished."""

  def __init__(self, ranker, *, max_queue: int = 4096, max_batch_pairs: int = 1024,
               max_wait_ms: float = 5.0, warm_up: Optional[Callable] = None):
    for name, value in (("max_queue", max_queue), ("max_batch_pairs", max_batch_pairs)):
      if value < 1:
        raise ValueError(f"{name} must be a positive number, got {value}")
    if not max_wait_ms >= 0:
      raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}")
    self.ranker, self.max_queue = ranker, max_queue
    self.max_batch_pairs, self.max_wait = max_batch_pairs, max_wait_ms / 1000
    self._warm_up = warm_up
    self.ready = threading.Event()
    self.warm_up_report: dict = {}
    self._cond = threading.Condition()
    self._queue: collections.deque[Ticket] = collections.deque()
    self._held = 0  # texts admitted and not yet answered or dropped
    self._waiting_pairs = 0  # model inputs in the queue
    self._closed = False
    self._rate = 0.0  # texts/s of recent steps (for Retry-After)
    self.counts = collections.Counter()  # steps, requests, pairs, dropped, failed
    self.on_step: Optional[Callable[[int, float], None]] = None  # (inputs, seconds) of each step
    self._thread = threading.Thread(target=self._work, name="t5rank-batcher", daemon=True)

  def start(self) -> "Batcher":
    """Starts the worker (warm-up first)."""
    self._thread.start()
    return self

  def close(self, timeout: Optional[float] = None) -> None:
    """Takes no more requests, answers those queued, then ends the worker."""
    with self._cond:
      self._closed = True
      self._cond.notify_all()
    if self._thread.is_alive():
      self._thread.join(timeout)

  @property
  def running(self) -> bool:
    """Whether the worker is alive (it ends only when closed, or by a bug: /health says so)."""
    return self._thread.is_alive()

  @property
  def held(self) -> int:
    """Texts admitted and not yet answered."""
    return self._held

  def admit(self, texts: int) -> Ticket:
    """A place for a request of `texts` texts; QueueFull when the queue cannot hold them now,
    Closed while warming up or stopping."""
    with self._cond:
      if self._closed:
        raise Closed("the server is stopping")
      if not self.ready.is_set():
        raise Closed("the server is warming up")
      if self._held + texts > self.max_queue:
        raise QueueFull(f"the queue is full ({self._held} of --max-queue {self.max_queue} texts "
                        "waiting); retry later", self.retry_after())
      self._held += texts
      return Ticket(texts)

  def submit(self, ticket: Ticket, planned) -> concurrent.futures.Future:
    """Queues the admitted request's plan (`Ranker.plan_ranking`'s); its future gets the
    ranking, [(index, score), ...] best first, or the step's error."""
    with self._cond:
      ticket.planned = planned
      self._queue.append(ticket)
      self._waiting_pairs += len(planned.examples)
      self._cond.notify_all()
    return ticket.future

  def release(self, ticket: Ticket) -> None:
    """Gives back a ticket's capacity (a request that failed before `submit`, or answered)."""
    with self._cond:
      if not ticket.released:
        ticket.released = True
        self._held -= ticket.texts

  def retry_after(self) -> int:
    """Seconds until the queue has likely drained, from the recent rate (at least 1)."""
    if self._rate <= 0:
      return 1
    return max(1, min(60, math.ceil(self._held / self._rate)))

  def _work(self) -> None:
    if self._warm_up is not None:
      started = time.perf_counter()
      try:
        self.warm_up_report = dict(self._warm_up(self.ranker))
      except Exception:  # the server goes on; requests may compile
        logger.exception("warm-up failed; requests of new shapes will compile")
      logger.info("ready: warm-up took %.1f s", time.perf_counter() - started)
    self.ready.set()
    while True:
      step = self._take()
      if step is None:
        return
      self._score_step(step)

  def _take(self) -> Optional[list[Ticket]]:
    """The next step's requests (None when closed and empty): the first waiting, then up to
    `max_batch_pairs` model inputs of those that arrive within `max_wait`."""
    with self._cond:
      while not self._queue and not self._closed:
        self._cond.wait()
      if not self._queue:
        return None
      deadline = time.monotonic() + self.max_wait
      while self._waiting_pairs < self.max_batch_pairs and not self._closed:
        left = deadline - time.monotonic()
        if left <= 0:
          break
        self._cond.wait(left)
      step, pairs = [], 0
      while self._queue and (not step or pairs + len(self._queue[0].planned.examples)
                             <= self.max_batch_pairs):
        ticket = self._queue.popleft()
        size = len(ticket.planned.examples)
        self._waiting_pairs -= size
        pairs += size
        step.append(ticket)
      return step

  def _score_step(self, step: list[Ticket]) -> None:
    live = []
    for ticket in step:
      if ticket.future.set_running_or_notify_cancel():
        live.append(ticket)
      else:  # its client has gone: not scored
        self.counts["dropped"] += 1
        self.release(ticket)
    if not live:
      return
    started = time.perf_counter()
    examples = [example for ticket in live for example in ticket.planned.examples]
    try:
      scores, p = self.ranker.score_examples(examples)
    except Exception as e:  # every request of the step gets the error; the worker goes on
      logger.exception("a step of %d requests failed", len(live))
      self.counts["failed"] += len(live)
      for ticket in live:
        self.release(ticket)
        ticket.future.set_exception(e)
      return
    offsets = np.cumsum([0] + [len(t.planned.examples) for t in live])
    for ticket, start, stop in zip(live, offsets[:-1], offsets[1:]):
      self.release(ticket)
      try:
        ticket.future.set_result(ticket.planned.ranking(scores[start:stop], p[start:stop]))
      except Exception as e:
        self.counts["failed"] += 1
        ticket.future.set_exception(e)
    seconds = time.perf_counter() - started
    texts = sum(t.texts for t in live)
    rate = texts / max(seconds, 1e-6)
    self._rate = rate if self._rate == 0 else 0.8 * self._rate + 0.2 * rate
    self.counts.update(steps=1, requests=len(live), pairs=len(examples))
    if self.on_step is not None:
      self.on_step(len(examples), seconds)
