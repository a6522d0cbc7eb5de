"""The Cloud TPU scripts (tpu_scripts/): the exact commands each prints with --dry-run, refusal
without settings, --help, the worker-side job runner with fake `gcloud` and `t5rank`, shellcheck.

No test needs gcloud or a TPU: dry runs go through a PATH without gcloud, and the few real runs use
a fake gcloud that records its arguments."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["create_tpu.sh", "install.sh", "train.sh", "score.sh", "copy.sh", "logs.sh", "stop.sh",
           "delete_tpu.sh", "on_worker.sh"]
SETTINGS = {"TPU_NAME": "rank-tpu", "ZONE": "europe-west4-a", "PROJECT": "my-proj",
            "BUCKET": "my-bucket"}
TOOLS = ["bash", "env", "dirname", "basename", "tr", "cat", "git", "hostname", "date", "mkdir",
         "rm", "ln", "sleep", "nohup", "setsid", "touch", "tail"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
  """A copy of tpu_scripts/ beside stub experiment gin files (the real ones belong to training)."""
  root = tmp_path_factory.mktemp("repo")
  shutil.copytree(os.path.join(REPO, "tpu_scripts"), root / "tpu_scripts")
  experiments = root / "gin" / "experiments"
  experiments.mkdir(parents=True)
  for name in ["monot5_base_msmarco", "monot5_large_msmarco", "monot5_3B_msmarco", "my_run"]:
    (experiments / f"{name}.gin").write_text("# stub\n")
  return root


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory):
  """A PATH holding the few tools the scripts use, and no gcloud."""
  path = tmp_path_factory.mktemp("bin")
  for tool in TOOLS:
    found = shutil.which(tool)
    if found:
      os.symlink(found, path / tool)
  return path


def sh(repo, bin_dir, script, *args, settings=SETTINGS, env=None):
  """Runs one script with only `settings` in its environment; returns the CompletedProcess."""
  full_env = {"PATH": str(bin_dir), "HOME": str(repo), "TMPDIR": "/tmp", **settings, **(env or {})}
  return subprocess.run(["bash", str(repo / "tpu_scripts" / script), *args], env=full_env,
                        capture_output=True, text=True, timeout=60)


def dry_run(repo, bin_dir, script, *args, **kwargs) -> list[list[str]]:
  """The commands a --dry-run prints, each split into words as a shell would."""
  result = sh(repo, bin_dir, script, "--dry-run", *args, **kwargs)
  assert result.returncode == 0, result.stderr
  # The printed lines are themselves a shell script.
  subprocess.run(["bash", "-n"], input=result.stdout, text=True, check=True)
  return [shlex.split(line) for line in result.stdout.splitlines()
          if line.strip() and not line.startswith("#")]


def remote(command: list[str]) -> list[str]:
  """The words of the --command= that a gcloud ... ssh runs on the workers."""
  [line] = [word[len("--command="):] for word in command if word.startswith("--command=")]
  return shlex.split(line)


def ssh_head(worker="all"):
  return ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "rank-tpu", "--project=my-proj",
          "--zone=europe-west4-a", f"--worker={worker}"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(repo, bin_dir, script):
  result = sh(repo, bin_dir, script, "--help", settings={})
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith("usage: ") and "--dry-run" in result.stdout


@pytest.mark.parametrize("script, args, settings, missing", [
    ("create_tpu.sh", [], {}, ["TPU_NAME", "ZONE", "PROJECT"]),
    ("create_tpu.sh", [], {"TPU_NAME": "t", "ZONE": "z"}, ["PROJECT"]),
    ("install.sh", [], {"PROJECT": "p"}, ["TPU_NAME", "ZONE"]),
    ("train.sh", ["base"], {}, ["TPU_NAME", "ZONE", "PROJECT"]),
    ("train.sh", ["base"], {"TPU_NAME": "t", "ZONE": "z", "PROJECT": "p"}, ["BUCKET"]),
    ("score.sh", ["msmarco-dev", "--checkpoint=c", "--queries=q", "--corpus=c", "--run=r"],
     {"TPU_NAME": "t", "ZONE": "z", "PROJECT": "p"}, ["BUCKET"]),
    ("copy.sh", ["from-gcs", "runs/x.trec"], {}, ["BUCKET"]),
    ("copy.sh", ["from-gcs", "gs://b/x", "--worker=0"], {}, ["TPU_NAME", "ZONE", "PROJECT"]),
    ("logs.sh", [], {"TPU_NAME": "t"}, ["ZONE", "PROJECT"]),
    ("stop.sh", ["--job=x"], {"ZONE": "z"}, ["TPU_NAME", "PROJECT"]),
    ("delete_tpu.sh", [], {}, ["TPU_NAME", "ZONE", "PROJECT"]),
])
def test_refuses_without_settings_and_names_them(repo, bin_dir, script, args, settings, missing):
  result = sh(repo, bin_dir, script, *args, "--dry-run", settings=settings)
  assert result.returncode != 0
  assert result.stdout == ""  # nothing printed means nothing would have run
  assert "missing required setting" in result.stderr
  for name in missing:
    assert f"{name} (flag --{name.lower().replace('_', '-')} or environment variable {name})" \
        in result.stderr
  for name in set(SETTINGS) - set(missing):
    assert f"  {name} (" not in result.stderr


@pytest.mark.parametrize("script, args, message", [
    ("train.sh", [], "missing EXPERIMENT"),
    ("train.sh", ["huge"], "EXPERIMENT must be base, large, 3B or a .gin file"),
    ("train.sh", ["gin/experiments/absent.gin"], "no gin file gin/experiments/absent.gin"),
    ("train.sh", ["base", "--model-dir=/tmp/m"], "--model-dir must be a gs:// path"),
    ("score.sh", ["--checkpoint=c"], "missing TASK"),
    ("score.sh", ["msmarco", "--checkpoint=c"], "TASK must be msmarco-dev, robust04 or custom"),
    ("score.sh", ["custom", "--dtype", "--checkpoint=c"], "--dtype needs a value"),
    ("score.sh", ["custom", "--skip-missing", "x", "--checkpoint=c"],
     "one TASK only; got custom and x"),
    ("score.sh", ["robust04", "--checkpoint=c", "--queries=q", "--corpus=c"], "missing --run"),
    ("copy.sh", ["sideways", "a", "b"], "must be to-gcs or from-gcs"),
    ("stop.sh", [], "missing --job"),
    ("create_tpu.sh", ["--zone"], "--zone needs a value"),
    ("create_tpu.sh", ["--bogus"], "unknown argument: --bogus"),
])
def test_refuses_bad_arguments(repo, bin_dir, script, args, message):
  result = sh(repo, bin_dir, script, *args, "--dry-run")
  assert result.returncode != 0 and message in result.stderr and result.stdout == ""


def test_create_defaults_to_v3_8_and_the_base_image(repo, bin_dir):
  [command] = dry_run(repo, bin_dir, "create_tpu.sh")
  assert command == ["gcloud", "compute", "tpus", "tpu-vm", "create", "rank-tpu",
                     "--project=my-proj", "--zone=europe-west4-a", "--accelerator-type=v3-8",
                     "--version=tpu-ubuntu2204-base"]


def test_create_takes_settings_from_environment_and_flags_win(repo, bin_dir):
  env = {"ACCELERATOR_TYPE": "v3-32", "RUNTIME_VERSION": "tpu-vm-base", "ZONE": "us-central1-a"}
  [command] = dry_run(repo, bin_dir, "create_tpu.sh", "--spot", env=env)
  assert "--accelerator-type=v3-32" in command and "--version=tpu-vm-base" in command
  assert "--zone=us-central1-a" in command and command[-1] == "--spot"
  [command] = dry_run(repo, bin_dir, "create_tpu.sh", "--accelerator-type", "v3-128",
                      "--tpu-name=other", env=env)
  assert "--accelerator-type=v3-128" in command and command[5] == "other"


def test_install_copies_the_checkout_to_every_worker(repo, bin_dir):
  archive, scp, ssh, cleanup = dry_run(repo, bin_dir, "install.sh")
  assert archive == ["git", "-C", str(repo), "archive", "--format=tar.gz",
                     "--output=/tmp/t5rank-rank-tpu.tar.gz", "HEAD"]
  assert scp == ["gcloud", "compute", "tpus", "tpu-vm", "scp", "/tmp/t5rank-rank-tpu.tar.gz",
                 "rank-tpu:t5rank.tar.gz", "--project=my-proj", "--zone=europe-west4-a",
                 "--worker=all"]
  assert ssh[:len(ssh_head())] == ssh_head()
  assert remote(ssh) == ["rm", "-rf", "~/t5rank.new", "&&", "mkdir", "-p", "~/t5rank.new", "&&",
                         "tar", "-xzf", "t5rank.tar.gz", "-C", "~/t5rank.new", "&&", "bash",
                         "~/t5rank.new/tpu_scripts/on_worker.sh", "install"]
  assert cleanup == ["rm", "-f", "/tmp/t5rank-rank-tpu.tar.gz"]


@pytest.mark.parametrize("experiment, hours, mrr", [
    ("base", "12 h", ".363"), ("large", "48 h", ".383"), ("3B", "160 h", ".382")])
def test_train_launches_the_experiment_on_all_workers(repo, bin_dir, experiment, hours, mrr):
  gin = f"gin/experiments/monot5_{experiment}_msmarco.gin"
  result = sh(repo, bin_dir, "train.sh", experiment, "--dry-run",
              "--gin.MSMARCO_TRIPLES='gs://my-bucket/msmarco/triples.tsv'", "--gin.TRAIN_STEPS=10")
  assert result.returncode == 0, result.stderr
  assert f"# expected: about {hours} on one TPU v3-8; MS MARCO passage dev MRR@10 {mrr}" \
      in result.stdout
  [command] = [shlex.split(line) for line in result.stdout.splitlines()
               if line.startswith("gcloud")]
  assert command[:len(ssh_head())] == ssh_head()
  assert remote(command) == [
      "cd", "~/t5rank", "&&", "bash", "tpu_scripts/on_worker.sh", "launch",
      f"train_monot5_{experiment}_msmarco", "t5rank", "train", f"--gin_file={gin}",
      f"--gin.MODEL_DIR='gs://my-bucket/t5rank/models/monot5_{experiment}_msmarco'",
      "--gin.MSMARCO_TRIPLES='gs://my-bucket/msmarco/triples.tsv'", "--gin.TRAIN_STEPS=10"]
  help_text = sh(repo, bin_dir, "train.sh", "--help").stdout
  assert hours in help_text and mrr in help_text


def test_train_takes_a_gin_file_and_a_model_dir(repo, bin_dir):
  [command] = dry_run(repo, bin_dir, "train.sh", "gin/experiments/my_run.gin",
                      "--model-dir", "gs://other/m", settings={**SETTINGS, "BUCKET": ""})
  words = remote(command)
  assert "--gin_file=gin/experiments/my_run.gin" in words
  assert "--gin.MODEL_DIR='gs://other/m'" in words and "train_my_run" in words


@pytest.mark.parametrize("task, flags", [
    ("msmarco-dev", ["--window", "0"]),
    ("robust04", ["--passages", "maxp", "--window", "10", "--stride", "5"])])
def test_score_launches_on_all_workers_with_the_task_flags(repo, bin_dir, task, flags):
  [command] = dry_run(repo, bin_dir, "score.sh", task,
                      "--checkpoint", "gs://my-bucket/t5rank/models/monot5_3B_msmarco/",
                      "--queries", "gs://my-bucket/q.tsv", "--corpus=gs://my-bucket/c.jsonl",
                      "--run", "gs://my-bucket/bm25.trec", "--batch-tokens", "65536")
  assert command[:len(ssh_head())] == ssh_head()
  assert remote(command) == [
      "cd", "~/t5rank", "&&", "bash", "tpu_scripts/on_worker.sh", "launch", f"score_{task}",
      "t5rank", "score", "--checkpoint", "gs://my-bucket/t5rank/models/monot5_3B_msmarco/",
      "--queries", "gs://my-bucket/q.tsv", "--corpus", "gs://my-bucket/c.jsonl",
      "--run", "gs://my-bucket/bm25.trec",
      "--output", f"gs://my-bucket/t5rank/runs/{task}.monot5_3B_msmarco.trec",
      *flags, "--batch-tokens", "65536"]


@pytest.mark.parametrize("size_flags, mesh", [
    (["--model-size", "3B"], ["--mesh", "4,2"]), (["--model-size=11B"], ["--mesh", "1,8"]),
    (["--model-size", "base"], []), (["--model-size", "11B", "--mesh", "2,4"], ["--mesh", "2,4"])])
def test_score_passes_the_mesh_of_the_model_size(repo, bin_dir, size_flags, mesh):
  [command] = dry_run(repo, bin_dir, "score.sh", "msmarco-dev", "--checkpoint", "gs://b/m",
                      "--queries", "q", "--corpus", "c", "--run", "r", "--output", "o", *size_flags)
  assert remote(command)[-2 - len(mesh):] == ["--window", "0", *mesh]


SCORE_ARGS = ["--checkpoint", "gs://b/m", "--queries", "q", "--corpus", "c", "--run", "r",
              "--output", "o"]
SCORE_HEAD = ["cd", "~/t5rank", "&&", "bash", "tpu_scripts/on_worker.sh", "launch"]


@pytest.mark.parametrize("task, preset", [
    ("msmarco-dev", []), ("custom", []), ("robust04", ["--passages", "maxp", "--stride", "5"])])
def test_score_passes_the_options_of_t5rank_score_through(repo, bin_dir, task, preset):
  # #58: --dtype bfloat16 (the README's advice for a TPU) was refused, --depth, --reranker and
  # --window could not be given. The user's --window replaces the task's.
  options = ["--dtype", "bfloat16", "--reranker", "duot5", "--depth", "10", "--window", "0"]
  [command] = dry_run(repo, bin_dir, "score.sh", task, *options[:6], *SCORE_ARGS, "--window=0",
                      "--skip-missing", "--model-size", "3B")
  assert remote(command) == [*SCORE_HEAD, f"score_{task}", "t5rank", "score",
                             *SCORE_ARGS, *preset, "--mesh", "4,2", *options,
                             "--skip-missing"]


def score_options():
  """(option strings, takes a value) of each option of `t5rank score`, from its parser."""
  import argparse

  from t5rank.commands import score

  subparsers = argparse.ArgumentParser().add_subparsers()
  score.add_parser(subparsers)
  [parser] = subparsers.choices.values()
  return [(action.option_strings, action.nargs != 0) for action in parser._actions
          if not isinstance(action, argparse._HelpAction)]


def test_score_passes_every_option_of_t5rank_score(repo, bin_dir):
  options = score_options()
  # the script's list of options without a value is the parser's
  script = (repo / "tpu_scripts" / "score.sh").read_text()
  [listed] = [line for line in script.splitlines() if line.startswith("BOOLEAN_SCORE_OPTIONS=(")]
  assert sorted(listed[len("BOOLEAN_SCORE_OPTIONS=("):-1].split()) == sorted(
      name for names, takes_value in options if not takes_value for name in names)
  own = {"--checkpoint", "--queries", "--corpus", "--run", "--output"}
  for names, takes_value in options:
    name = max(names, key=len)
    given = [name, "-1,1" if name == "--mesh" else "1"] if takes_value else [name]
    args = [*SCORE_ARGS, *given] if name not in own else [
        *SCORE_ARGS[:SCORE_ARGS.index(name)], *SCORE_ARGS[SCORE_ARGS.index(name) + 2:], *given]
    [command] = dry_run(repo, bin_dir, "score.sh", "custom", *args)
    words = remote(command)
    at = words.index(name)
    assert words[at:at + len(given)] == given, (name, words)


def test_score_refuses_an_unknown_size_or_mesh(repo, bin_dir):
  for flags, message in [(["--model-size", "xl"], "--model-size must be small, base, large"),
                         (["--mesh", "8"], "--mesh must be DATA,MODEL")]:
    result = sh(repo, bin_dir, "score.sh", "robust04", "--checkpoint=c", "--queries=q",
                "--corpus=c", "--run=r", "--output=o", *flags, "--dry-run")
    assert result.returncode != 0 and message in result.stderr


@pytest.mark.parametrize("args, expected", [
    (["from-gcs", "runs/a.trec", "out"],
     [["mkdir", "-p", "out/"],
      ["gcloud", "storage", "cp", "--recursive", "gs://my-bucket/t5rank/runs/a.trec", "out/"]]),
    (["to-gcs", "ckpt dir"],
     [["gcloud", "storage", "cp", "--recursive", "ckpt dir", "gs://my-bucket/t5rank/"]]),
    (["to-gcs", "run.trec", "gs://elsewhere/runs"],
     [["gcloud", "storage", "cp", "--recursive", "run.trec", "gs://elsewhere/runs/"]]),
])
def test_copy_to_and_from_the_bucket(repo, bin_dir, args, expected):
  assert dry_run(repo, bin_dir, "copy.sh", *args, env={"BUCKET": "gs://my-bucket/"}) == expected


def test_copy_on_every_worker(repo, bin_dir):
  [command] = dry_run(repo, bin_dir, "copy.sh", "from-gcs", "models/monot5_base_msmarco",
                      "~/ckpt", "--worker=all")
  assert command[:len(ssh_head())] == ssh_head()
  assert remote(command) == ["mkdir", "-p", "~/ckpt/", "&&", "gcloud", "storage", "cp",
                             "--recursive", "gs://my-bucket/t5rank/models/monot5_base_msmarco",
                             "~/ckpt/"]


def test_logs_stop_and_delete(repo, bin_dir):
  [command] = dry_run(repo, bin_dir, "logs.sh")
  assert command[:len(ssh_head("0"))] == ssh_head("0")
  assert remote(command) == ["tail", "-n", "100", "-F", "~/t5rank-logs/latest.log"]
  [command] = dry_run(repo, bin_dir, "logs.sh", "--job=score_robust04", "--worker", "all",
                      "--lines=5", "--no-follow")
  assert command[:len(ssh_head())] == ssh_head()
  assert remote(command) == ["tail", "-n", "5", "~/t5rank-logs/score_robust04.log"]
  [command] = dry_run(repo, bin_dir, "stop.sh", "--job", "train_monot5_3B_msmarco")
  assert command[:len(ssh_head())] == ssh_head()
  assert remote(command) == ["cd", "~/t5rank", "&&", "bash", "tpu_scripts/on_worker.sh", "stop",
                             "train_monot5_3B_msmarco"]
  assert dry_run(repo, bin_dir, "delete_tpu.sh", "--yes") == [[
      "gcloud", "compute", "tpus", "tpu-vm", "delete", "rank-tpu", "--project=my-proj",
      "--zone=europe-west4-a", "--quiet"]]


def test_worker_job_stages_gcs_inputs_and_uploads_the_output(repo, bin_dir):
  home = str(repo)
  commands = dry_run(repo, bin_dir, "on_worker.sh", "job", "score_robust04", "t5rank", "score",
                     "--checkpoint", "gs://b/models/m/", "--queries", "/data/q.tsv",
                     "--corpus=gs://b/c.jsonl", "--run", "gs://b/bm25.trec",
                     "--output", "gs://b/runs/out.trec", "--window", "10")
  assert ["gcloud", "storage", "cp", "--recursive", "gs://b/models/m",
          f"{home}/t5rank-data/checkpoint/"] in commands
  assert ["gcloud", "storage", "cp", "--recursive", "gs://b/c.jsonl",
          f"{home}/t5rank-data/corpus/"] in commands
  assert ["t5rank", "score", "--checkpoint", f"{home}/t5rank-data/checkpoint/m",
          "--queries", "/data/q.tsv", "--corpus", f"{home}/t5rank-data/corpus/c.jsonl",
          "--run", f"{home}/t5rank-data/run/bm25.trec",
          "--output", f"{home}/t5rank-data/output/out.trec", "--window", "10"] in commands
  output = f"{home}/t5rank-data/output/out.trec"
  assert commands[-1] == ["if", "[", "-e", output, "];", "then", "gcloud", "storage", "cp", output,
                          "gs://b/runs/out.trec;", "fi"]  # uploaded by the worker that wrote it


FAKE_GCLOUD = """#!/bin/bash
echo "$*" >> "$HOME/gcloud.calls"
if [[ $* == *"$FAIL_ON"* ]]; then exit 3; fi
if [[ $1 == storage && $2 == cp ]]; then
  for last; do :; done
  if [[ $last == gs://* ]]; then exit 0; fi
  touch "$last/$(basename "${@: -2:1}")"
fi
"""

FAKE_T5RANK = """#!/bin/bash
echo "t5rank $*" >> "$HOME/t5rank.calls"
sleep "${T5RANK_SLEEP:-0}"
while (($#)); do if [[ $1 == --output ]]; then echo "1 Q0 d 1 0.9 monoT5" > "$2"; fi; shift; done
"""


def _fake(path, text):
  path.unlink(missing_ok=True)  # may be a symlink to the real tool: never write through it
  path.write_text(text)
  path.chmod(0o755)


def test_worker_launch_runs_the_job_in_the_background_and_uploads(tmp_path, bin_dir):
  """launch for real, with a fake t5rank in ~/t5rank-venv and a fake gcloud on PATH."""
  shutil.copytree(os.path.join(REPO, "tpu_scripts"), tmp_path / "t5rank" / "tpu_scripts")
  (tmp_path / "t5rank-venv" / "bin").mkdir(parents=True)
  _fake(tmp_path / "t5rank-venv" / "bin" / "t5rank", FAKE_T5RANK)
  fake_bin = tmp_path / "bin"
  shutil.copytree(bin_dir, fake_bin, symlinks=True)
  _fake(fake_bin / "gcloud", FAKE_GCLOUD)
  env = {"PATH": str(fake_bin), "HOME": str(tmp_path), "FAIL_ON": "nothing", "T5RANK_SLEEP": "0.5"}
  args = ["bash", "tpu_scripts/on_worker.sh", "launch", "score_msmarco-dev", "t5rank", "score",
          "--checkpoint", "gs://b/m", "--queries", "q.tsv", "--corpus", "c.tsv", "--run",
          "gs://b/r.trec", "--output", "gs://b/out.trec", "--window", "0"]
  cwd = tmp_path / "t5rank"
  started = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=30)
  assert started.returncode == 0, started.stderr
  again = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=30)
  assert again.returncode != 0 and "job score_msmarco-dev is still running" in again.stderr
  log = tmp_path / "t5rank-logs" / "score_msmarco-dev.log"
  for _ in range(100):
    if "finished" in log.read_text():
      break
    time.sleep(0.1)
  assert "score_msmarco-dev finished with exit status 0" in log.read_text()
  assert os.readlink(tmp_path / "t5rank-logs" / "latest.log") == "score_msmarco-dev.log"
  data = tmp_path / "t5rank-data"
  assert (tmp_path / "t5rank.calls").read_text() == (
      f"t5rank score --checkpoint {data}/checkpoint/m --queries q.tsv --corpus c.tsv "
      f"--run {data}/run/r.trec --output {data}/output/out.trec --window 0\n")
  assert (tmp_path / "gcloud.calls").read_text().splitlines() == [
      f"storage cp --recursive gs://b/m {data}/checkpoint/",
      f"storage cp --recursive gs://b/r.trec {data}/run/",
      f"storage cp {data}/output/out.trec gs://b/out.trec"]


def test_worker_stop_ends_the_job_and_what_it_started(tmp_path, bin_dir):
  shutil.copytree(os.path.join(REPO, "tpu_scripts"), tmp_path / "t5rank" / "tpu_scripts")
  (tmp_path / "t5rank-venv" / "bin").mkdir(parents=True)
  _fake(tmp_path / "t5rank-venv" / "bin" / "t5rank", FAKE_T5RANK)
  env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "T5RANK_SLEEP": "60"}
  def on_worker(*args):
    return subprocess.run(["bash", "tpu_scripts/on_worker.sh", *args], env=env,
                          cwd=tmp_path / "t5rank", capture_output=True, text=True, timeout=30)
  assert on_worker("launch", "train_x", "t5rank", "train").returncode == 0
  pid = int((tmp_path / "t5rank-logs" / "train_x.pid").read_text())
  for _ in range(50):  # until the fake trainer is up
    if (tmp_path / "t5rank.calls").exists():
      break
    time.sleep(0.1)
  assert subprocess.run(["pgrep", "-g", str(pid)], capture_output=True).returncode == 0
  refused = on_worker("install")  # would replace the code under the running job
  assert refused.returncode == 1 and "job train_x is running" in refused.stderr
  stopped = on_worker("stop", "train_x")
  assert stopped.returncode == 0 and "stopped train_x" in stopped.stdout, stopped.stderr
  for _ in range(50):
    if subprocess.run(["pgrep", "-g", str(pid)], capture_output=True).returncode != 0:
      break
    time.sleep(0.1)
  assert subprocess.run(["pgrep", "-g", str(pid)], capture_output=True).returncode != 0
  assert "is not running" in on_worker("stop", "train_x").stdout


def test_stops_at_the_first_failing_command(repo, bin_dir, tmp_path):
  fake_bin = tmp_path / "bin"
  shutil.copytree(bin_dir, fake_bin, symlinks=True)
  _fake(fake_bin / "gcloud", FAKE_GCLOUD)
  _fake(fake_bin / "git", "#!/bin/bash\nexit 0\n")
  result = sh(repo, fake_bin, "install.sh", env={"HOME": str(tmp_path), "FAIL_ON": "scp"})
  assert result.returncode == 1
  assert "this command failed (exit status 3)" in result.stderr
  assert "gcloud compute tpus tpu-vm scp" in result.stderr
  calls = (tmp_path / "gcloud.calls").read_text().splitlines()
  assert len(calls) == 1 and calls[0].startswith("compute tpus tpu-vm scp")  # the ssh never ran


def test_without_gcloud_only_dry_run_works(repo, bin_dir):
  result = sh(repo, bin_dir, "delete_tpu.sh")
  assert result.returncode == 1 and "gcloud is not installed" in result.stderr


@pytest.mark.parametrize("word", [
    "plain", "", "a b", "it's", "'gs://b/x'", "--gin.X='a b'", 'say "hi"', "$HOME", "back\\slash",
    "~/t5rank", "a\\'b", "tab\tand\nnewline", "!bang", "--flag=\\\"q\\\""])
def test_quote_reads_back_as_the_same_word(repo, word):
  script = (f"source {shlex.quote(str(repo / 'tpu_scripts' / 'common.sh'))}; "
            'line=$(quote_words "$1" "$1"); eval "set -- $line"; printf "%s\\0" "$@"')
  out = subprocess.run(["bash", "-c", script, "bash", word], capture_output=True, text=True,
                       check=True).stdout
  assert out == f"{word}\0{word}\0"


def test_shellcheck():
  if shutil.which("shellcheck") is None:
    pytest.skip("shellcheck is not installed (Debian: apt-get install -y shellcheck)")
  folder = os.path.join(REPO, "tpu_scripts")
  scripts = sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".sh"))
  assert sorted(os.path.basename(s) for s in scripts) == sorted(SCRIPTS + ["common.sh"])
  result = subprocess.run(["shellcheck", "--external-sources", *scripts], capture_output=True,
                          text=True, cwd=os.path.join(REPO, "tpu_scripts"))
  assert result.returncode == 0, result.stdout + result.stderr
