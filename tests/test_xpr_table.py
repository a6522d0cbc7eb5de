"""benchmarks/xpr_table.py (the cross-lingual Table 3 in miniature): the summary over training seeds
on literal runs, checked by hand, and the commands --train-seeds adds (a dry run)."""

from __future__ import annotations

import pytest
from scipy import stats


@pytest.fixture(scope="module")
def bench(load_benchmark):
  return load_benchmark("xpr_table")


def _write(path, text):
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


def test_over_seeds_by_hand(bench, tmp_path):
  # Two queries, relevant answers a (q1) and c (q2).
  qrels = _write(tmp_path / "qrels.txt", "q1 0 a 1\nq2 0 c 1\n")

  def run(name, q1, q2):  # each list: the documents, best first
    lines = [f"{q} Q0 {d} {r + 1} {10 - r} x" for q, docs in (("q1", q1), ("q2", q2))
             for r, d in enumerate(docs)]
    return _write(tmp_path / f"{name}.run", "\n".join(lines) + "\n")

  # merged: RR (1, 1) on seed 0, (1, 1/2) on seed 1 -> MRR 1 and .75
  # mixed:  RR (1/2, 1/2) on seed 0, (1/3, 1/2) on seed 1 -> MRR .5 and 5/12
  by_seed = {"merged": [run("m0", "ab", "cd"), run("m1", "ab", "dc")],
             "mixed": [run("x0", "ba", "dc"), run("x1", "bda", "dc")]}
  summary = bench.over_seeds(qrels, by_seed, [0, 1])
  merged, mixed = summary["rows"]["merged"]["MRR"], summary["rows"]["mixed"]["MRR"]
  assert merged["per_seed"] == pytest.approx([1.0, 0.75])
  assert merged["mean"] == pytest.approx(0.875)
  assert merged["sd"] == pytest.approx(0.25 / 2 ** 0.5)  # sample sd of two values: |a - b| / √2
  assert mixed["per_seed"] == pytest.approx([0.5, 5 / 12])
  assert "p" not in merged
  # per query, averaged over the seeds: merged (1, .75), mixed (5/12, 1/2); the differences
  # (-7/12, -1/4) have mean -5/12 and sd (1/3)/√2, so t = (-5/12) / ((1/3)/√2 / √2) = -2.5
  assert mixed["t"] == pytest.approx(-2.5)
  assert mixed["p"] == pytest.approx(2 * stats.t.sf(2.5, 1))
  assert mixed["p_bonferroni"] == mixed["p"]  # one row compared
  table = bench.format_seeds(summary)
  assert "| merged | " in table and "1.0000 / 0.7500" in table and "(baseline)" in table
  # the dense rows: de_mixed against de_merged (the same runs: the same t), de_merged against merged
  by_seed.update(de_merged=by_seed["merged"], de_mixed=by_seed["mixed"])
  summary = bench.over_seeds(qrels, by_seed, [0, 1])
  de_mixed = summary["rows"]["de_mixed"]
  assert de_mixed["baseline"] == "de_merged" and de_mixed["MRR"]["t"] == pytest.approx(-2.5)
  assert summary["rows"]["de_merged"]["baseline"] == "merged"
  assert summary["rows"]["de_merged"]["MRR"]["p"] == 1.0  # the same per-query values as merged
  assert de_mixed["MRR"]["p_bonferroni"] == pytest.approx(min(1.0, 3 * de_mixed["MRR"]["p"]))
  assert "vs de_merged |" in bench.format_seeds(summary)


def test_train_seeds_dry_run_and_bad_values(bench, capsys, tmp_path):
  assert bench.main(["--workdir", str(tmp_path), "--rows", "merged,mixed",
                     "--train-seeds", "0,1", "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert f"--checkpoint {tmp_path}/mixed_seed1/final" in out and "--gin.SEED=1" in out
  assert f"--output {tmp_path}/merged_seed1.run" in out
  assert out.count("--gin.SEED=") == 2  # seed 0 trains with the gin's own SEED, as before
  for bad in (["--train-seeds", "1,2"], ["--train-seeds", "0,0"], ["--train-seeds", "0,x"],
              ["--rows", "mixed", "--train-seeds", "0,1"]):
    with pytest.raises(SystemExit):
      bench.main(["--workdir", str(tmp_path), "--dry-run", *bad])


def test_dense_rows_dry_run(bench, capsys, tmp_path):
  assert bench.main(["--workdir", str(tmp_path), "--rows", "merged,de_merged,de_mixed",
                     "--train-seeds", "0,1", "--seed-rows", "merged,de_merged,de_mixed",
                     "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert "dual_encoder_xpr_cpu.gin" in out
  assert "MIXTURE_OR_TASK_NAME=" in out and "insuranceqa_enzh_mixed" in out
  assert f"index --encoder {tmp_path}/de_mixed/best" in out
  assert f"retrieve --dense {tmp_path}/de_mixed_index" in out
  assert f"index --encoder {tmp_path}/de_merged_seed1/best" in out
  assert out.count("--gin.SEED=") == 3  # merged, de_merged, de_mixed
  for bad in (["--seed-rows", "de_mixed"], ["--seed-rows", "merged,mixed"]):
    with pytest.raises(SystemExit):
      bench.main(["--workdir", str(tmp_path), "--rows", "merged,de_merged,de_mixed",
                  "--train-seeds", "0,1", "--dry-run", *bad])


def test_dense_rows_alone_need_no_monot5(bench, capsys, tmp_path):
  # de_merged is the dense rows' own baseline: no pre-training, no merged monoT5 to train
  assert bench.main(["--workdir", str(tmp_path), "--rows", "de_merged,de_mixed",
                     "--train-seeds", "0,1", "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert "pretrain_tiny_enzh_cpu.gin" not in out and "xpr_tiny_cpu.gin" not in out
  assert f"index --encoder {tmp_path}/de_mixed_seed1/best" in out


def test_dense_xpi_rows_start_from_the_xpi_dual_encoder(bench, capsys, tmp_path):
  assert bench.main(["--workdir", str(tmp_path), "--rows", "de_xpi_merged", "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert f"{tmp_path}/de_xpi'" in out and "xpi_enzh" in out and "TRAIN_STEPS=2000" in out
  assert f"INIT_CHECKPOINT='\"'\"'{tmp_path}/de_xpi/best" in out
  assert bench.baseline_of("de_xpi_mixed") == "de_mixed" and bench.baseline_of("mixed") == "merged"
