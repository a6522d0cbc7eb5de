"""What `t5rank serve` checks before a request reaches a route: that it is meant for this server,
allowed, and bounded. An ASGI middleware around the Starlette application (`t5rank.serving.app`):

- the Host header must name one of `allowed_hosts` (any port): a web page that a browser loads
  from another name cannot reach a server on localhost by DNS rebinding (400 otherwise);
- with an API key, every route but /health needs `Authorization: Bearer KEY`, as TEI's, Cohere's
  and Jina's clients send it, compared in constant time (401 otherwise, with `WWW-Authenticate`);
- a POST body must be `application/json` (415 otherwise): a cross-site form or `text/plain` POST,
  which a browser sends without asking, is refused; a browser asks before sending JSON, and
  without `--cors-origin` the server grants no origin;

Every refusal is t5rank's JSON, `{"error": "one line"}`.
"""

from __future__ import annotations

import hmac
import json
from typing import Iterable, Optional

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


def host_name(header: str) -> str:
  """The name of a Host header without its port, lower-cased: `[::1]:8080` -> `[::1]`."""
  header = header.strip().lower()
  if header.startswith("["):  # an IPv6 literal
    return header[:header.find("]") + 1] if "]" in header else header
  return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def default_allowed_hosts(bound: str) -> tuple[str, ...]:
  """The bound address and the loopback names; a wildcard address (0.0.0.0, ::) adds none."""
  bound = bound.lower()
  extra = () if bound in ("0.0.0.0", "::", "") else (f"[{bound}]" if ":" in bound else bound,)
  return tuple(dict.fromkeys((*LOOPBACK_HOSTS, *extra)))


async def send_error(send, status: int, message: str, headers: Iterable = ()) -> None:
  body = json.dumps({"error": " ".join(message.split())}).encode()
  await send({"type": "http.response.start", "status": status,
              "headers": [(b"content-type", b"application/json"),
                          (b"content-length", str(len(body)).encode()), *headers]})
  await send({"type": "http.response.body", "body": body})


class Guard:
  """The middleware (module docstring). `allowed_hosts` of "*" accepts any Host."""

  def __init__(self, app, *, allowed_hosts: Iterable[str], api_key: Optional[str] = None,
               open_paths: Iterable[str] = ("/health",)):
    self.app = app
    self.any_host = "*" in allowed_hosts
    self.hosts = {host_name(h) for h in allowed_hosts}
    self.key = api_key.encode() if api_key else None
    self.open_paths = set(open_paths)

  async def __call__(self, scope, receive, send) -> None:
    if scope["type"] != "http":
      return await self.app(scope, receive, send)
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    host = host_name(headers.get("host", ""))
    if not self.any_host and host not in self.hosts:
      return await send_error(send, 400, f"the Host {host[:100]!r} is not one this server "
                              "answers (--allowed-hosts)")
    if self.key is not None and scope["path"] not in self.open_paths:
      given = headers.get("authorization", "")
      scheme, _, token = given.partition(" ")
      if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.key):
        return await send_error(send, 401, "this server needs an API key: send the header "
                                "`Authorization: Bearer KEY`",
                                [(b"www-authenticate", b'Bearer realm="t5rank"')])
    if scope["method"] == "POST":
      kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
      if kind != "application/json":
        return await send_error(send, 415, f"a body must be application/json, got "
                                f"{(kind or 'none')[:60]!r}")
    return await self.app(scope, receive, send)
