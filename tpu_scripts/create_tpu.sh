#!/usr/bin/env bash
# Creates the TPU VM (v3-8 by default). See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

SPOT=0

usage() {
  cat <<EOF2
usage: create_tpu.sh [settings] [--spot] [--dry-run]

Creates a Cloud TPU VM: gcloud compute tpus tpu-vm create NAME --accelerator-type TYPE --version V.
A pod slice (v3-32 and up) is one VM per host ("worker"); the other scripts reach all of them.

$(settings_help TPU_NAME ZONE PROJECT ACCELERATOR_TYPE RUNTIME_VERSION)
  --spot                   a Spot VM: much cheaper, but it may be preempted at any time; then
                           delete it, create and install again, and rerun train.sh with the same
                           model directory

Next: install.sh with the same settings.
EOF2
}

while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --spot) SPOT=1 && SHIFT=1 ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
  fi
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT ACCELERATOR_TYPE RUNTIME_VERSION
require_gcloud
tpu_flags
extra=()
if ((SPOT)); then
  extra+=(--spot)
fi
say "creating TPU VM $TPU_NAME: $ACCELERATOR_TYPE, image $RUNTIME_VERSION, in $ZONE (project $PROJECT)"
run gcloud compute tpus tpu-vm create "$TPU_NAME" "${TPU_FLAGS[@]}" \
  "--accelerator-type=$ACCELERATOR_TYPE" "--version=$RUNTIME_VERSION" "${extra[@]}"
say "next: $(quote_words "$SCRIPTS_DIR/install.sh" --tpu-name "$TPU_NAME" --zone "$ZONE" --project "$PROJECT")"
