"""TF-IDF retrieval, the classic vector-space baseline of Gillick et al. (2018, section 3.4):
scikit-learn's TfidfVectorizer over the corpus (lowercased words `\\w+`, the same words as the
dual encoder's vocabulary; raw term frequency times smoothed IDF ln((1 + N) / (1 + df)) + 1, rows
L2-normalized), documents ranked by cosine with the query's vector. `save` keeps the fitted
vectorizer (joblib) and the document matrix, though fitting InsuranceQA's 27,413 answers takes
seconds."""

from __future__ import annotations

import os
from typing import Mapping, Optional

import numpy as np

from t5rank.data.readers import Document, Run, document_text
from t5rank.files import atomic_directory
from t5rank.retrieval.base import Retriever

TOKEN_PATTERN = r"(?u)\w+"
QUERY_CHUNK = 256  # queries scored per sparse-dense product


class TfIdf(Retriever):
  name = "tfidf"

  def __init__(self, vectorizer, docids, matrix):
    self.vectorizer, self.docids, self.matrix = vectorizer, list(docids), matrix
    self.position = {d: i for i, d in enumerate(self.docids)}

  @classmethod
  def build(cls, corpus: Mapping[str, Document], **options) -> "TfIdf":
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN, dtype=np.float32,
                                 **options)
    docids = list(corpus)
    matrix = vectorizer.fit_transform([document_text(corpus[d]) for d in docids])
    return cls(vectorizer, docids, matrix.tocsr())

  @classmethod
  def load(cls, directory: str, **options) -> "TfIdf":
    """The model `save` wrote (the fitted vectorizer, the document matrix, the ids)."""
    import joblib
    import scipy.sparse

    del options
    with open(os.path.join(directory, "docids.txt"), encoding="utf-8") as f:
      docids = [line.rstrip("\n") for line in f]
    return cls(joblib.load(os.path.join(directory, "vectorizer.joblib")), docids,
               scipy.sparse.load_npz(os.path.join(directory, "matrix.npz")).tocsr())

  def save(self, directory: str) -> None:
    import joblib
    import scipy.sparse

    with atomic_directory(directory) as temporary:
      joblib.dump(self.vectorizer, os.path.join(temporary, "vectorizer.joblib"))
      scipy.sparse.save_npz(os.path.join(temporary, "matrix.npz"), self.matrix)
      with open(os.path.join(temporary, "docids.txt"), "w", encoding="utf-8") as f:
        f.writelines(d + "\n" for d in self.docids)

  def retrieve(self, queries: Mapping[str, str], *, k: int = 1000,
               candidates: Optional[Run] = None) -> Run:
    qids = list(queries)
    run: Run = {}
    for start in range(0, len(qids), QUERY_CHUNK):
      chunk = qids[start:start + QUERY_CHUNK]
      scores = (self.vectorizer.transform([queries[q] for q in chunk]) @ self.matrix.T).toarray()
      for qid, row in zip(chunk, scores):
        if candidates is not None:
          if qid in candidates:
            unknown = [d for d, _ in candidates[qid] if d not in self.position]
            if unknown:
              raise ValueError(f"query {qid}: candidate {unknown[0]!r} is not in the corpus")
            hits = [(d, float(row[self.position[d]])) for d, _ in candidates[qid]]
            run[qid] = sorted(hits, key=lambda h: (-h[1], h[0]))
          continue
        matched = np.flatnonzero(row > 0)  # documents sharing no word with the query are left out
        if len(matched) > k:
          matched = matched[np.argpartition(-row[matched], k - 1)[:k]]
          # ties at the k-th score: keep every document scoring it, then cut by document id
          matched = np.flatnonzero(row >= row[matched].min())
        hits = sorted(((self.docids[i], float(row[i])) for i in matched), key=lambda h: (-h[1], h[0]))
        run[qid] = hits[:k]
    return run
