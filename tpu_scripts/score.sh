#!/usr/bin/env bash
# Launches batch scoring (reranking) of a candidate run on every worker of the TPU VM. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  cat <<EOF2
usage: score.sh [settings] TASK --checkpoint CKPT --queries Q --corpus C --run CANDIDATES
                [--output OUT] [--model-size SIZE] [any \`t5rank score\` option ...] [--dry-run]

Starts \`t5rank score\` on EVERY worker (--worker=all; one process per host on a pod slice), in the
background under nohup with output in ~/t5rank-logs/score_TASK.log on each worker, and returns.
gs:// inputs are first copied to the worker's disk (~/t5rank-data), and a gs:// output is copied
up when scoring ends. Follow it with logs.sh; fetch the run with copy.sh. Run install.sh first.

TASK: a preset of \`t5rank score\` options; an option you give replaces the preset's.
  msmarco-dev  MS MARCO passage dev: passages as they are, no windows (--window 0).
               About 7M pairs (6,980 queries x 1,000 BM25 candidates): ~5 h for base at ~390
               pairs/s, ~35 h for 3B at ~55 pairs/s on one TPU v3-8. Paper MRR@10: BM25 .184,
               monoT5 base .363, large .383, 3B .382.
  robust04     Robust04 documents: windows of 10 sentences, stride 5, document score = best window
               (--passages maxp --window 10 --stride 5). Queries: the topic descriptions (BM25 used
               the titles). Paper, monoT5-3B over BM25: AP .253 -> .364, nDCG@20 .424 -> .596.
  custom       no preset: t5rank score's own defaults and the options you give.

  --checkpoint CKPT        checkpoint directory (gs://... or a path on the workers; required)
  --queries Q              queries file (required)
  --corpus C               corpus file (required)
  --run CANDIDATES         TREC run of candidates to rerank, e.g. BM25 top 1000 (required)
  --output OUT, -o OUT     reranked TREC run (default gs://BUCKET/t5rank/runs/TASK.CKPT_NAME.trec)
  --model-size SIZE        small, base, large, 3B or 11B: picks the device mesh of each host's 8 v3
                           cores (float32 parameters per core, scripts/mesh_memory.py):
                             small, base, large  -1,1  every core on data (large: 3.0 GB)
                             3B                   4,2  weights split in 2 (5.7 GB; 11.4 replicated)
                             11B                  1,8  weights split in 8 (5.7 GB; 45 replicated)
                           (default: the scorer's, all cores on data)
  --mesh DATA,MODEL        the mesh itself, passed to t5rank score --mesh (overrides --model-size)
  --batch-tokens N         tokens per scoring batch (the scorer's default if not given)
  any other option         passed to \`t5rank score\` as given (see \`t5rank score --help\`), e.g.
                           --dtype bfloat16 --depth 100 --reranker duot5 --window 0 --overwrite.
                           An option's value is the word after it (or --option=VALUE), except
                           for these, which take none:
                             ${BOOLEAN_SCORE_OPTIONS[*]}
                           Only the files of --checkpoint --queries --corpus --run and --output
                           move to and from gs://; give other files as paths on the workers.
$(settings_help TPU_NAME ZONE PROJECT BUCKET)
  (BUCKET is needed only for the default --output.)
EOF2
}

# The options of `t5rank score` that take no value (tests/test_tpu_scripts.py checks the list
# against its parser); every other option takes one.
BOOLEAN_SCORE_OPTIONS=(--skip-missing --bm25-in-input --no-bm25-in-input --distributed --overwrite)

takes_no_value() {
  local option
  for option in "${BOOLEAN_SCORE_OPTIONS[@]}"; do
    [[ $1 != "$option" ]] || return 0
  done
  return 1
}

task='' checkpoint='' queries='' corpus='' candidates='' output='' batch_tokens='' model_size='' mesh=''
passed=() passed_names=()  # the other options of t5rank score (a value as its own word); their names
while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --checkpoint | --checkpoint=*) flag_value "$@" && checkpoint=$VALUE ;;
      --queries | --queries=*) flag_value "$@" && queries=$VALUE ;;
      --corpus | --corpus=*) flag_value "$@" && corpus=$VALUE ;;
      --run | --run=*) flag_value "$@" && candidates=$VALUE ;;
      --output | --output=* | -o) flag_value "$@" && output=$VALUE ;;
      --batch-tokens | --batch-tokens=*) flag_value "$@" && batch_tokens=$VALUE ;;
      --model-size | --model-size=*) flag_value "$@" && model_size=$VALUE ;;
      --mesh | --mesh=*) flag_value "$@" && mesh=$VALUE ;;
      -*)
        if takes_no_value "$1"; then
          passed+=("$1") && SHIFT=1
        else
          flag_value "$@" && passed+=("${1%%=*}" "$VALUE")
        fi
        passed_names+=("${1%%=*}")
        ;;
      *)
        [[ -z $task ]] || die "one TASK only; got $task and $1 (an option's value goes right after it)"
        task=$1 && SHIFT=1
        ;;
    esac
  fi
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT
case $task in
  msmarco-dev) preset=(--window 0) ;;
  robust04) preset=(--passages maxp --window 10 --stride 5) ;;
  custom) preset=() ;;
  '') die "missing TASK: msmarco-dev, robust04 or custom (see --help)" ;;
  *) die "TASK must be msmarco-dev, robust04 or custom, not: $task" ;;
esac
task_flags=()
for ((i = 0; i < ${#preset[@]}; i += 2)); do  # the preset's option-value pairs the user did not give
  [[ " ${passed_names[*]} " == *" ${preset[i]} "* ]] || task_flags+=("${preset[i]}" "${preset[i + 1]}")
done
for flag in checkpoint queries corpus candidates; do
  [[ -n ${!flag} ]] || die "missing --${flag/candidates/run} (see --help); nothing was run"
done
if [[ -z $output ]]; then
  require BUCKET
  output=gs://$BUCKET/t5rank/runs/$task.$(basename "${checkpoint%/}").trec
fi
if [[ -n $batch_tokens ]]; then
  [[ $batch_tokens =~ ^[1-9][0-9]*$ ]] || die "--batch-tokens must be a positive integer, not: $batch_tokens"
  task_flags+=(--batch-tokens "$batch_tokens")
fi
if [[ -z $mesh ]]; then
  case $model_size in
    '' | small | base | large) ;;
    3B) mesh=4,2 ;;
    11B) mesh=1,8 ;;
    *) die "--model-size must be small, base, large, 3B or 11B, not: $model_size" ;;
  esac
fi
if [[ -n $mesh ]]; then
  [[ $mesh =~ ^(-1|[1-9][0-9]*),(-1|[1-9][0-9]*)$ ]] || die "--mesh must be DATA,MODEL (e.g. 4,2), not: $mesh"
  task_flags+=(--mesh "$mesh")
fi
require_gcloud

job=score_$task
say "scoring $task on every worker of $TPU_NAME: $checkpoint reranks $candidates; output $output"
tpu_ssh all "cd $WORKER_REPO && bash tpu_scripts/on_worker.sh launch $(quote_words "$job" \
  t5rank score --checkpoint "$checkpoint" --queries "$queries" --corpus "$corpus" --run "$candidates" \
  --output "$output" "${task_flags[@]}" "${passed[@]}")"
say "started; follow it: $(quote "$SCRIPTS_DIR/logs.sh") --job $job (with the same settings)"
