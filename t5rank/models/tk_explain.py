"""TK's explanations, as in the paper's Figure 2 (Hofstätter et al. 2019, section 4): documents side
by side, each word coloured by the kernel it falls in most strongly, and per kernel the pooled
scores that make up the final score.

    query, documents ─► TK (one member of an ensemble) ─► per document: M (m, n), Kᵢⱼᵏ
    ─► each document word j: its kernel = argmaxₖ maxᵢ Kᵢⱼᵏ (the kernel whose centre μₖ is nearest its
       best cosine with a query word); out-of-vocabulary words and words past the length cap have none
    ─► per kernel: s_logᵏ, W₁ₖ·s_logᵏ, s_lenᵏ, W₂ₖ·s_lenᵏ; then s_log, s_len, β, γ and s
    ─► `render_html` (a self-contained page) and `render_png` (matplotlib, the same content)

With windowed pooling (TUW19-d3) the table shows the whole-document pooling and s is the model's
windowed score.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Sequence

import numpy as np

from t5rank.models.words import UNK_ID


@dataclasses.dataclass
class Explanation:
  """One document's explanation. `spans`: (start, end, kernel index or -1) of each word of `text`
  (-1: not matched: unknown or past the cap); `kernels` rows: (μ, s_logᵏ, W₁ₖ·s_logᵏ, s_lenᵏ,
  W₂ₖ·s_lenᵏ)."""
  docid: str
  text: str
  spans: list[tuple[int, int, int]]
  kernels: np.ndarray  # (K, 5)
  s_log: float
  s_len: float
  beta: float
  gamma: float
  score: float


def _member(params, config):
  import jax
  if config.ensemble == 1:
    return params, config
  return jax.tree.map(lambda x: x[0], params), config.replace(ensemble=1)


def explain(reranker, params, query: str, documents: Sequence[tuple[str, str]]
            ) -> list[Explanation]:
  """Explanations of `documents` ((docid, text) pairs) for `query` by a TK `reranker` with
  `params` (an ensemble is explained by its first member)."""
  import jax.numpy as jnp

  from t5rank.models.tk import TKNetwork

  params, config = _member(params, reranker.config)
  network = TKNetwork(config)
  apply = lambda *a, **k: network.apply({"params": params}, *a, **k)
  mus = np.asarray(config.kernel_mus)
  q_ids = reranker.vocabulary.encode(query, config.max_query_length)[0]
  q = jnp.asarray(np.pad(q_ids, (0, config.max_query_length - len(q_ids)))[None])
  query_vectors = apply(q, method=TKNetwork.encode)
  out = []
  for docid, text in documents:
    d_ids = reranker.vocabulary.encode(text, config.max_document_length)[0]
    d = jnp.asarray(np.pad(d_ids, (0, max(config.max_document_length - len(d_ids), 0)))[None])
    doc_vectors = apply(d, method=TKNetwork.encode)
    score, parts = apply(query_vectors, q > UNK_ID, doc_vectors, d > UNK_ID,
                         method=TKNetwork.score)
    match = np.asarray(parts["match"][0])  # (m, n)
    kernel = np.exp(-np.square(match[..., None] - mus) / (2 * config.kernel_sigma ** 2))
    kernel = kernel[:len(q_ids)][np.asarray(q_ids) > UNK_ID]  # real query words
    best = kernel.max(axis=0).argmax(axis=-1) if kernel.size else np.zeros(match.shape[1], int)
    lowered = text.lower()
    source = lowered if len(lowered) == len(text) else text
    spans = []
    for j, m in enumerate(re.finditer(r"\w+", source)):
      matched = j < len(d_ids) and d_ids[j] > UNK_ID and kernel.size
      spans.append((m.start(), m.end(), int(best[j]) if matched else -1))
    s_log_k, s_len_k = np.asarray(parts["s_log_k"][0]), np.asarray(parts["s_len_k"][0])
    table = np.stack([mus, s_log_k, s_log_k * np.asarray(params["log_weights"]), s_len_k,
                      s_len_k * np.asarray(params["length_weights"])], axis=1)
    out.append(Explanation(docid, text, spans, table, float(parts["s_log"][0]),
                           float(parts["s_len"][0]), float(parts["beta"]),
                           float(parts["gamma"]), float(score[0])))
  return out


def kernel_colours(mus: Sequence[float]) -> list[str]:
  """One colour per kernel: warm for similar (μ near 1), cool for dissimilar, pale near 0."""
  import matplotlib

  cmap = matplotlib.colormaps["coolwarm"]
  return [matplotlib.colors.to_hex(cmap(0.5 + 0.5 * float(mu))) for mu in mus]


def render_html(query: str, explanations: Sequence[Explanation], mus: Sequence[float]) -> str:
  """A self-contained HTML page: the query, the documents side by side with coloured words, and
  each document's kernel table and scores."""
  colours = kernel_colours(mus)
  columns = []
  for e in explanations:
    pieces, last = [], 0
    for start, end, k in e.spans:
      pieces.append(html.escape(e.text[last:start]))
      word = html.escape(e.text[start:end])
      pieces.append(f'<span class="w" style="background:{colours[k]}" title="kernel mu='
                    f'{mus[k]:+.1f}">{word}</span>' if k >= 0 else f'<span class="o">{word}</span>')
      last = end
    pieces.append(html.escape(e.text[last:]))
    rows = "".join(
        f'<tr><td><span class="key" style="background:{colours[i]}"></span>{row[0]:+.1f}</td>'
        f"<td>{row[1]:.3f}</td><td>{row[2]:+.4f}</td><td>{row[3]:.4f}</td><td>{row[4]:+.5f}</td>"
        "</tr>" for i, row in enumerate(e.kernels))
    columns.append(
        f'<div class="doc"><h2>{html.escape(e.docid)} <small>s = {e.score:.4f}</small></h2>'
        f'<p class="text">{"".join(pieces)}</p><table><tr><th>&mu;<sub>k</sub></th>'
        "<th>s<sub>log</sub><sup>k</sup></th><th>&middot;W<sub>1</sub></th>"
        "<th>s<sub>len</sub><sup>k</sup></th><th>&middot;W<sub>2</sub></th></tr>"
        f"{rows}</table><p class=\"total\">s<sub>log</sub> = {e.s_log:.4f}, "
        f"s<sub>len</sub> = {e.s_len:.5f}, &beta; = {e.beta:.4f}, &gamma; = {e.gamma:.4f}<br>"
        f"<b>s = &beta;&middot;s<sub>log</sub> + &gamma;&middot;s<sub>len</sub> = "
        f"{e.score:.4f}</b></p></div>")
  legend = "".join(f'<span class="key" style="background:{c}"></span>{mu:+.1f} '
                   for c, mu in zip(colours, mus))
  return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>TK explanation</title><style>
body {{ font-family: sans-serif; margin: 1.5em; }}
.docs {{ display: flex; gap: 2em; align-items: flex-start; }}
.doc {{ flex: 1; min-width: 0; }}
.text {{ line-height: 1.7; }}
.w {{ padding: 0 2px; border-radius: 3px; }}
.o {{ color: #999; text-decoration: underline dotted; }}
.key {{ display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em;
        vertical-align: middle; border: 1px solid #888; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ padding: 1px 8px; text-align: right; border-bottom: 1px solid #ddd; }}
</style></head><body>
<h1>Query: {html.escape(query)}</h1>
<p>Each document word is coloured by the kernel it falls in most strongly (its best cosine with a
query word, nearest kernel centre &mu;): {legend}; grey dotted words are out of vocabulary or past
the length cap. TK (Hofstätter et al. 2019), Figure 2.</p>
<div class="docs">{"".join(columns)}</div>
</body></html>
"""


def render_png(path: str, query: str, explanations: Sequence[Explanation],
               mus: Sequence[float], *, words_per_document: int = 220) -> None:
  """The page's content as a PNG: documents side by side (the first `words_per_document` words),
  words on coloured boxes, and each document's kernel table."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  colours = kernel_colours(mus)
  n = len(explanations)
  fig = plt.figure(figsize=(7.5 * n, 11), dpi=110)
  fig.suptitle(f"Query: {query}", fontsize=13, x=0.02, ha="left")
  renderer = fig.canvas.get_renderer()
  for column, e in enumerate(explanations):
    left, width = column / n + 0.01, 1 / n - 0.02
    ax = fig.add_axes([left, 0.36, width, 0.58])
    ax.set_axis_off()
    ax.set_title(f"{e.docid}   s = {e.score:.4f}", loc="left", fontsize=11)
    x, y, line = 0.0, 1.0, 0.035
    ax_width = ax.get_window_extent(renderer).width
    for start, end, k in e.spans[:words_per_document]:
      word = e.text[start:end]
      box = dict(boxstyle="square,pad=0.1", facecolor=colours[k], edgecolor="none") if k >= 0 \
          else None
      t = ax.text(x, y, word, fontsize=9, va="top", bbox=box,
                  color="black" if k >= 0 else "#888888", transform=ax.transAxes)
      w = t.get_window_extent(renderer).width / ax_width + 0.012
      if x + w > 1.0 and x > 0:
        x, y = 0.0, y - line
        t.set_position((x, y))
      x += w
    table = fig.add_axes([left, 0.02, width, 0.32])
    table.set_axis_off()
    cells = [[f"{r[0]:+.1f}", f"{r[1]:.3f}", f"{r[2]:+.4f}", f"{r[3]:.4f}", f"{r[4]:+.5f}"]
             for r in e.kernels]
    shown = table.table(cellText=cells, colLabels=["mu_k", "s_log^k", "x W1", "s_len^k", "x W2"],
                        cellColours=[[c] + ["white"] * 4 for c in colours], loc="upper center",
                        fontsize=8)
    shown.auto_set_font_size(False)
    shown.set_fontsize(8)
    table.text(0.0, 0.0, f"s_log {e.s_log:.4f}  s_len {e.s_len:.5f}  beta {e.beta:.4f}  "
               f"gamma {e.gamma:.4f}  ->  s {e.score:.4f}", fontsize=9, transform=table.transAxes)
  from t5rank.files import atomic_write

  with atomic_write(path, "wb") as f:
    fig.savefig(f, format="png", bbox_inches="tight")  # no blank band around the panels
  plt.close(fig)


def write_explanations(reranker, params, query: str, documents: Sequence[tuple[str, str]],
                       html_path: str, png_path: str) -> list[str]:
  """TK's `t5rank explain`: explains `documents` for `query` (`explain`), writes the page to
  `html_path` (atomically) and its picture to `png_path`; returns a line per document."""
  from t5rank.files import atomic_write

  explanations = explain(reranker, params, query, documents)
  mus = reranker.config.kernel_mus
  with atomic_write(html_path) as f:
    f.write(render_html(query, explanations, mus))
  render_png(png_path, query, explanations, mus)
  return [f"{e.docid}: s = {e.score:.4f} (s_log {e.s_log:.4f}, s_len {e.s_len:.5f})"
          for e in explanations]
