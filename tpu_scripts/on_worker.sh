#!/usr/bin/env bash
# Runs ON each TPU worker (the other scripts call it over `gcloud ... ssh --worker=all`); you rarely
# call it yourself. See --help.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

VENV=$HOME/t5rank-venv
LOGS=$HOME/t5rank-logs
DATA=$HOME/t5rank-data
PYTHON=${T5RANK_PYTHON:-python3.11}
LIBTPU_RELEASES=https://storage.googleapis.com/jax-releases/libtpu_releases.html

usage() {
  cat <<EOF
usage: on_worker.sh [--dry-run] install
       on_worker.sh [--dry-run] launch JOB COMMAND [ARG ...]
       on_worker.sh [--dry-run] job JOB COMMAND [ARG ...]
       on_worker.sh [--dry-run] stop JOB

Runs on a TPU worker, from the copy of the repository in ~/t5rank.

  install  Moves ~/t5rank.new (unpacked by install.sh) to ~/t5rank, refusing while a job runs; then
           Python >= 3.11 (the TPU image has 3.10; apt python3.11 if missing, override with
           T5RANK_PYTHON), a virtual environment in ~/t5rank-venv, and
           \`python3 -m pip install -e '.[tpu]'\` (jax[tpu] with libtpu); then prints the TPU cores seen.
  launch   Starts \`job JOB COMMAND ...\` in the background under nohup, output in ~/t5rank-logs/JOB.log
           (~/t5rank-logs/latest.log points to it), pid in ~/t5rank-logs/JOB.pid. Refuses while JOB
           is still running. Returns at once, so one ssh to every worker starts the job everywhere.
  job      Runs COMMAND in the foreground with ~/t5rank-venv/bin first on PATH. For \`t5rank score\`,
           gs:// inputs (--checkpoint --queries --corpus --run) are first copied to
           ~/t5rank-data/FLAG/, and a gs:// --output is written locally, then copied up by the worker
           that wrote it. Ends by printing the exit status.
  stop     Stops JOB started by launch: the job and every process it started (its process group).

  --dry-run  print the commands, run nothing
EOF
}

install_venv() {
  local pid_file
  for pid_file in "$LOGS"/*.pid; do
    if [[ -f $pid_file ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
      die "job $(basename "$pid_file" .pid) is running on $(hostname); stop it first (stop.sh --job ...)"
    fi
  done
  if [[ -d $HOME/t5rank.new ]]; then  # unpacked by install.sh: it replaces the previous copy
    run rm -rf "$HOME/t5rank"
    run mv "$HOME/t5rank.new" "$HOME/t5rank"
  fi
  if ! command -v "$PYTHON" >/dev/null; then
    run sudo apt-get -o DPkg::Lock::Timeout=600 update
    run sudo apt-get -o DPkg::Lock::Timeout=600 install -y python3.11 python3.11-venv
  fi
  if [[ ! -x $VENV/bin/python3 ]]; then
    run "$PYTHON" -m venv "$VENV"
  fi
  run cd "$HOME/t5rank"
  run "$VENV/bin/python3" -m pip install -q --upgrade pip
  run "$VENV/bin/python3" -m pip install -e '.[tpu]' -f "$LIBTPU_RELEASES"
  run "$VENV/bin/python3" -c 'import jax; print(jax.devices()[0].device_kind, jax.local_device_count(), "local cores,", jax.device_count(), "in all")'
}

launch() {
  local job=$1 pid_file=$LOGS/$1.pid log=$LOGS/$1.log
  shift
  if [[ -f $pid_file ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
    die "job $job is still running on $(hostname) (pid $(cat "$pid_file")); stop it first: kill $(cat "$pid_file")"
  fi
  if ((DRY_RUN)); then
    echo "setsid nohup bash $(quote "$0") job $(quote_words "$job" "$@") > $(quote "$log") 2>&1 < /dev/null &"
    return 0
  fi
  mkdir -p "$LOGS"
  # Its own process group (pid = group id), so that stop can end everything the job started.
  setsid nohup bash "$0" job "$job" "$@" >"$log" 2>&1 </dev/null &
  echo $! >"$pid_file"
  ln -sfn "$job.log" "$LOGS/latest.log"
  echo "$(hostname): started $job (pid $!), log $log"
}

stop() {
  local job=$1 pid_file=$LOGS/$1.pid
  if [[ -f $pid_file ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
    run kill -TERM -- "-$(cat "$pid_file")"
    echo "$(hostname): stopped $job"
  else
    echo "$(hostname): $job is not running"
  fi
}

# For `t5rank score`: copies gs:// inputs to local disk and rewrites ARGS to the local paths;
# sets UPLOAD_FROM/UPLOAD_TO for a gs:// --output.
stage() {
  local staged=() flag value local_dir
  UPLOAD_FROM='' UPLOAD_TO=''
  while (($#)); do
    flag=$1
    case $flag in
      --checkpoint | --queries | --corpus | --run | --output | \
        --checkpoint=* | --queries=* | --corpus=* | --run=* | --output=*)
        flag_value "$@"
        flag=${flag%%=*}
        shift "$SHIFT"
        value=$VALUE
        if [[ $value == gs://* ]]; then
          local_dir=$DATA/${flag#--}
          if [[ $flag == --output ]]; then
            run mkdir -p "$local_dir"
            UPLOAD_FROM=$local_dir/$(basename "$value")
            UPLOAD_TO=$value
            value=$UPLOAD_FROM
          else
            run rm -rf "$local_dir"
            run mkdir -p "$local_dir"
            run gcloud storage cp --recursive "${value%/}" "$local_dir/"
            value=$local_dir/$(basename "${value%/}")
          fi
        fi
        staged+=("$flag" "$value")
        ;;
      *)
        staged+=("$1")
        shift
        ;;
    esac
  done
  ARGS=("${staged[@]}")
}

job() {
  local job=$1
  shift
  export PATH=$VENV/bin:$PATH TF_CPP_MIN_LOG_LEVEL=3
  run cd "$HOME/t5rank"
  ARGS=("$@")
  UPLOAD_FROM=''
  if [[ ${1:-} == t5rank && ${2:-} == score ]]; then
    stage "$@"
  fi
  say "$(hostname) $(date -u +%FT%TZ): $job starts"
  local status=0
  if ((DRY_RUN)); then
    quote_words "${ARGS[@]}"
    echo
  else
    "${ARGS[@]}" || status=$?
  fi
  if ((status == 0)) && [[ -n $UPLOAD_FROM ]]; then
    if ((DRY_RUN)); then
      echo "if [ -e $(quote "$UPLOAD_FROM") ]; then $(quote_words gcloud storage cp "$UPLOAD_FROM" "$UPLOAD_TO"); fi"
    elif [[ -e $UPLOAD_FROM ]]; then
      run gcloud storage cp "$UPLOAD_FROM" "$UPLOAD_TO"
    fi
  fi
  say "$(hostname) $(date -u +%FT%TZ): $job finished with exit status $status"
  return "$status"
}

while (($#)); do
  case $1 in
    --dry-run) DRY_RUN=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) break ;;
  esac
done
(($#)) || die "no subcommand (install, launch, job or stop); see --help"
command=$1
shift
if [[ $command =~ ^(launch|job|stop)$ ]]; then
  [[ ${1:-} =~ ^[A-Za-z0-9_.-]+$ ]] || die "$command needs a JOB name of letters, digits, _ . - (see --help)"
fi
case $command in
  install) install_venv ;;
  launch | job)
    (($# >= 2)) || die "$command needs JOB and COMMAND; see --help"
    if [[ $command == launch ]]; then launch "$@"; else job "$@"; fi
    ;;
  stop) stop "$1" ;;
  *) die "unknown subcommand: $command; see --help" ;;
esac
