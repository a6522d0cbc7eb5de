"""`t5rank rerank`: the cascade in one command. Every stage is `t5rank score --depth` on the stage
before it (the same numbers), every prefix is evaluated, and the same command run again reuses what
is done and redoes what is not."""

from __future__ import annotations

import json
import os

import pytest

from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.models.t5_weights import save_checkpoint
from t5rank.pipelines.cascade_spec import RerankStage, parse_stage
from t5rank.testing import micro_config, random_params

TEXTS = {f"d{i}": f"policy {'term ' * i}life car rate number {i} {'cover ' * (i % 3)}"
         for i in range(8)}


def inputs(tmp_path) -> list[str]:
  config = micro_config()
  save_checkpoint(str(tmp_path / "mono"), random_params(config, std=0.5), config)
  save_checkpoint(str(tmp_path / "duo"), random_params(config, seed=1, std=0.5), config,
                  {"model": "duot5"})
  (tmp_path / "q.tsv").write_text("q1\tlife policy term\nq2\tcar rate cover\n")
  (tmp_path / "c.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in TEXTS.items()))
  (tmp_path / "qrels").write_text("q1 0 d3 1\nq2 0 d2 1\n")
  return ["rerank", "--queries", str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"),
          "--bm25", "--stage", f"monot5={tmp_path / 'mono'}@6", "--stage",
          f"duo={tmp_path / 'duo'}@3", "--qrels", str(tmp_path / "qrels"), "-o",
          str(tmp_path / "cascade")]


def test_parse_stage():
  assert parse_stage("monot5=runs/m/final@100") == RerankStage("runs/m/final", 100, "monot5")
  assert parse_stage("runs/m/final") == RerankStage("runs/m/final", None, "")
  assert parse_stage("/a/b=c/d@10") == RerankStage("/a/b=c/d", 10, "")  # not a name: a path
  with pytest.raises(ValueError, match="positive number"):
    parse_stage("m=ckpt@0")


def test_each_stage_is_score_at_its_depth_on_the_stage_before(tmp_path, capsys):
  argv = inputs(tmp_path)
  assert cli.main(argv) == 0
  out = tmp_path / "cascade"
  assert sorted(p.name for p in out.glob("*.run")) == ["00_bm25.run", "01_monot5.run",
                                                      "02_duo.run"]
  for stage, before, checkpoint, depth in (("01_monot5", "00_bm25", "mono", "6"),
                                           ("02_duo", "01_monot5", "duo", "3")):
    assert cli.main(["score", "--checkpoint", str(tmp_path / checkpoint), "--queries",
                     str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
                     str(out / f"{before}.run"), "--depth", depth, "--window", "0", "-o",
                     str(tmp_path / f"{stage}.check")]) == 0
    assert read_run(str(out / f"{stage}.run")) == read_run(str(tmp_path / f"{stage}.check"))
  results = json.loads((out / "results.json").read_text())
  stages = results["evaluation"]["stages"]
  assert [s["name"] for s in stages] == ["bm25", "monot5", "duo"]
  assert "vs_first" not in stages[0] and "vs_previous" not in stages[1]
  assert set(stages[2]["vs_first"]) == set(stages[2]["vs_previous"]) == {
      "MRR", "MRR@10", "P@1", "nDCG@10", "MAP"}
  assert results["evaluation"]["comparisons"] == 3  # monoT5 vs BM25, duo vs BM25, duo vs monoT5
  assert [t["pairs"] for t in results["timings"]] == [16, 12, 12]  # 8 + 8, 6 + 6, 3 x 2 + 3 x 2
  table = capsys.readouterr().out
  assert "| stage | MRR | MRR@10 | P@1 | nDCG@10 | MAP | time | pairs/s |" in table


def test_the_same_command_reuses_what_is_done_and_redoes_what_is_not(tmp_path):
  argv = inputs(tmp_path)
  assert cli.main(argv) == 0
  out = tmp_path / "cascade"
  first_stage = os.path.getmtime(out / "01_monot5.run")
  os.remove(out / "02_duo.run")  # as if killed before the last stage finished
  assert cli.main(argv) == 0
  assert os.path.getmtime(out / "01_monot5.run") == first_stage  # reused
  timings = json.loads((out / "results.json").read_text())["timings"]
  assert timings[1].get("reused") and not timings[2].get("reused")
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "notes.txt").write_text("mine")
  with pytest.raises(SystemExit, match="holds files this command did not write"):
    cli.main([*argv[:-1], str(tmp_path / "mine")])  # a directory of the user's


def test_a_fused_stage_is_fuse_of_every_run_over_the_candidates_it_reranked(tmp_path):
  from t5rank.evaluation.metrics import per_query
  from t5rank.ranking.fusion import interpolate_runs, normalize, simplex_grid
  from t5rank.data.readers import read_qrels

  argv = inputs(tmp_path)
  tuned = [*argv[:-2], "--fuse", "--tune-fusion", "-o", str(tmp_path / "valid")]
  assert cli.main(tuned) == 0
  out = tmp_path / "valid"
  results = json.loads((out / "results.json").read_text())
  entry = results["fusion"]["duo+fusion"]
  assert entry["runs"] == ["bm25", "monot5", "duo"]
  rows = results["evaluation"]["stages"]
  assert [s["name"] for s in rows] == ["bm25", "monot5", "duo", "duo+fusion"]
  # each row against BM25 and against the ranking its stage reranked: duo's input is monot5
  assert [r.get("previous") for r in rows] == [None, None, "monot5", "monot5"]
  assert results["evaluation"]["comparisons"] == 5
  runs = [read_run(str(out / f)) for f in ("00_bm25.run", "01_monot5.run", "02_duo.run")]
  monot5 = runs[1]
  top = {q: [d for d, _ in sorted(docs, key=lambda x: -x[1])[:3]] for q, docs in monot5.items()}
  # each run's z-scores over the candidates its stage scored (BM25 all, monoT5 its top 6, duo its
  # top 3), of the top 3 duo reranked
  restricted = []
  for run, depth in zip(runs, (None, 6, 3)):
    scored = {q: sorted(sorted(docs, key=lambda x: -x[1])[:depth]) for q, docs in run.items()}
    z = {q: dict(zip([d for d, _ in docs], normalize([s for _, s in docs])))
         for q, docs in scored.items()}
    restricted.append({q: [(d, z[q][d]) for d in sorted(top[q])] for q in top})
  qrels = read_qrels(str(tmp_path / "qrels"))
  mrr = {w: per_query(qrels, interpolate_runs(restricted, w, normalization="none"),
                      ["MRR"])["MRR"].mean() for w in simplex_grid(3)}
  best = max(mrr.values())
  assert entry["tuning_MRR"] == pytest.approx(best)
  # the tuned weighting is the first of the grid (most weight on BM25, then monoT5) with that MRR
  assert tuple(entry["weights"]) == next(w for w in simplex_grid(3) if mrr[w] == best)
  fused = read_run(str(out / "02_duo+fusion.run"))
  expected = interpolate_runs(restricted, entry["weights"], normalization="none")
  for q in top:
    assert [d for d, _ in fused[q][:3]] == [d for d, _ in expected[q]]
    assert [s for _, s in fused[q][:3]] == pytest.approx([s for _, s in expected[q]])
    below = [d for d, _ in sorted(monot5[q], key=lambda x: -x[1])[3:]]
    assert [d for d, _ in fused[q][3:]] == below  # the rest in the stage before's order

  # the weights applied unchanged elsewhere (the test queries): the same run from the same input
  applied = [*argv[:-2], "--fuse", "--fusion-weights", str(out / "results.json"), "-o",
             str(tmp_path / "test")]
  assert cli.main(applied) == 0
  assert read_run(str(tmp_path / "test" / "02_duo+fusion.run")) == fused
  again = json.loads((tmp_path / "test" / "results.json").read_text())["fusion"]["duo+fusion"]
  assert again["weights"] == entry["weights"] and "tuning_MRR" not in again


def test_a_fusion_that_gives_its_stage_weight_0_is_the_ranking_the_stage_reranked(tmp_path):
  """Each run keeps the normalization it had in the fusions before (z-scores over the candidates
  its stage scored): duo's fusion with monoT5's fusion weights and 0 for duo is monoT5's fusion's
  top 3, in its order and with its scores (normalized over the top 3 alone, it would not be)."""
  argv = inputs(tmp_path)
  stages = [*argv[:-6], "--fuse", *argv[-6:-4], "--fuse", *argv[-4:-2]]  # both fused
  assert cli.main([*stages, "--tune-fusion", "-o", str(tmp_path / "valid")]) == 0
  results = json.loads((tmp_path / "valid" / "results.json").read_text())
  results["fusion"]["monot5+fusion"]["weights"] = [0.4, 0.6]  # both runs weigh: scales matter
  results["fusion"]["duo+fusion"]["weights"] = [0.4, 0.6, 0.0]
  (tmp_path / "weights.json").write_text(json.dumps(results))
  assert cli.main([*stages, "--fusion-weights", str(tmp_path / "weights.json"), "-o",
                   str(tmp_path / "test")]) == 0
  before = read_run(str(tmp_path / "test" / "01_monot5+fusion.run"))
  after = read_run(str(tmp_path / "test" / "02_duo+fusion.run"))
  for q, docs in before.items():
    top = sorted(docs, key=lambda x: (-x[1], x[0]))[:3]
    assert [d for d, _ in after[q][:3]] == [d for d, _ in top]
    assert [s for _, s in after[q][:3]] == pytest.approx([s for _, s in top], abs=1e-12)


def test_fusion_refuses_what_it_cannot_do(tmp_path):
  argv = inputs(tmp_path)
  with pytest.raises(SystemExit, match="--fuse needs --tune-fusion"):
    cli.main([*argv[:-2], "--fuse", "-o", str(tmp_path / "a")])
  with pytest.raises(SystemExit, match="those need a --fuse"):
    cli.main([*argv[:-2], "--tune-fusion", "-o", str(tmp_path / "b")])
  no_qrels = [a for a in argv if a not in ("--qrels", str(tmp_path / "qrels"))]
  with pytest.raises(SystemExit, match="tunes on --qrels"):
    cli.main([*no_qrels[:-2], "--fuse", "--tune-fusion", "-o", str(tmp_path / "c")])
  (tmp_path / "other.json").write_text('{"fusion": {"monot5+fusion": {"runs": ["bm25", '
                                       '"monot5"], "weights": [0.5, 0.5]}}}')
  with pytest.raises(SystemExit, match="no weights for 'duo\\+fusion'"):
    cli.main([*argv[:-2], "--fuse", "--fusion-weights", str(tmp_path / "other.json"), "-o",
              str(tmp_path / "d")])


@pytest.mark.parametrize("model", ["monot5", "duot5"])
def test_a_stage_that_reads_bm25_scores_gets_the_first_stages_not_the_stage_befores(tmp_path,
                                                                                     model):
  argv = inputs(tmp_path)
  config = micro_config()
  save_checkpoint(str(tmp_path / "bm25mono"), random_params(config, seed=2, std=0.5), config,
                  {"model": model, "bm25_in_input": True})
  stages = ["--stage", f"monot5={tmp_path / 'mono'}@6", "--stage",
            f"reads={tmp_path / 'bm25mono'}@3"]
  assert cli.main([*argv[:6], "--bm25", *stages, "-o", str(tmp_path / "c")]) == 0
  bm25 = read_run(str(tmp_path / "c" / "00_bm25.run"))
  monot5 = read_run(str(tmp_path / "c" / "01_monot5.run"))
  top = {q: [d for d, _ in sorted(docs, key=lambda x: -x[1])[:3]] for q, docs in monot5.items()}
  scores = {q: dict(docs) for q, docs in bm25.items()}
  (tmp_path / "top3.run").write_text("".join(
      f"{q} Q0 {d} {r} {scores[q][d]!r} bm25\n" for q, docs in top.items()
      for r, d in enumerate(docs, 1)))
  assert cli.main(["score", "--checkpoint", str(tmp_path / "bm25mono"), "--queries",
                   str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
                   str(tmp_path / "top3.run"), "--window", "0", "-o",
                   str(tmp_path / "check.run")]) == 0
  check = read_run(str(tmp_path / "check.run"))
  reads = read_run(str(tmp_path / "c" / "02_reads.run"))
  for q in top:
    assert reads[q][:3] == check[q]  # BM25's scores in its input, monoT5's order above
    below = [d for d, _ in sorted(monot5[q], key=lambda x: -x[1])[3:]]
    assert [d for d, _ in reads[q][3:]] == below


def test_a_bm25_reading_stage_is_redone_when_the_first_stages_scores_change(tmp_path):
  argv = inputs(tmp_path)
  config = micro_config()
  save_checkpoint(str(tmp_path / "bm25mono"), random_params(config, seed=2, std=0.5), config,
                  {"bm25_in_input": True})
  docs = sorted(TEXTS)
  out = tmp_path / "c"
  monot5 = []
  for scale in (1.0, 2.0):  # the same order, other BM25 scores
    (tmp_path / "first.run").write_text("".join(
        f"{q} Q0 {d} {r} {scale * (10 - r)} bm25\n" for q in ("q1", "q2")
        for r, d in enumerate(docs, 1)))
    assert cli.main([*argv[:5], "--run", str(tmp_path / "first.run"), "--stage",
                     f"monot5={tmp_path / 'mono'}", "--stage", f"reads={tmp_path / 'bm25mono'}@3",
                     "-o", str(out)]) == 0
    monot5.append((out / "01_monot5.run").read_bytes())
  assert monot5[0] == monot5[1]  # monoT5 reads no BM25 score: its run is the same bytes
  timings = json.loads((out / "results.json").read_text())["timings"]
  assert not timings[2].get("reused")  # the stage that reads them is scored again


def test_fusion_weights_are_refused_for_other_models_or_depths(tmp_path):
  argv = inputs(tmp_path)
  assert cli.main([*argv[:-2], "--fuse", "--tune-fusion", "-o", str(tmp_path / "valid")]) == 0
  other = [a.replace("@3", "@2") for a in argv[:-2]]
  with pytest.raises(SystemExit, match="tuned for other models or depths"):
    cli.main([*other, "--fuse", "--fusion-weights", str(tmp_path / "valid" / "results.json"),
              "-o", str(tmp_path / "test")])
  # weights tuned before each run kept its stage's normalization: refused where that matters (a
  # run that scored more than the fused top K), taken where it does not (depths beyond the lists)
  results = json.loads((tmp_path / "valid" / "results.json").read_text())
  del results["fusion"]["duo+fusion"]["zscores"]
  (tmp_path / "old.json").write_text(json.dumps(results))
  with pytest.raises(SystemExit, match="tuned by an earlier t5rank.*tune them again"):
    cli.main([*argv[:-2], "--fuse", "--fusion-weights", str(tmp_path / "old.json"), "-o",
              str(tmp_path / "old")])
  whole = [a.replace("@3", "@100").replace("@6", "@100") for a in argv[:-2]]
  assert cli.main([*whole, "--fuse", "--tune-fusion", "-o", str(tmp_path / "whole")]) == 0
  results = json.loads((tmp_path / "whole" / "results.json").read_text())
  del results["fusion"]["duo+fusion"]["zscores"]
  (tmp_path / "old_whole.json").write_text(json.dumps(results))
  assert cli.main([*whole, "--fuse", "--fusion-weights", str(tmp_path / "old_whole.json"), "-o",
                   str(tmp_path / "applied")]) == 0
  deeper = [a.replace("@3", "@7") for a in argv[:-2]]  # duo fuses 7, monoT5 scored only 6
  with pytest.raises(SystemExit, match="scored only its top 6"):
    cli.main([*deeper, "--fuse", "--tune-fusion", "-o", str(tmp_path / "deeper")])


def test_judged_queries_outside_the_queries_are_left_out_of_the_averages(tmp_path, capsys):
  """--qrels for more queries than --queries (a whole split's judgments with a few of its
  queries): the averages are over the given queries, not diluted by zeros for the others."""
  argv = inputs(tmp_path)
  (tmp_path / "qrels_all").write_text("q1 0 d3 1\nq2 0 d2 1\nq3 0 d1 1\nq4 0 d4 1\n")
  argv[argv.index("--qrels") + 1] = str(tmp_path / "qrels_all")
  assert cli.main(argv) == 0
  assert "2 judged queries are not in --queries and are left out" in capsys.readouterr().out
  whole = json.loads((tmp_path / "cascade" / "results.json").read_text())["evaluation"]
  assert whole["queries"] == 2
  own = argv[:argv.index("--qrels") + 1] + [str(tmp_path / "qrels"), "-o", str(tmp_path / "c2")]
  assert cli.main(own) == 0
  assert json.loads((tmp_path / "c2" / "results.json").read_text())["evaluation"] == whole
  (tmp_path / "qrels_other").write_text("q3 0 d1 1\n")
  argv[argv.index("--qrels") + 1] = str(tmp_path / "qrels_other")
  with pytest.raises(SystemExit, match="judges no document relevant to a query of --queries"):
    cli.main(argv[:-1] + [str(tmp_path / "c3")])
