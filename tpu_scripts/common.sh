# shellcheck shell=bash disable=SC2034  # the variables here are used by the scripts that source it
# Shared by the Cloud TPU scripts in this folder: settings, flag parsing, quoting and `run`.
# Source it (`source "$(dirname "$0")/common.sh"`); it does nothing on its own.
#
# Settings come from flags or from the environment, flags winning:
#   TPU_NAME, ZONE, PROJECT, BUCKET     no default: a script that needs one refuses to run without it
#   ACCELERATOR_TYPE                    default v3-8 (the paper's TPU)
#   RUNTIME_VERSION                     default tpu-ubuntu2204-base (the base image for JAX on every TPU)
# With --dry-run a script prints the exact commands it would run, one per line, and runs none of them:
# the printed lines are themselves a shell script. Lines starting with `#` are information.

TPU_NAME=${TPU_NAME:-}
ZONE=${ZONE:-}
PROJECT=${PROJECT:-}
BUCKET=${BUCKET:-}
ACCELERATOR_TYPE=${ACCELERATOR_TYPE:-v3-8}
RUNTIME_VERSION=${RUNTIME_VERSION:-tpu-ubuntu2204-base}
DRY_RUN=0

# Where things live on every TPU worker. `~` is left for the worker's shell to expand.
# shellcheck disable=SC2088
WORKER_REPO='~/t5rank'
# shellcheck disable=SC2088
WORKER_LOGS='~/t5rank-logs'

SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$SCRIPTS_DIR")

die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 1
}

# Prints a line of information (stdout, as a shell comment so dry-run output stays a script).
say() {
  echo "# $*"
}

# One word quoted for a POSIX shell, in the most readable form that a shell reads back as the word.
quote() {
  local word=$1 safe='A-Za-z0-9_./:=@%+,-'
  if [[ $word =~ ^[$safe]+$ ]]; then
    printf '%s' "$word"
  elif [[ $word =~ ^(--[A-Za-z0-9_.-]+=)(.+)$ ]]; then  # --flag='a b' rather than '--flag=a b'
    printf '%s%s' "${BASH_REMATCH[1]}" "$(quote "${BASH_REMATCH[2]}")"
  elif [[ $word != *\'* ]]; then
    printf "'%s'" "$word"
  elif [[ $word =~ ^[\'$safe]+$ ]]; then  # gin strings: \'gs://b/x\'
    printf '%s' "${word//\'/\\\'}"
  elif [[ $word != *[\"\$\`!]* && $word != *\\[\"\$\`\\]* && $word != *\\ ]]; then
    printf '"%s"' "$word"
  else
    printf "'%s'" "${word//\'/\'\\\'\'}"
  fi
}

# The words, each quoted, joined by spaces: a command line a shell reads back as the same words.
quote_words() {
  local words=() word
  for word in "$@"; do
    words+=("$(quote "$word")")
  done
  printf '%s' "${words[*]}"
}

# Runs a command, or with --dry-run only prints it. Stops the script at the first failure.
run() {
  if ((DRY_RUN)); then
    quote_words "$@"
    echo
    return 0
  fi
  echo "+ $(quote_words "$@")" >&2
  local status=0
  "$@" || status=$?
  if ((status != 0)); then
    die "this command failed (exit status $status); stopping here, nothing after it was run:
  $(quote_words "$@")"
  fi
}

# Reads a flag's value from `--flag=value` or `--flag value`; sets VALUE and SHIFT (words used).
flag_value() {
  if [[ $1 == --*=* ]]; then
    VALUE=${1#*=}
    SHIFT=1
  elif (($# >= 2)) && [[ $2 != --* ]]; then
    VALUE=$2
    SHIFT=2
  else
    die "$1 needs a value (see --help)"
  fi
}

# Handles a shared flag at the front of "$@"; sets SHIFT to the words used, 0 if it is not one.
# The sourcing script defines `usage`.
shared_flag() {
  SHIFT=0
  case $1 in
    --tpu-name | --tpu-name=*) flag_value "$@" && TPU_NAME=$VALUE ;;
    --zone | --zone=*) flag_value "$@" && ZONE=$VALUE ;;
    --project | --project=*) flag_value "$@" && PROJECT=$VALUE ;;
    --bucket | --bucket=*) flag_value "$@" && BUCKET=$VALUE ;;
    --accelerator-type | --accelerator-type=*) flag_value "$@" && ACCELERATOR_TYPE=$VALUE ;;
    --runtime-version | --runtime-version=*) flag_value "$@" && RUNTIME_VERSION=$VALUE ;;
    --dry-run) DRY_RUN=1 && SHIFT=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
  esac
}

# Help lines for the named settings (TPU_NAME ZONE ...), for a script's usage text.
settings_help() {
  local name
  for name in "$@"; do
    case $name in
      TPU_NAME) echo "  --tpu-name NAME          TPU VM name (env TPU_NAME; required)" ;;
      ZONE) echo "  --zone ZONE              zone, e.g. europe-west4-a or us-central1-a for v3 (env ZONE; required)" ;;
      PROJECT) echo "  --project PROJECT        Google Cloud project id (env PROJECT; required)" ;;
      BUCKET) echo "  --bucket BUCKET          GCS bucket, with or without gs:// (env BUCKET; required)" ;;
      ACCELERATOR_TYPE) echo "  --accelerator-type TYPE  v3-8 (default), v3-32, ... (env ACCELERATOR_TYPE)" ;;
      RUNTIME_VERSION) echo "  --runtime-version V      TPU VM image (env RUNTIME_VERSION; default tpu-ubuntu2204-base)" ;;
    esac
  done
  echo "  --dry-run                print the exact commands, run nothing (needs no gcloud)"
  echo "  -h, --help               this help"
}

# Refuses to go on while any of the named settings is empty, naming each missing one.
require() {
  local name missing=()
  for name in "$@"; do
    if [[ -z ${!name} ]]; then
      missing+=("  $name (flag --$(tr '[:upper:]_' '[:lower:]-' <<<"$name") or environment variable $name)")
    fi
  done
  if ((${#missing[@]})); then
    die "missing required setting(s); nothing was run:
$(printf '%s\n' "${missing[@]}")"
  fi
  if [[ -n $BUCKET ]]; then
    BUCKET=${BUCKET#gs://}
    BUCKET=${BUCKET%/}
    [[ $BUCKET != */* ]] || die "BUCKET must be a bucket name, not a path: $BUCKET"
  fi
}

# Stops early, outside --dry-run, when gcloud is not installed.
require_gcloud() {
  if ((!DRY_RUN)) && ! command -v gcloud >/dev/null; then
    die "gcloud is not installed: see https://cloud.google.com/sdk/docs/install (or use --dry-run)"
  fi
}

# The shared flags of every gcloud TPU VM command.
tpu_flags() {
  TPU_FLAGS=("--project=$PROJECT" "--zone=$ZONE")
}

# Runs a shell command line on TPU workers: tpu_ssh WORKER COMMAND_LINE (WORKER: all, 0, 1, ...).
tpu_ssh() {
  tpu_flags
  run gcloud compute tpus tpu-vm ssh "$TPU_NAME" "${TPU_FLAGS[@]}" "--worker=$1" "--command=$2"
}
