"""Values from inside a file t5rank did not write, quoted safely in a message.

    raise CheckpointError(f"{path}: the pickle asks for {quote(module)}.{quote(name)}")

A hostile checkpoint can put anything where a name belongs: a string of megabytes, an escape
sequence that repaints the terminal, a tuple nested a million deep whose `repr()` never ends or
overflows the stack. `quote` never formats more of a value than it prints: strings and bytes are
cut before they are escaped, containers are described by their type and length with at most a
few of their first items (themselves quoted, to a small depth), and integers too long to print are
described by their size. Control characters (and every other non-printable one) come out as
Python escapes, so nothing from the file reaches a terminal as a control code.
"""

from __future__ import annotations

from typing import Any

LIMIT = 80  # characters of a quoted value, ellipsis included
_ITEMS = 3  # items of a container shown
_DEPTH = 2  # containers inside containers shown


def quote(value: Any, limit: int = LIMIT) -> str:
  """A printable, one-line description of `value` of at most `limit` characters (module
  docstring), built in time and memory bounded by `limit`, whatever `value` is."""
  return _cut(_quote(value, limit, _DEPTH), limit)


def _cut(text: str, limit: int) -> str:
  return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


def _quote(value: Any, limit: int, depth: int) -> str:
  if isinstance(value, str):  # the prefix alone is escaped: repr() of a slice is bounded
    return _cut(repr(value[:limit]) + ("..." if len(value) > limit else ""), limit)
  if isinstance(value, (bytes, bytearray)):
    return _cut(repr(bytes(value[:limit])) + ("..." if len(value) > limit else ""), limit)
  if isinstance(value, bool) or value is None:
    return repr(value)
  if isinstance(value, int):
    if value.bit_length() > 4 * limit:  # str() of a huge int is quadratic (and capped by Python)
      return f"an integer of {value.bit_length()} bits"
    return _cut(str(value), limit)
  if isinstance(value, float):
    return repr(value)
  if isinstance(value, (tuple, list, set, frozenset, dict)):
    kind = type(value).__name__
    try:
      size = len(value)
    except Exception:  # a subclass with its own __len__
      return f"a {kind}"
    if depth == 0 or size == 0:
      return (f"a {kind} of {size} item{'s' if size != 1 else ''}" if size
              else "()" if kind == "tuple" else f"an empty {kind}")
    items = dict.items(value) if isinstance(value, dict) else value
    shown = []
    for i, item in enumerate(items):
      if i == _ITEMS:
        break
      if isinstance(value, dict):
        k, v = item
        shown.append(f"{_quote(k, limit // 2, depth - 1)}: {_quote(v, limit // 2, depth - 1)}")
      else:
        shown.append(_quote(item, limit // 2, depth - 1))
    more = ", ..." if size > _ITEMS else ("," if kind == "tuple" and size == 1 else "")
    open_, close = {"tuple": "()", "list": "[]", "dict": "{}"}.get(kind, ("{", "}"))
    return _cut(f"{open_}{', '.join(shown)}{more}{close}", limit)
  return f"a value of type {_cut(type(value).__name__, 40)}"


def name(value: Any, limit: int = LIMIT) -> str:
  """A name from a file (a module, a key) as `quote` gives it, without the quotes of a string:
  `os.system`, not `'os'.'system'`; control characters still escaped, still cut to `limit`."""
  if isinstance(value, str):
    text = repr(value[:limit])[1:-1]
    return _cut(text + ("..." if len(value) > limit else ""), limit)
  return quote(value, limit)
