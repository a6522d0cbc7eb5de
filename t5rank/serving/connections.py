"""The connections of `t5rank serve`: uvicorn's HTTP/1.1 protocol (h11) with a deadline on every
request, a bound on open connections that idle clients cannot hold, and t5rank's JSON in the
answers the protocol writes itself.

uvicorn (0.54) closes a keep-alive connection idle for `timeout_keep_alive` seconds, and that is
all: a new connection that sends nothing, or sends its head a byte at a time, stays open, and its
`limit_concurrency` counts it, so that a few hundred of them answer every client 503 (/health
too). Here each connection is in one of three states:

    idle        no byte of a request yet (a new connection, or between keep-alive requests):
                closed silently after `idle_timeout` seconds
    reading     from a request's first byte, its head and its body must arrive within
                `request_timeout` seconds: past it, 408 and closed
    answering   the request is whole: no deadline (the queue bounds it)

At most `max_connections` are open. A new one past it closes the connection that has waited
longest without a whole request: first those that have never had a request answered (idle, then
reading), then kept-alive ones (idle, then reading). nginx likewise closes its idle "reusable"
connections when it runs out. A client that holds connections open without sending makes room
for the next one instead of locking it out, and a client's kept-alive connection is the last to
go. Only when every open connection has a request being
answered is the new one refused: its request gets 503 with Retry-After. uvicorn's own plain-text
answers (400 for what is not HTTP, 503 past limit_concurrency, which is not used) become one line
of JSON. The class subclasses uvicorn's `H11Protocol` and reads its state (`cycle`, `conn`), which
is why setup.py pins uvicorn.
"""

from __future__ import annotations

import collections
import http
import json
from typing import Callable, Optional

from uvicorn.protocols.http.h11_impl import H11Protocol

IDLE_SECONDS = 5.0  # uvicorn's timeout_keep_alive
# (state, answered before): the connections closed first to make room
EVICTION_ORDER = (("idle", False), ("reading", False), ("idle", True), ("reading", True))


def json_refusal(status: int, message: str, retry_after: Optional[int] = None) -> bytes:
  """A whole HTTP/1.1 response, {"error": one line} with Connection: close, for the protocol to
  write where no application answers."""
  body = json.dumps({"error": " ".join(message.split())}).encode()
  head = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
          "content-type: application/json", f"content-length: {len(body)}", "connection: close"]
  if retry_after is not None:
    head.append(f"retry-after: {retry_after}")
  return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Connections:
  """What the connections of one server share: the limits, the open connections, the waiting ones
  by (state, whether a request of theirs was answered) in the order they began to wait, and
  `on_close(reason)` for each connection the server closes on its own: "idle", "slow" (408),
  "evicted", "refused" (503), "invalid" (400)."""

  def __init__(self, *, max_connections: int = 512, request_timeout: float = 10.0,
               idle_timeout: Optional[float] = None,
               on_close: Optional[Callable[[str], None]] = None):
    if max_connections < 1:
      raise ValueError(f"max_connections must be positive, got {max_connections}")
    if not 0 < request_timeout < float("inf"):
      raise ValueError(f"request_timeout must be a finite number of seconds > 0, got "
                       f"{request_timeout}")
    self.max_connections, self.request_timeout = max_connections, request_timeout
    self.idle_timeout = min(IDLE_SECONDS, request_timeout) if idle_timeout is None else idle_timeout
    self.on_close = on_close or (lambda reason: None)
    self.open: set[GuardedProtocol] = set()
    self.waiting = {key: collections.OrderedDict() for key in EVICTION_ORDER}

  def protocol(self) -> type:
    """The protocol class for uvicorn's `Config(http=...)`, bound to these connections."""
    return type("GuardedH11Protocol", (GuardedProtocol,), {"shared": self})

  def make_room(self, newcomer: "GuardedProtocol") -> bool:
    """Closes the connection that has waited longest without a whole request (in EVICTION_ORDER),
    for `newcomer`; False when every other open connection has a request being answered."""
    for key in EVICTION_ORDER:
      for connection in self.waiting[key]:
        if connection is not newcomer:
          connection.evict()
          return True
    return False


class GuardedProtocol(H11Protocol):
  """uvicorn's h11 protocol with the deadlines and the bound of the module docstring; `shared`
  (a `Connections`) is set on the subclass that `Connections.protocol` makes."""

  shared: Connections

  def connection_made(self, transport) -> None:  # type: ignore[override]
    super().connection_made(transport)
    self._timer, self._state, self._served = None, None, False
    self.shared.open.add(self)
    self._wait("idle")
    if len(self.shared.open) > self.shared.max_connections and not self.shared.make_room(self):
      self.app = self._over_capacity  # its request is answered 503, then the connection closed

  def data_received(self, data: bytes) -> None:
    if self._state == "idle":
      self._wait("reading")
    super().data_received(data)
    self._check_whole()

  def on_response_complete(self) -> None:
    self._leave()  # from the waiting it was filed under (a request refused before its body came)
    self._served = True
    super().on_response_complete()
    self._unset_keepalive_if_required()  # uvicorn's keep-alive timer: the idle deadline does it
    if not self.transport.is_closing() and not self._check_whole():
      pending = self.cycle is not None and not self.cycle.response_complete
      self._wait("reading" if pending or self.conn.trailing_data[0] else "idle")

  def connection_lost(self, exc: Optional[Exception]) -> None:
    self._leave()
    self.shared.open.discard(self)
    super().connection_lost(exc)

  def send_400_response(self, msg: str) -> None:
    self._close("invalid", json_refusal(
        400, "the request is not HTTP/1.1 that this server reads: a request line and headers "
             "(16 KiB at most), then a body of its Content-Length"))

  def evict(self) -> None:
    """Closed to make room for a new connection (`Connections.make_room`)."""
    if self._state == "idle":
      self._close("evicted")
    else:
      self._close("evicted", json_refusal(
          503, f"the server holds --max-connections {self.shared.max_connections} connections "
               "and closed this one, which had not sent its whole request: retry", 1))

  def _check_whole(self) -> bool:
    """Whether a request is whole and not yet answered; if so, the connection is answering."""
    cycle = self.cycle
    if cycle is None or cycle.more_body or cycle.response_complete or self.transport.is_closing():
      return False
    if self._state is not None:
      self._leave()
    return True

  def _wait(self, state: str) -> None:
    self._leave()
    self._state = state
    self.shared.waiting[state, self._served][self] = None
    seconds = self.shared.idle_timeout if state == "idle" else self.shared.request_timeout
    self._timer = self.loop.call_later(seconds, self._expire)

  def _leave(self) -> None:
    if self._timer is not None:
      self._timer.cancel()
      self._timer = None
    if self._state is not None:
      self.shared.waiting[self._state, self._served].pop(self, None)
      self._state = None

  def _expire(self) -> None:
    self._timer = None
    if self._state == "idle":
      self._close("idle")
    elif self._state == "reading":
      self._close("slow", json_refusal(
          408, f"the request was not received whole within --request-timeout "
               f"{self.shared.request_timeout:g} s of its first byte: send it at once"))

  def _close(self, reason: str, answer: bytes = b"") -> None:
    """Closes the connection, first writing `answer` when no response has begun; a request being
    read sees its client gone."""
    self._leave()
    self.shared.open.discard(self)
    if self.transport.is_closing():
      return
    self.shared.on_close(reason)
    cycle = self.cycle
    if answer and (cycle is None or cycle.response_complete or not cycle.response_started):
      self.transport.write(answer)
    if cycle is not None and not cycle.response_complete:
      cycle.disconnected = True
      cycle.message_event.set()
    self.transport.close()

  async def _over_capacity(self, scope, receive, send) -> None:
    self.shared.on_close("refused")
    body = json.dumps({"error": f"the server holds --max-connections "
                                f"{self.shared.max_connections} connections, each with a request "
                                "being answered: retry"}).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
