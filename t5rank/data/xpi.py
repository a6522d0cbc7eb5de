"""XPI: cross-lingual paraphrase identification, the pre-training task before XPR (Chen et al. 2020).

The paper (section IV-B) pre-trains the reranker on deciding whether two sentences, possibly in
different languages, mean the same, with pairs from a parallel corpus laid out so that half are
one-language (a quarter English-English, a quarter Chinese-Chinese) and half mixed (one side
translated on a coin toss); 100k pairs of the UN corpus. Here the parallel text is Tatoeba's 56,578
Chinese-English pairs (`t5rank.data.texts.tatoeba_pairs`) plus InsuranceQA's training questions and
answers in both languages (never validation or test queries), and the task is a monoT5 task:
`Query: x Document: y Relevant:` -> yes/no (or true/false), trained by the same preprocessors,
trainer and loss as the reranker that fine-tunes from it.

Meanings (`parallel_groups`): Tatoeba links a sentence to one or more translations, so its
sentences form groups (connected components of the translation links): each group is one meaning
with its distinct English and Chinese sentences; each InsuranceQA question or answer is a group of
its two texts. Every 50th group (in order of first appearance) is the validation split.

Examples (`xpi_table`), one row per group, its layout drawn with `seed` (a seeded permutation: the
first quarter of the groups English-English, the second quarter Chinese-Chinese, the rest mixed,
each with a coin for which side is Chinese):
- x: the group's first sentence in x's language; the positive y: the first sentence in y's language
  (its translation) when the languages differ, another sentence of the group in that language (a
  paraphrase: another translation of the same sentence) when they are the same and the group has
  one, else x itself (the paper's proportions need one-language positives, and most groups have one
  sentence per language: `xpi_stats` reports how many positives are x itself);
- the negatives, in y's language, from other groups: `random` (20 first sentences of other groups,
  drawn with `seed`) or `bm25` (the harder ones: the 20 first sentences of other groups that BM25
  ranks highest for the positive y, k1 .9, b .4, the analyzer of y's language; padded with random
  ones when fewer match). The trainer draws one negative per row and epoch.

Departures: the paper does not say how its negatives were made (the issue asks for random and
harder ones) nor how one-language positives are found; both are as above.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from t5rank.data import texts
from t5rank.data.insuranceqa import clean, load_records
from t5rank.data.sources import TripleTable, Interner, pooled_table

NEGATIVES = ("random", "bm25")
NUM_NEGATIVES = 20
HELD_OUT_EVERY = 50
LANGUAGES = ("en", "zh")
Group = tuple[tuple[str, ...], tuple[str, ...]]  # (English sentences, Chinese sentences)


def meaning_groups(pairs: list[tuple[str, str]]) -> list[Group]:
  """Connected components of (zh, en) translation links, each as (its English sentences, its
  Chinese sentences) in order of first appearance; groups in order of their first pair."""
  parent: dict[tuple[str, str], tuple[str, str]] = {}

  def find(node):
    while parent[node] != node:
      parent[node] = parent[parent[node]]
      node = parent[node]
    return node

  for zh, en in pairs:
    a, b = ("zh", zh), ("en", en)
    parent.setdefault(a, a)
    parent.setdefault(b, b)
    ra, rb = find(a), find(b)
    if ra != rb:
      parent[rb] = ra
  members: dict[tuple[str, str], dict[str, list[str]]] = {}
  for zh, en in pairs:  # first appearance order, within groups and of groups
    for node in (("zh", zh), ("en", en)):
      group = members.setdefault(find(node), {"en": [], "zh": []})
      if node[1] not in group[node[0]]:
        group[node[0]].append(node[1])
  return [(tuple(g["en"]), tuple(g["zh"])) for g in members.values()]


def parallel_groups(split: str, wheel: Optional[str] = None) -> list[Group]:
  """The meanings of `split` (train or validation): Tatoeba's groups, then InsuranceQA's training
  questions and answers (each a group of its English and Chinese text), every 50th held out."""
  if split not in ("train", "validation"):
    raise ValueError(f"XPI's splits are train and validation, not {split!r}")
  groups = meaning_groups(texts.tatoeba_pairs(wheel))
  queries, answers = load_records("train", "en")
  for records in (queries, answers):
    for key in sorted(records, key=int):
      groups.append(((clean(records[key]["en"]),), (clean(records[key]["zh"]),)))
  held_out = split == "validation"
  return [g for i, g in enumerate(groups) if (i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1) == held_out]


def layouts(num_groups: int, seed: int) -> list[tuple[str, str]]:
  """(x language, y language) per group: a quarter en-en, a quarter zh-zh, half mixed."""
  rng = np.random.default_rng(seed)
  order = rng.permutation(num_groups)
  coins = rng.random(num_groups) < 0.5
  out: list[tuple[str, str]] = [("en", "en")] * num_groups
  for rank, g in enumerate(order):
    if rank < num_groups // 4:
      out[g] = ("en", "en")
    elif rank < num_groups // 2:
      out[g] = ("zh", "zh")
    else:
      out[g] = ("en", "zh") if coins[g] else ("zh", "en")
  return out


def _side(group: Group, language: str) -> tuple[str, ...]:
  return group[LANGUAGES.index(language)]


def _bm25_neighbours(groups: list[Group], language: str, queries: dict[int, str],
                     k: int) -> dict[int, list[int]]:
  """For each group index g in `queries`: the indices of the groups whose first sentence in
  `language` BM25 ranks highest for the query text, the group itself left out (at most k)."""
  from t5rank.data.readers import Document
  from t5rank.retrieval.bm25 import BM25Index, search

  corpus = {str(i): Document(_side(g, language)[0]) for i, g in enumerate(groups)}
  index = BM25Index.build(corpus, k1=0.9, b=0.4, language=language)
  out = {}
  for g, text in queries.items():
    hits = [int(d) for d, _ in search(index, text, k=k + 1)]
    out[g] = [h for h in hits if h != g][:k]
  return out


@functools.lru_cache(maxsize=4)
def xpi_table(split: str, negatives: str = "random", seed: int = 0,
              wheel: Optional[str] = None) -> TripleTable:
  """XPI's triples (x, positive y, negative pool) of `split`; see the module docstring."""
  return xpi_table_of(parallel_groups(split, wheel), negatives, seed)


def xpi_table_of(groups: list[Group], negatives: str = "random", seed: int = 0) -> TripleTable:
  """`xpi_table` on given meaning groups: one row per group, in group order."""
  if negatives not in NEGATIVES:
    raise ValueError(f"XPI negatives are {NEGATIVES}, not {negatives!r}")
  if len(groups) <= NUM_NEGATIVES:
    raise ValueError(f"XPI needs more than {NUM_NEGATIVES} meaning groups, got {len(groups)}")
  layout = layouts(len(groups), seed)
  rng = np.random.default_rng([seed, 1])
  positives_text = {}
  for g, (group, (a, b)) in enumerate(zip(groups, layout)):
    x = _side(group, a)[0]
    ys = _side(group, b)
    y = ys[0] if a != b else (ys[1] if len(ys) > 1 else ys[0])
    positives_text[g] = (x, y)
  hard: dict[int, list[int]] = {}
  if negatives == "bm25":
    for language in LANGUAGES:
      hard.update(_bm25_neighbours(
          groups, language, {g: positives_text[g][1] for g in range(len(groups))
                             if layout[g][1] == language}, NUM_NEGATIVES))
  queries, documents = Interner(), Interner()
  positives, pools = [], []
  for g, (x, y) in positives_text.items():
    language = layout[g][1]

    def usable(other: int) -> bool:  # another meaning, and not the positive's text by accident
      return other != g and _side(groups[other], language)[0] != y

    picks = [o for o in hard.get(g, []) if usable(o)]
    while len(picks) < NUM_NEGATIVES:
      other = int(rng.integers(len(groups)))
      if usable(other) and other not in picks:
        picks.append(other)
    positives.append((queries(x), documents(y)))
    pools.append([documents(_side(groups[o], language)[0]) for o in picks])
  return pooled_table(queries.texts, documents.texts, positives, pools, list(range(len(pools))))


def xpi_stats(split: str = "train", seed: int = 0, wheel: Optional[str] = None) -> dict[str, int]:
  """Counts of the construction: groups per layout, and one-language positives that are a
  paraphrase (another sentence of the group) or x itself."""
  groups = parallel_groups(split, wheel)
  out = {"groups": len(groups), "en-en": 0, "zh-zh": 0, "mixed": 0, "paraphrase_positives": 0,
         "identical_positives": 0}
  for group, (a, b) in zip(groups, layouts(len(groups), seed)):
    if a != b:
      out["mixed"] += 1
      continue
    out[f"{a}-{b}"] += 1
    out["paraphrase_positives" if len(_side(group, b)) > 1 else "identical_positives"] += 1
  return out
