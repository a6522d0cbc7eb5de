#!/usr/bin/env bash
# Launches monoT5 training of a gin experiment on every worker of the TPU VM. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  cat <<EOF2
usage: train.sh [settings] EXPERIMENT [--model-dir gs://...] [--gin.NAME=VALUE ...] [--dry-run]

Starts \`t5rank train --gin_file=... --gin.MODEL_DIR=...\` on EVERY worker (--worker=all), in the
background under nohup with output in ~/t5rank-logs/JOB.log on each worker, and returns. On a pod
slice (v3-32 and up) that is one process per host; the trainer joins them with jax.distributed.
Follow it with logs.sh. Run install.sh first.

EXPERIMENT  base | large | 3B  (monoT5 on MS MARCO passage: gin/experiments/monot5_SIZE_msmarco.gin)
            or a gin file, relative to the repository root or the package, e.g. gin/experiments/other.gin

Expected, from the paper (100k steps of batch 128, on ONE TPU v3-8; MS MARCO passage dev MRR@10):
  base   about 12 h    MRR@10 .363   (a TPU v3-8 reproduction got .3816)
  large  about 48 h    MRR@10 .383
  3B     about 160 h   MRR@10 .382   (a TPU v3-8 reproduction got .3984)
  (BM25 alone: .184.) The MRR comes from scoring MS MARCO dev with the final checkpoint: score.sh.

$(settings_help TPU_NAME ZONE PROJECT BUCKET)
  --model-dir gs://...     where checkpoints go (default gs://BUCKET/t5rank/models/EXPERIMENT_NAME);
                           must be on GCS: every worker writes to it and it outlives the VM
  --gin.NAME=VALUE         passed on to the trainer as is, e.g. the data paths the experiment file
                           asks for: --gin.MSMARCO_TRIPLES="'gs://BUCKET/msmarco/triples.train.small.tsv'"
                           (gin strings need the inner quotes)
EOF2
}

experiment='' model_dir='' gin_bindings=()
while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --model-dir | --model-dir=*) flag_value "$@" && model_dir=$VALUE ;;
      --gin.*=*) gin_bindings+=("$1") && SHIFT=1 ;;
      -*) die "unknown argument: $1 (see --help)" ;;
      *)
        [[ -z $experiment ]] || die "one EXPERIMENT only; got $experiment and $1"
        experiment=$1 && SHIFT=1
        ;;
    esac
  fi
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT
[[ -n $experiment ]] || die "missing EXPERIMENT: base, large, 3B or a gin file (see --help)"
case $experiment in
  base | large | 3B) gin_file=gin/experiments/monot5_${experiment}_msmarco.gin ;;
  *.gin) gin_file=$experiment ;;
  *) die "EXPERIMENT must be base, large, 3B or a .gin file, not: $experiment" ;;
esac
[[ $gin_file != /* ]] || die "give the gin file relative to the repository root ($REPO_ROOT) or the package (gin/...), not: $gin_file"
[[ -f $REPO_ROOT/$gin_file || -f $REPO_ROOT/t5rank/$gin_file ]] ||
  die "no gin file $gin_file in this checkout ($REPO_ROOT); the workers get this checkout from install.sh"
name=$(basename "$gin_file" .gin)
if [[ -z $model_dir ]]; then
  require BUCKET
  model_dir=gs://$BUCKET/t5rank/models/$name
fi
[[ $model_dir == gs://* ]] || die "--model-dir must be a gs:// path (every worker writes there), not: $model_dir"
require_gcloud

case $name in
  monot5_base_msmarco) expected="about 12 h on one TPU v3-8; MS MARCO passage dev MRR@10 .363 in the paper" ;;
  monot5_large_msmarco) expected="about 48 h on one TPU v3-8; MS MARCO passage dev MRR@10 .383 in the paper" ;;
  monot5_3B_msmarco) expected="about 160 h on one TPU v3-8; MS MARCO passage dev MRR@10 .382 in the paper" ;;
  *) expected="no reference figure for $gin_file (see the header of the gin file)" ;;
esac
job=train_$name
say "training $gin_file on every worker of $TPU_NAME; checkpoints in $model_dir"
say "expected: $expected"
tpu_ssh all "cd $WORKER_REPO && bash tpu_scripts/on_worker.sh launch $(quote_words "$job" \
  t5rank train "--gin_file=$gin_file" "--gin.MODEL_DIR='$model_dir'" "${gin_bindings[@]}")"
say "started; follow it: $(quote "$SCRIPTS_DIR/logs.sh") --job $job (with the same settings)"
