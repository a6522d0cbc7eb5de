#!/usr/bin/env bash
# Follows the log of a training or scoring job on a TPU worker. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  cat <<EOF2
usage: logs.sh [settings] [--job JOB] [--worker N|all] [--lines N] [--no-follow] [--dry-run]

Shows ~/t5rank-logs/JOB.log on a TPU worker and follows it (tail -F) until Ctrl-C; stopping the
tail leaves the job running (stop.sh stops it). Jobs are named by train.sh (train_monot5_base_msmarco, ...) and
score.sh (score_msmarco-dev, score_robust04); each log ends with the job's exit status.

  --job JOB                the job (default: the one started last on that worker)
  --worker N|all           which worker: 0 (default),
                           1, ..., or all (the lines of all workers, interleaved)
  --lines N                lines of history to show first (default 100)
  --no-follow              print the lines and return
$(settings_help TPU_NAME ZONE PROJECT)
EOF2
}

job=latest worker=0 lines=100 follow=1
while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --job | --job=*) flag_value "$@" && job=$VALUE ;;
      --worker | --worker=*) flag_value "$@" && worker=$VALUE ;;
      --lines | --lines=*) flag_value "$@" && lines=$VALUE ;;
      --no-follow) follow=0 && SHIFT=1 ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
  fi
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT
[[ $job =~ ^[A-Za-z0-9_.-]+$ ]] || die "--job may hold only letters, digits, _ . -: $job"
[[ $worker =~ ^([0-9]+|all)$ ]] || die "--worker must be a worker number or all, not: $worker"
[[ $lines =~ ^[0-9]+$ ]] || die "--lines must be a number, not: $lines"
require_gcloud
tail_flags="-n $lines"
if ((follow)); then
  tail_flags+=" -F"
fi
tpu_ssh "$worker" "tail $tail_flags $WORKER_LOGS/$job.log"
