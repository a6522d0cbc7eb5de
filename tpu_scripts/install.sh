#!/usr/bin/env bash
# Copies this checkout to every worker of the TPU VM and installs t5rank there. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  cat <<EOF2
usage: install.sh [settings] [--dry-run]

Installs t5rank on EVERY worker of the TPU VM (--worker=all; a v3-8 has one, a v3-32 four):
  1. packs the committed HEAD of this checkout (git archive; uncommitted changes are NOT included),
  2. copies it to each worker and unpacks it into ~/t5rank, replacing an earlier copy (it refuses
     while a job is running there: stop.sh first),
  3. runs tpu_scripts/on_worker.sh install there: Python 3.11 and a virtual environment
     ~/t5rank-venv with \`python3 -m pip install -e '.[tpu]'\` (jax[tpu] and libtpu).
Run it again after changing the code. Takes a few minutes.

$(settings_help TPU_NAME ZONE PROJECT)

Next: train.sh or score.sh with the same settings.
EOF2
}

while (($#)); do
  shared_flag "$@"
  ((SHIFT)) || die "unknown argument: $1 (see --help)"
  shift "$SHIFT"
done

require TPU_NAME ZONE PROJECT
require_gcloud
tpu_flags
archive=${TMPDIR:-/tmp}/t5rank-$TPU_NAME.tar.gz
if [[ -d $REPO_ROOT/.git ]] && [[ -n $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  say "warning: this checkout has uncommitted changes; the workers get the committed HEAD only"
fi
say "installing t5rank on every worker of $TPU_NAME"
run git -C "$REPO_ROOT" archive --format=tar.gz "--output=$archive" HEAD
run gcloud compute tpus tpu-vm scp "$archive" "$TPU_NAME:t5rank.tar.gz" "${TPU_FLAGS[@]}" --worker=all
new=$WORKER_REPO.new
tpu_ssh all "rm -rf $new && mkdir -p $new && tar -xzf t5rank.tar.gz -C $new && bash $new/tpu_scripts/on_worker.sh install"
run rm -f "$archive"
say "installed; next: train.sh or score.sh with the same settings"
