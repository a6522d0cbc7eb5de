#!/usr/bin/env bash
# Stops a training or scoring job on every worker of the TPU VM. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  cat <<EOF2
usage: stop.sh [settings] --job JOB [--dry-run]

Stops JOB (e.g. train_monot5_base_msmarco, score_msmarco-dev) on EVERY worker (--worker=all), with
all the processes it started. Its log stays in ~/t5rank-logs/JOB.log; checkpoints already written to
the model directory stay, and train.sh with the same model directory continues from them.

  --job JOB                the job to stop (as train.sh and score.sh print it; required)
$(settings_help TPU_NAME ZONE PROJECT)
EOF2
}

job=''
while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --job | --job=*) flag_value "$@" && job=$VALUE ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
  fi
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT
[[ -n $job ]] || die "missing --job (see --help); nothing was run"
[[ $job =~ ^[A-Za-z0-9_.-]+$ ]] || die "--job may hold only letters, digits, _ . -: $job"
require_gcloud
tpu_ssh all "cd $WORKER_REPO && bash tpu_scripts/on_worker.sh stop $job"
