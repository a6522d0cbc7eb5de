#!/usr/bin/env bash
# Deletes the TPU VM. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

YES=0

usage() {
  cat <<EOF2
usage: delete_tpu.sh [settings] [--yes] [--dry-run]

Deletes the TPU VM and everything on its disks (~/t5rank-logs, local runs and copies). What is in
the GCS bucket (checkpoints, runs copied up) stays. gcloud asks to confirm unless --yes.

$(settings_help TPU_NAME ZONE PROJECT)
  --yes                    do not ask (gcloud --quiet)
EOF2
}

while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --yes) YES=1 && SHIFT=1 ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
  fi
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT
require_gcloud
tpu_flags
extra=()
if ((YES)); then
  extra+=(--quiet)
fi
say "deleting TPU VM $TPU_NAME in $ZONE (project $PROJECT); the bucket is not touched"
run gcloud compute tpus tpu-vm delete "$TPU_NAME" "${TPU_FLAGS[@]}" "${extra[@]}"
