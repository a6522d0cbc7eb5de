"""A retrieval task from a pairwise data set (Gillick et al. 2018, section 3.3): the graph of the
positive pairs, its transitive closure, every item of a positive pair a test query, the other
items of its closure its relevant results, and all items the candidates.

    pairs (a, b[, label]) ─► union-find over the positive ones ─► connected components
      ─► queries: each item of a positive pair; qrels: its component (itself included unless
         `self_relevant` is False); candidates: every item of the text table

Whether the query's own item counts as relevant the paper does not say in words; its "identity"
baseline (returning the query itself as the only result) scores 45.9 MAP@100 on Quora, which is
only possible when it does, so that is the default. `self_relevant=False` makes the stricter task,
where a retriever should find the other members (the query's own item then is a non-relevant
candidate: leave it out of the candidates or the run yourself).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from t5rank.data.readers import BadLine, read_lines


def _find(parent: dict[str, str], item: str) -> str:
  root = item
  while parent[root] != root:
    root = parent[root]
  while parent[item] != root:  # path compression
    parent[item], item = root, parent[item]
  return root


def closure_qrels(pairs: Iterable[tuple[str, str, Optional[int]]], *,
                  self_relevant: bool = True) -> dict[str, dict[str, int]]:
  """{query item: {relevant item: 1}} of the transitive closure of the positive pairs (label None
  or >= 1; label 0 pairs are ignored), queries and relevant items in sorted order."""
  parent: dict[str, str] = {}
  for a, b, label in pairs:
    if label is not None and label < 1:
      continue
    for item in (a, b):
      parent.setdefault(item, item)
    root_a, root_b = _find(parent, a), _find(parent, b)
    if root_a != root_b:
      parent[max(root_a, root_b)] = min(root_a, root_b)
  components: dict[str, list[str]] = {}
  for item in sorted(parent):
    components.setdefault(_find(parent, item), []).append(item)
  qrels = {}
  for item in sorted(parent):
    members = components[_find(parent, item)]
    qrels[item] = {m: 1 for m in members if self_relevant or m != item}
  return qrels


def read_pairs(path: str) -> list[tuple[str, str, Optional[int]]]:
  """Pairs from TSV lines `id1<TAB>id2` or `id1<TAB>id2<TAB>label` (label an integer, 0 for a
  negative pair); blank lines skipped, a byte-order mark allowed (`t5rank.data.readers.read_lines`);
  anything else, undecodable bytes too, is an error naming the file and the line."""
  pairs = []

  def handle(line: str) -> None:
    parts = line.split("\t")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
      raise BadLine(f"expected id1<TAB>id2[<TAB>label], got {line!r}")
    try:
      label = int(parts[2]) if len(parts) == 3 else None
    except ValueError:
      raise BadLine(f"the label must be an integer, got {parts[2]!r}") from None
    pairs.append((parts[0], parts[1], label))

  read_lines(path, handle, skip_bad=False)
  return pairs


def check_items(qrels: Mapping[str, Mapping[str, int]], texts: Mapping[str, object],
                where: str) -> None:
  """Raises ValueError when a paired item has no text in `texts`."""
  missing = sorted(item for item in qrels if item not in texts)
  if missing:
    raise ValueError(f"{len(missing)} paired items have no text in {where}, e.g. {missing[:3]}")
