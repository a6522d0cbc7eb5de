"""How long the word-id lookup of TK and the dual encoder takes (`WordVocabulary.encode`: split a
text into words, map each to its id), per text, with and without cProfile, on one corpus and its
queries. A profile of a whole scoring run cannot say this: the scorer looks the ids up in its
prefetch thread, and the profile's cumulative time there includes the time that thread waits for
the interpreter lock.

    python benchmarks/word_ids.py runs/words_insuranceqa_en_300d \\
        runs/devcheck/corpus.jsonl.gz runs/devcheck/queries.tsv

The first argument is a word vocabulary (a directory holding words.tsv, or the file), then a corpus
(JSONL, gzipped or not) and a queries file (TSV), in t5rank's formats.
"""

import argparse
import cProfile
import sys
import time

from t5rank.data.readers import read_corpus, read_queries
from t5rank.models.words import WordVocabulary


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("vocabulary")
  parser.add_argument("corpus")
  parser.add_argument("queries")
  parser.add_argument("--max-length", type=int, default=200, help="words kept per text (TK's "
                      "document length in the demo's recipe: 200)")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  vocabulary = WordVocabulary.load(args.vocabulary)
  texts = [d.text for d in read_corpus(args.corpus).values()]
  texts += list(read_queries(args.queries).values())
  if not texts:
    parser.error("no texts to look up")

  def lookup():
    for text in texts:
      vocabulary.encode(text, args.max_length)

  lookup()  # warm
  for _ in range(args.repeats):
    start = time.perf_counter()
    lookup()
    plain = time.perf_counter() - start
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.runcall(lookup)
    profiled = time.perf_counter() - start
    print(f"{len(texts)} texts: {plain:.3f} s ({1e6 * plain / len(texts):.0f} µs a text); "
          f"under cProfile {profiled:.3f} s ({profiled / plain:.1f}x)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
