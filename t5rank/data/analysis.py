"""How text becomes index terms (Lucene's analyzers as Anserini configures them): BM25 indexes
them (`t5rank.retrieval.bm25`) and training data that matches words the way BM25 does reads them
(`t5rank.data.pseudo_queries`).

    en        lowercase, words (`\\w+`, with inner apostrophes), possessive 's dropped, Lucene's 33
              English stopwords removed, Porter stems (PyStemmer; words of one or two letters as
              they are): Anserini's default English analyzer
    zh        overlapping character bigrams over runs of CJK characters (a lone character stays a
              unigram) and lowercased words of other scripts: Lucene's CJKAnalyzer, no segmenter
    zh-jieba  the jieba segmenter (0.42.1, default dictionary) in its search-engine mode
              (`cut_for_search`: each word plus the dictionary words of two and three characters in
              a longer one, so 人寿保险 also gives 人寿 and 保险; its HMM finds unknown words),
              lowercased, pieces without a letter or digit dropped
"""

from __future__ import annotations

import functools
import logging
import re

LANGUAGES = ("en", "zh", "zh-jieba")
# Lucene's default English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), as Anserini uses it.
ENGLISH_STOPWORDS = frozenset((
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with").split())
_ENGLISH_WORD = re.compile(r"\w+(?:['’]\w+)*")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_OR_WORD = re.compile(f"([{_CJK}]+)|((?:(?![{_CJK}])\\w)+)")
_HAS_WORD_CHARACTER = re.compile(r"\w")


def tokenize(text: str, language: str) -> list[str]:
  """The index terms of `text` for `language` (see the module docstring)."""
  text = text.lower()
  if language == "en":
    words = [w[:-2] if w.endswith(("'s", "’s")) else w for w in _ENGLISH_WORD.findall(text)]
    words = [w for w in words if w not in ENGLISH_STOPWORDS]
    # Porter's algorithm leaves words of one or two letters alone (Snowball's "porter" would turn
    # "s" into "").
    return [stem if len(w) > 2 else w for w, stem in zip(words, _porter().stemWords(words))]
  if language == "zh":
    terms = []
    for cjk, word in _CJK_OR_WORD.findall(text):
      if word:
        terms.append(word)
      elif len(cjk) == 1:
        terms.append(cjk)
      else:
        terms.extend(cjk[i:i + 2] for i in range(len(cjk) - 1))
    return terms
  if language == "zh-jieba":
    return [w for w in _jieba().lcut_for_search(text) if _HAS_WORD_CHARACTER.search(w)]
  raise ValueError(f"unknown language {language!r}; expected one of {LANGUAGES}")


@functools.cache
def _jieba():
  """jieba's default tokenizer, its dictionary loaded once (and its start-up log silenced)."""
  import jieba

  jieba.setLogLevel(logging.WARNING)
  tokenizer = jieba.Tokenizer()
  tokenizer.initialize()
  return tokenizer


@functools.cache
def _porter():
  import Stemmer
  return Stemmer.Stemmer("porter")
