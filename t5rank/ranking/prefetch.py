"""A background prefetch: `prefetch` runs the host-side preparation (tokenization, padding) of the
next shard in a thread while the devices score the current one. The batches themselves are each
model's (`t5rank.models.batching` for the length-bucketed ones)."""

from __future__ import annotations

import queue
import threading
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def prefetch(items: Iterable[T], size: int = 2) -> Iterator[T]:
  """Iterates `items` in a background thread, at most `size` ahead of the consumer; re-raises the
  producer's exception, and stops the producer when the consumer stops early."""
  channel: queue.Queue = queue.Queue(size)
  stop = threading.Event()

  def put(entry) -> bool:
    while not stop.is_set():
      try:
        channel.put(entry, timeout=0.1)
        return True
      except queue.Full:
        pass
    return False

  def produce() -> None:
    try:
      for item in items:
        if not put((True, item)):
          return
      put((False, None))
    except BaseException as e:  # handed to the consumer
      put((False, e))

  thread = threading.Thread(target=produce, daemon=True)
  thread.start()
  try:
    while True:
      more, value = channel.get()
      if not more:
        if value is not None:
          raise value
        return
      yield value
  finally:
    stop.set()
    thread.join()
