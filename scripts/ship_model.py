"""Ships a trained model inside the package: t5rank/shipped/NAME (`t5rank.checkpoints.shipped`).

    python scripts/ship_model.py --name monot5 --model-dir runs/ship/monot5 \\
        --gin_file=gin/experiments/tiny_insuranceqa_bm25_cpu.gin --data runs/insuranceqa \\
        --command "t5rank train --gin_file=gin/experiments/tiny_insuranceqa_bm25_cpu.gin \\
                   --gin.MODEL_DIR=runs/ship/monot5"
    python scripts/ship_model.py --name duot5 --model-dir runs/ship/duot5 \\
        --gin_file=gin/experiments/duot5_bm25_insuranceqa_cpu.gin \\
        --gin.INIT_CHECKPOINT="'shipped:monot5'" --init monot5 --data runs/insuranceqa --command ...

MODEL_DIR is a finished `t5rank train` run; its `--checkpoint` (default: best when there is one,
else final) is copied to t5rank/shipped/NAME with
  recipe.json: the command, the gin files and bindings, `init` (the shipped model INIT_CHECKPOINT
      names, whose recipe hash enters this one), `gin_config.model_recipe`'s hashes, the run's
      training time (from its TensorBoard-free log: --seconds), date, machine, size;
  slice.json: the first --slice-queries test queries of DATA (a `t5rank demo` work directory:
      data/, bm25.run), their BM25 top --slice-depth candidates with texts and BM25 scores, and this
      model's scores of them (what tests/test_shipped.py checks).
A distilled model (a TEACHER_SCORES binding) enters its teacher by the hash of what made its
scores (`t5rank.data.teacher.teacher_recipe_sha256`), not their path. Before copying,
MODEL_DIR/config.gin must be what the gin files and bindings give (with the run's own MODEL_DIR):
the recipe recorded is the one that trained the model. A shipped model of the same
name is refused unless --replace.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile

from t5rank.allocator import keep_freed_memory


def machine() -> str:
  """The CPU's model name and core count, as BENCHMARKS.md names machines."""
  name = platform.processor() or "unknown CPU"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          name = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  return f"{name}, {os.cpu_count()} cores"


def slice_of(data_dir: str, num_queries: int, depth: int) -> dict:
  """The first `num_queries` judged test queries of a demo work directory, their BM25 top `depth`
  (texts and BM25 scores)."""
  from t5rank.data.readers import read_corpus, read_queries, read_run

  queries = read_queries(os.path.join(data_dir, "data", "queries.tsv"))
  corpus = read_corpus(os.path.join(data_dir, "data", "corpus.jsonl"))
  bm25 = read_run(os.path.join(data_dir, "bm25.run"))
  chosen = [q for q in queries if q in bm25][:num_queries]
  candidates = {q: sorted(bm25[q], key=lambda c: -c[1])[:depth] for q in chosen}
  return {"queries": {q: queries[q] for q in chosen},
          "corpus": {d: corpus[d].text for docs in candidates.values() for d, _ in docs},
          "candidates": {q: [[d, s] for d, s in docs] for q, docs in candidates.items()}}


def score_slice(checkpoint: str, data: dict) -> dict:
  """{qid: [[docid, score], ...]}: `checkpoint`'s reranking of the slice's candidates (all of
  them; a pairwise model's aggregated scores)."""
  from t5rank.models.loading import load_reranker
  from t5rank.data.readers import Document
  from t5rank.ranking.scorer import ScoringOptions, score_candidates

  reranker, params = load_reranker(checkpoint)
  with tempfile.TemporaryDirectory() as tmp:
    run = score_candidates(
        reranker, params, queries=data["queries"],
        corpus={d: Document(text) for d, text in data["corpus"].items()},
        candidates={q: [(d, s) for d, s in docs] for q, docs in data["candidates"].items()},
        output=os.path.join(tmp, "slice.run"), options=ScoringOptions(window=0), progress=False)
  return {q: [[d, s] for d, s in docs] for q, docs in run.items()}


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--name", required=True, help="the shipped model's name (shipped:NAME)")
  p.add_argument("--model-dir", required=True, help="the finished `t5rank train` run")
  p.add_argument("--checkpoint", help="which of its checkpoints (default: best, else final)")
  p.add_argument("--gin_file", action="append", required=True, help="as given to t5rank train")
  p.add_argument("--init", help="the shipped model INIT_CHECKPOINT names (shipped:INIT)")
  p.add_argument("--data", required=True, help="a `t5rank demo` work directory (the slice)")
  p.add_argument("--command", required=True, help="the exact command that trained the model")
  p.add_argument("--seconds", type=float, help="the training's wall time, as measured")
  p.add_argument("--slice-queries", type=int, default=3)
  p.add_argument("--slice-depth", type=int, default=4)
  p.add_argument("--replace", action="store_true", help="replace a shipped model of this name")
  args, extra = p.parse_known_args(argv)

  import gin

  from t5rank.checkpoints import native, shipped
  from t5rank.files import atomic_directory, atomic_write
  from t5rank.training import gin_config

  bindings = gin_config.gin_bindings(extra)
  model_dir = args.model_dir.rstrip(os.sep)
  checkpoint = args.checkpoint or ("best" if native.is_native_checkpoint(
      os.path.join(model_dir, "best")) else "final")
  source = os.path.join(model_dir, checkpoint)
  if not native.is_native_checkpoint(source):
    raise SystemExit(f"{source}: not a finished t5rank checkpoint")
  target = os.path.join(shipped.DIRECTORY, args.name)
  if os.path.exists(target) and not args.replace:
    raise SystemExit(f"{target} exists: --replace to ship this model instead")

  # the recipe given is the one that trained it: MODEL_DIR/config.gin is what it gives there
  ran = [*bindings, f"MODEL_DIR = {args.model_dir!r}"]
  init_path = None
  if args.init:
    init_path = {b.split("=", 1)[0].strip(): b.split("=", 1)[1].strip()
                 for b in bindings if "=" in b}.get("INIT_CHECKPOINT")
    if init_path is None:
      raise SystemExit("--init names the shipped model INIT_CHECKPOINT is: give the "
                       "--gin.INIT_CHECKPOINT the run was trained with")
  gin.clear_config()
  gin_config.parse_gin(list(args.gin_file), ran)
  given = gin.config_str()
  gin.clear_config()
  with open(os.path.join(model_dir, "config.gin"), encoding="utf-8") as f:
    recorded = f.read()
  if given != recorded:
    raise SystemExit(f"{model_dir}/config.gin is not what these gin files and bindings give: "
                     "give the ones the model was trained with")
  init_sha256 = None
  if args.init:
    init = shipped.read_recipe(args.init)
    init_sha256 = init["sha256"]
    with open(os.path.join(shipped.path(args.init), native.MANIFEST_FILE), encoding="utf-8") as f:
      shipped_manifest = json.load(f)
    trained_from = shipped.resolve(ast.literal_eval(init_path))  # the binding's string
    with open(os.path.join(trained_from, native.MANIFEST_FILE), encoding="utf-8") as f:
      if json.load(f) != shipped_manifest:
        raise SystemExit(f"{trained_from} (its INIT_CHECKPOINT) is not shipped:{args.init}")
  named = {b.split("=", 1)[0].strip(): b.split("=", 1)[1].strip() for b in bindings if "=" in b}
  left_out = {"INIT_CHECKPOINT"} if args.init else set()
  teacher_sha256, teacher = None, None
  if "TEACHER_SCORES" in named:  # a distilled model: its teacher by the hash of what made it
    from t5rank.data.teacher import read_teacher, teacher_recipe_sha256
    teacher = read_teacher(ast.literal_eval(named["TEACHER_SCORES"]))
    teacher_sha256 = teacher_recipe_sha256(teacher)
    teacher = {k: v for k, v in teacher.items() if k != "seconds"}
    left_out.add("TEACHER_SCORES")
  hashed = [b for b in bindings if b.split("=", 1)[0].strip() not in left_out]
  recipe = gin_config.model_recipe(args.gin_file, hashed, init_sha256=init_sha256,
                                   teacher_sha256=teacher_sha256)
  data = slice_of(args.data, args.slice_queries, args.slice_depth)
  data["scores"] = score_slice(source, data)
  with atomic_directory(target) as tmp:
    shutil.copytree(source, tmp, dirs_exist_ok=True)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp) for f in fs)
    record = {"name": args.name, "command": args.command, "gin_files": list(args.gin_file),
              "bindings": hashed, "init": args.init, "checkpoint": checkpoint, **recipe,
              **({"teacher": teacher} if teacher else {}),
              "step": native.read_metadata(source).get("step"),
              "trained": {"date": datetime.date.today().isoformat(), "machine": machine(),
                          "seconds": args.seconds},
              "size_bytes": size}
    with atomic_write(os.path.join(tmp, shipped.RECIPE_FILE)) as f:
      json.dump(record, f, indent=1)
    with atomic_write(os.path.join(tmp, shipped.SLICE_FILE)) as f:
      json.dump(data, f, indent=1)
  print(f"shipped {source} as shipped:{args.name} ({size / 1e6:.1f} MB, recipe "
        f"{recipe['sha256'][:12]})")
  return 0


if __name__ == "__main__":
  keep_freed_memory()
  sys.exit(main())
