#!/bin/bash
# RankT5 Encoder-Decoder (listwise softmax loss) against monoT5 (pointwise), both tiny, from random
# weights, the same steps and 32 inputs a step; seeds 0, 1, 2; each scored on the first 1000
# InsuranceQA test queries' candidates and evaluated against their qrels.
#   bash benchmarks/experiments/rankt5_vs_monot5.sh DEMO_WORKDIR OUT [STEPS] [SETTING] [MODELS]
# MODELS: of rankt5 (Encoder-Decoder), rankt5_encoder (Encoder-only: the same recipe with its
# family and config, without term-matching heads, which initialize only the encoder-decoder) and
# monot5; default "rankt5 monot5".
# SETTING plain (default): neither reads the BM25 score (gin/experiments/rankt5_insuranceqa_cpu.gin
# against tiny_insuranceqa_cpu.gin), each reranks the BM25 top 100; bm25: both read it in their
# input and rerank each query's whole pool (about 200 answers), the demo's setting and its monoT5
# stage's (rankt5_insuranceqa_bm25_cpu.gin against tiny_insuranceqa_bm25_cpu.gin, the demo's
# monoT5 recipe). Run again, it reuses the trained models (and refuses to overwrite the runs).
# DEMO_WORKDIR: a `t5rank demo` work directory (runs/insuranceqa_cascade: its data/, bm25.run,
# qrels.txt). Prints `t5rank evaluate`'s table of the BM25 run and the reranked runs (three a
# model); each step's seconds go to OUT/done.txt.
set -euo pipefail
D=${1:?a t5rank demo work directory}; OUT=${2:?an output directory}; STEPS=${3:-4000}
MODELS=${5:-rankt5 monot5}
for model in $MODELS; do
  case $model in rankt5|rankt5_encoder|monot5) ;;
    *) echo "MODELS are rankt5, rankt5_encoder and monot5, got $model" >&2; exit 2 ;; esac
done
case "${4:-plain}" in
  plain) RANKT5=rankt5_insuranceqa_cpu.gin; MONOT5=tiny_insuranceqa_cpu.gin
         DEPTH=100; RUN="$OUT/bm25_top100.run" ;;
  bm25) RANKT5=rankt5_insuranceqa_bm25_cpu.gin; MONOT5=tiny_insuranceqa_bm25_cpu.gin
        DEPTH=all; RUN="$OUT/bm25_pool.run" ;;
  *) echo "SETTING is plain or bm25, got $4" >&2; exit 2 ;;
esac
T5RANK=${T5RANK:-.venv/bin/t5rank}
mkdir -p "$OUT"
head -n 1000 "$D/data/queries.tsv" > "$OUT/queries.tsv"
cut -f1 "$OUT/queries.tsv" > "$OUT/qids"
awk 'NR==FNR{q[$1]=1; next} ($1 in q)' "$OUT/qids" "$D/qrels.txt" > "$OUT/qrels.txt"
# each query's BM25 top DEPTH (the demo's bm25.run holds each query's whole pool, ranked)
awk -v depth="$DEPTH" 'NR==FNR{q[$1]=1; next} ($1 in q) && (depth == "all" || $4 <= depth)' \
  "$OUT/qids" "$D/bm25.run" > "$RUN"
timed() {  # timed NAME COMMAND...: runs it, its output to OUT/NAME.log, its seconds to done.txt
  local name=$1 start=$SECONDS; shift
  "$@" > "$OUT/$name.log" 2>&1
  echo "$name $((SECONDS - start)) s" >> "$OUT/done.txt"
}
for seed in 0 1 2; do
  for model in $MODELS; do
    case $model in
      rankt5) gin=$RANKT5; extra=() ;;
      rankt5_encoder) gin=$RANKT5; extra=("--gin.MODEL_FAMILY='rankt5_encoder'"
        "--gin.MODEL_CONFIG=@rankt5_encoder.RankT5EncoderConfig()"
        "--gin.trainer.Init.term_matching_heads=0") ;;
      monot5) gin=$MONOT5; extra=(--gin.trainer.Loop.eval_fn=None) ;;
    esac
    timed "${model}_s$seed.train" "$T5RANK" train --gin_file="gin/experiments/$gin" \
      --gin.MODEL_DIR="$OUT/${model}_s$seed" --gin.TRAIN_STEPS="$STEPS" \
      --gin.CHECKPOINT_EVERY="$STEPS" --gin.SEED=$seed "${extra[@]}"
  done
  for model in $MODELS; do
    timed "${model}_s$seed.score" "$T5RANK" score --checkpoint "$OUT/${model}_s$seed/final" \
      --queries "$OUT/queries.tsv" --corpus "$D/data/corpus.jsonl" \
      --run "$RUN" --window 0 -o "$OUT/${model}_s$seed.run"
  done
done
runs=()
for model in $MODELS; do runs+=("$OUT/${model}"_s?.run); done
"$T5RANK" evaluate --qrels "$OUT/qrels.txt" "$RUN" "${runs[@]}"
