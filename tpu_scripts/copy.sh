#!/usr/bin/env bash
# Copies checkpoints and runs to and from the GCS bucket. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  cat <<EOF2
usage: copy.sh [settings] to-gcs LOCAL [GCS_DIR] [--worker N|all] [--dry-run]
       copy.sh [settings] from-gcs GCS [LOCAL_DIR] [--worker N|all] [--dry-run]

Copies a file or a directory (a checkpoint is a directory; a run is a TREC file) with
\`gcloud storage cp --recursive\`; it lands INSIDE the destination directory, under its own name.
A GCS path is gs://... or a path relative to gs://BUCKET/t5rank/ (train.sh writes checkpoints to
models/EXPERIMENT_NAME, score.sh writes runs to runs/).

  to-gcs LOCAL [GCS_DIR]     upload LOCAL into GCS_DIR (default gs://BUCKET/t5rank/)
  from-gcs GCS [LOCAL_DIR]   download GCS into LOCAL_DIR (default .)
  --worker N|all             copy on that TPU worker instead of this machine (LOCAL is then a path
                             on the worker), e.g. a checkpoint onto every worker
$(settings_help BUCKET TPU_NAME ZONE PROJECT)
  (BUCKET only for a relative GCS path; TPU_NAME, ZONE, PROJECT only with --worker.)

Examples:
  copy.sh from-gcs runs/msmarco-dev.monot5_base_msmarco.trec runs/
  copy.sh to-gcs ~/msmarco msmarco-data       # MS MARCO files for training, into gs://BUCKET/t5rank/msmarco-data/
EOF2
}

worker='' positional=()
while (($#)); do
  shared_flag "$@"
  if ((SHIFT == 0)); then
    case $1 in
      --worker | --worker=*) flag_value "$@" && worker=$VALUE ;;
      -*) die "unknown argument: $1 (see --help)" ;;
      *) positional+=("$1") && SHIFT=1 ;;
    esac
  fi
  shift "$SHIFT"
done

# A GCS path: gs://... as is, anything else under gs://BUCKET/t5rank/.
gcs_path() {
  if [[ $1 == gs://* ]]; then
    GCS=$1
  else
    require BUCKET
    GCS=gs://$BUCKET/t5rank/${1#/}
  fi
}

((${#positional[@]} >= 2 && ${#positional[@]} <= 3)) ||
  die "expected to-gcs LOCAL [GCS_DIR] or from-gcs GCS [LOCAL_DIR] (see --help)"
case ${positional[0]} in
  to-gcs)
    source_path=${positional[1]}
    gcs_path "${positional[2]:-}"
    destination=${GCS%/}/
    [[ $source_path != gs://* ]] || die "to-gcs copies a local path, not: $source_path"
    ;;
  from-gcs)
    gcs_path "${positional[1]}"
    source_path=${GCS%/}
    destination=${positional[2]:-.}
    [[ $destination != gs://* ]] || die "from-gcs copies to a local directory, not: $destination"
    destination=${destination%/}/
    ;;
  *) die "the first argument must be to-gcs or from-gcs, not: ${positional[0]}" ;;
esac
# A path for the worker's shell: quoted, but a leading ~/ left for it to expand.
# shellcheck disable=SC2088
worker_path() {
  if [[ $1 == '~/'* ]]; then
    printf '~/%s' "$(quote "${1#'~/'}")"
  else
    quote "$1"
  fi
}

[[ -z $worker || $worker =~ ^([0-9]+|all)$ ]] || die "--worker must be a worker number or all, not: $worker"
[[ -z $worker ]] || require TPU_NAME ZONE PROJECT
require_gcloud

if [[ -z $worker ]]; then
  if [[ ${positional[0]} == from-gcs ]]; then
    run mkdir -p "$destination"
  fi
  run gcloud storage cp --recursive "$source_path" "$destination"
else
  remote="gcloud storage cp --recursive $(worker_path "$source_path") $(worker_path "$destination")"
  if [[ ${positional[0]} == from-gcs ]]; then
    remote="mkdir -p $(worker_path "$destination") && $remote"
  fi
  tpu_ssh "$worker" "$remote"
fi
