"""Nothing lost: every command against one table of outputs that would destroy a user's files
(`t5rank.files.check_outputs`, run by `t5rank.cli` before any work), and the atomic writers.

Each case reproduces a finding of the second hostile-user review (issue "Nothing lost, round two"):
`index --output runs/de` deleted the dual encoder's training directory, `--output .` emptied the
current directory, outputs inside inputs overwrote them.
"""

from __future__ import annotations

import os

import pytest

from t5rank import cli
from t5rank.files import (DIRECTORY, FILE, WORK, Output, OutputError, atomic_directory,
                          check_manifest, check_outputs, file_manifest, holds)

# command -> (argv with {out} and the inputs below, the output's kind, an input file, an input
# directory or None). The inputs need not be valid: the refusal comes before they are read.
COMMANDS = {
    "score": (["score", "--checkpoint", "{ckpt}", "--queries", "{q}", "--corpus", "{c}", "--run",
               "{run}", "--output", "{out}"], FILE, "q", "ckpt"),
    "retrieve": (["retrieve", "--corpus", "{c}", "--queries", "{q}", "--output", "{out}"], FILE,
                 "c", None),
    "retrieve --dense": (["retrieve", "--dense", "{ix}", "--queries", "{q}", "--output", "{out}"],
                         FILE, "q", "ix"),
    "fuse": (["fuse", "{run}", "{run2}", "--weight", "0.5", "-o", "{out}"], FILE, "run2", None),
    "topics": (["topics", "{topics}", "--field", "title", "--output", "{out}"], FILE, "topics",
               None),
    "explain": (["explain", "--checkpoint", "{ckpt}", "--query", "car", "--document", "car policy",
                 "--output", "{out}"], FILE, None, "ckpt"),
    "index": (["index", "--encoder", "{emb}", "--corpus", "{c}", "--output", "{out}"], DIRECTORY,
              "c", "emb"),
    "embeddings": (["embeddings", "--corpus", "{c}", "--output", "{out}"], DIRECTORY, "c", None),
    "ensemble": (["ensemble", "{ckpt}", "{ckpt2}", "--output", "{out}"], DIRECTORY, None, "ckpt"),
    "pairs-to-retrieval": (["pairs-to-retrieval", "--pairs", "{pairs}", "--texts", "{c}",
                            "--output", "{out}"], DIRECTORY, "pairs", None),
    "convert": (["convert", "--input", "{ckpt}", "--output", "{out}", "--to", "hf"], DIRECTORY,
                None, "ckpt"),
    "xpr": (["xpr", "--output", "{out}"], DIRECTORY, None, None),
    "demo": (["demo", "--output", "{out}", "--gin_file", "{gin}"], WORK, "gin", None),
    "rerank": (["rerank", "--queries", "{q}", "--corpus", "{c}", "--run", "{run}", "--stage",
                "{ckpt}@10", "-o", "{out}"], WORK, "run", "ckpt"),
    "teacher": (["teacher", "--checkpoint", "{ckpt}", "-o", "{out}"], WORK, None, "ckpt"),
}

# case -> (what the output is, the message it gets, by output kind)
CASES = {
    "an input": ("{input}", {FILE: "is also", DIRECTORY: "is also", WORK: "is also"}),
    "a link to an input": ("{link}", {FILE: "is also", DIRECTORY: "is also", WORK: "is also"}),
    "inside an input directory": ("{inside}", {FILE: "lies inside", DIRECTORY: "lies inside",
                                               WORK: "lies inside"}),
    "the directory of the inputs": ("{inputs}", {FILE: "is a directory", DIRECTORY: "contains",
                                                 WORK: "contains"}),
    "a user's file": ("{user_file}", {FILE: "exists; give --overwrite", DIRECTORY: "is a file",
                                      WORK: "is a file"}),
    "a user's directory": ("{user_dir}", {FILE: "is a directory",
                                          DIRECTORY: "holds files this command did not write",
                                          WORK: "holds files this command did not write"}),
    "the current directory": (".", {FILE: "is a directory",
                                    DIRECTORY: "holds files this command did not write",
                                    WORK: "holds files this command did not write"}),
}


def make_tree(root) -> dict[str, str]:
  """The inputs (in root/inputs), a user's file and directory; returns the paths by name."""
  inputs = root / "inputs"
  for name in ("ckpt", "ckpt2", "ix", "emb"):
    (inputs / name).mkdir(parents=True)
    (inputs / name / "config.json").write_text("{}")
  files = {"q": "q1\tcar\n", "c": "d1\tcar policy\n", "run": "q1 Q0 d1 1 1.0 x\n",
           "run2": "q1 Q0 d1 1 2.0 y\n", "topics": "<top>\n<num> Number: 1\n<title> car\n</top>\n",
           "pairs": "d1\td1\n", "gin": "TRAIN_STEPS = 1\n"}
  for name, text in files.items():
    (inputs / name).write_text(text)
  (root / "user_dir").mkdir()
  (root / "user_dir" / "notes.txt").write_text("mine")
  (root / "user_file").write_text("mine")
  paths = {name: str(inputs / name) for name in [*files, "ckpt", "ckpt2", "ix", "emb"]}
  return dict(paths, inputs=str(inputs), user_file=str(root / "user_file"),
              user_dir=str(root / "user_dir"))


def snapshot(root) -> dict[str, bytes]:
  return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>"
          for p in sorted(root.rglob("*")) if not p.is_symlink()}


def applies(command: str, case: str) -> bool:
  """Whether the command has the input the case needs."""
  _, _, input_name, input_dir = COMMANDS[command]
  where = CASES[case][0]
  return not (("{input}" in where or "{link}" in where) and input_name is None
              or "{inside}" in where and input_dir is None
              or "{inputs}" in where and not (input_name or input_dir))


@pytest.mark.parametrize("command, case", [(command, case) for command in COMMANDS
                                           for case in CASES if applies(command, case)])
def test_no_command_destroys_an_input_or_a_users_file(tmp_path, monkeypatch, command, case):
  argv, kind, input_name, input_dir = COMMANDS[command]
  where, messages = CASES[case]
  paths = make_tree(tmp_path)
  if input_name is not None:
    os.symlink(paths[input_name], tmp_path / "link")
  out = where.format(input=paths.get(input_name), link=tmp_path / "link",
                     inside=os.path.join(paths.get(input_dir) or "", "out"),
                     inputs=paths["inputs"], user_file=paths["user_file"],
                     user_dir=paths["user_dir"])
  monkeypatch.chdir(paths["user_dir"])
  before = snapshot(tmp_path)
  with pytest.raises(SystemExit) as refused:
    cli.main([a.format(out=out, **paths) for a in argv])
  message = str(refused.value)
  assert message.startswith(f"t5rank {argv[0]}: ") and messages[kind] in message, message
  assert "\n" not in message
  assert snapshot(tmp_path) == before  # nothing written, nothing removed


@pytest.mark.parametrize("command", ["index", "embeddings", "pairs-to-retrieval", "convert"])
def test_overwrite_never_replaces_a_directory_the_command_did_not_write(tmp_path, monkeypatch,
                                                                        command):
  argv, _, _, _ = COMMANDS[command]
  paths = make_tree(tmp_path)
  before = snapshot(tmp_path)
  with pytest.raises(SystemExit, match="holds files this command did not write"):
    cli.main([a.format(out=paths["user_dir"], **paths) for a in argv] + ["--overwrite"])
  assert snapshot(tmp_path) == before


def test_overwrite_replaces_a_file_and_an_empty_directory_is_used(tmp_path):
  paths = make_tree(tmp_path)
  argv = ["topics", paths["topics"], "--field", "title", "--output", paths["user_file"]]
  assert cli.main([*argv, "--overwrite"]) == 0
  assert (tmp_path / "user_file").read_text() == "1\tcar\n"
  (tmp_path / "empty").mkdir()
  assert cli.main(["pairs-to-retrieval", "--pairs", paths["pairs"], "--texts", paths["c"],
                   "--output", str(tmp_path / "empty")]) == 0
  assert sorted(os.listdir(tmp_path / "empty")) == ["corpus.jsonl", "qrels.txt", "queries.tsv",
                                                   "retrieval_task.json"]
  # its own earlier output: refused without --overwrite, replaced with it
  again = ["pairs-to-retrieval", "--pairs", paths["pairs"], "--texts", paths["c"], "--output",
           str(tmp_path / "empty")]
  with pytest.raises(SystemExit, match="holds an earlier output of this command; give "
                     "--overwrite"):
    cli.main(again)
  assert cli.main([*again, "--overwrite"]) == 0


def test_two_outputs_of_one_command_may_not_be_one_file(tmp_path):
  paths = make_tree(tmp_path)
  with pytest.raises(SystemExit, match="--png .*out.html is also --output; writing it would "
                     "overwrite that output"):
    cli.main(["explain", "--checkpoint", paths["ckpt"], "--query", "q", "--document", "d",
              "--output", str(tmp_path / "out.html"), "--png", str(tmp_path / "out.html")])


def test_work_directories_resume_only_when_they_are_the_commands_own(tmp_path):
  marker = holds("manifest.json")
  work = tmp_path / "out.shards"
  check_outputs([Output("shards", str(work), WORK, marker)], {})  # absent: fine
  work.mkdir()
  check_outputs([Output("shards", str(work), WORK, marker)], {})  # empty: fine
  (work / "manifest.json").write_text("{}")
  check_outputs([Output("shards", str(work), WORK, marker)], {})  # its own: resumed
  (tmp_path / "foreign").mkdir()
  (tmp_path / "foreign" / "x").write_text("x")
  with pytest.raises(OutputError, match="holds files this command did not write"):
    check_outputs([Output("shards", str(tmp_path / "foreign"), WORK, marker)], {})
  os.symlink(work, tmp_path / "link.shards")
  with pytest.raises(OutputError, match="is a symbolic link"):
    check_outputs([Output("shards", str(tmp_path / "link.shards"), WORK, marker)], {})


# ------------------------------------------------------------------------------ atomic writers


def test_a_failed_directory_write_leaves_the_old_set_and_no_temporary(tmp_path):
  target = tmp_path / "job"
  with atomic_directory(str(target)) as directory:
    for name in ("queries.tsv", "pool.run", "xpr.json"):
      (tmp_path / directory / name).write_text("old " + name)
  with pytest.raises(KeyboardInterrupt):
    with atomic_directory(str(target)) as directory:
      (tmp_path / directory / "queries.tsv").write_text("new")
      raise KeyboardInterrupt  # killed half-way through the new set
  assert {p.name: p.read_text() for p in target.iterdir()} == {
      "queries.tsv": "old queries.tsv", "pool.run": "old pool.run", "xpr.json": "old xpr.json"}
  assert sorted(os.listdir(tmp_path)) == ["job"]
  with atomic_directory(str(target)) as directory:
    (tmp_path / directory / "queries.tsv").write_text("new")
  assert [p.name for p in target.iterdir()] == ["queries.tsv"]  # the new set alone
  assert sorted(os.listdir(tmp_path)) == ["job"]


def test_a_temporary_left_by_a_kill_is_removed_by_the_next_write(tmp_path):
  stale = tmp_path / ".job.t5rank-tmp-abc123"  # what SIGKILL leaves: no handler ran
  stale.mkdir()
  (stale / "pool.run").write_text("half")
  with atomic_directory(str(tmp_path / "job")) as directory:
    (tmp_path / directory / "pool.run").write_text("whole")
  assert sorted(os.listdir(tmp_path)) == ["job"]


def test_a_manifest_catches_a_swapped_file_of_the_same_size(tmp_path):
  (tmp_path / "vectors.npy").write_bytes(b"\x00" * 64)
  (tmp_path / "docids.txt").write_text("d1\nd2\n")
  manifest = file_manifest(str(tmp_path))
  assert manifest["docids.txt"] == {  # printf 'd1\nd2\n' | sha256sum
      "bytes": 6, "sha256": "58b4e659870a35e0bd2d2562fbec02f7d3d41429d63c27dba88e4b5f4fd74dbf"}
  check_manifest(str(tmp_path), manifest, "the index")
  (tmp_path / "docids.txt").write_text("d2\nd1\n")  # same size, other order
  with pytest.raises(ValueError, match=r"docids.txt is not the file the index was written with "
                     r"\(its sha256 differs"):
    check_manifest(str(tmp_path), manifest, "the index")
  (tmp_path / "docids.txt").unlink()
  with pytest.raises(ValueError, match="docids.txt is missing"):
    check_manifest(str(tmp_path), manifest, "the index")
