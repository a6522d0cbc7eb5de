"""Checkpoint directories, safetensors files and Hub ids that someone else wrote (issue #66): one
test per finding, each failing before its fix. A directory's weights are read from inside it (or,
for a Hub snapshot, from its repository's cache folder), a Hub revision stays inside the cache,
every Hub call has a timeout, a safetensors header is parsed once, and what a file says about
itself reaches the user escaped and bounded, in one line."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import struct
import threading
import time
import urllib.parse
import warnings

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from t5rank import cli
from t5rank.checkpoints.formats import detect_format
from t5rank.checkpoints.locate import HubError, local_path
from t5rank.checkpoints.tree import CheckpointError
from t5rank.checkpoints.untrusted import quote
from t5rank.models.t5_weights import load_checkpoint
from t5rank.testing import make_hub_cache
from hostile import one_line_error, read_bounded

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "hf_duot5")  # a 2+2-layer T5
REPO = "castorini/monot5-tiny-test"


def refusal(directory) -> str:
  """The one-line CheckpointError (or FileNotFoundError) of loading `directory`."""
  with pytest.raises((CheckpointError, FileNotFoundError)) as e:
    load_checkpoint(str(directory))
  message = str(e.value)
  assert "\n" not in message and not any(ord(c) < 32 or ord(c) == 127 for c in message), message
  return message


def score_refusal(directory, tmp_path) -> str:
  """What `t5rank score --checkpoint DIRECTORY` prints when it refuses: one line."""
  (tmp_path / "q.tsv").write_text("q1\tlife policy\n")
  (tmp_path / "c.tsv").write_text("d1\tpolicy life\n")
  (tmp_path / "r.run").write_text("q1 Q0 d1 1 3 x\n")
  with pytest.raises(SystemExit) as e:
    cli.main(["score", "--checkpoint", str(directory), "--queries", str(tmp_path / "q.tsv"),
              "--corpus", str(tmp_path / "c.tsv"), "--run", str(tmp_path / "r.run"), "--window",
              "0", "-o", str(tmp_path / "out.run")])
  message = str(e.value.code)
  assert len(message.splitlines()) == 1 and "Traceback" not in message, message
  return message


def sharded(directory, index: str = "model.safetensors.index.json",
            weight_map: dict | None = None) -> dict:
  """A copy of the golden's config.json in `directory`, its tensors in two safetensors shards
  (model-0000N-of-00002.safetensors), and a shard index `index` with `weight_map` (default: the
  shards'). Returns the shards' {file: tensors}."""
  directory.mkdir(parents=True, exist_ok=True)
  shutil.copy(os.path.join(GOLDEN, "config.json"), directory)
  tensors = load_file(os.path.join(GOLDEN, "model.safetensors"))
  names = sorted(tensors)
  shards = {"model-00001-of-00002.safetensors": names[::2],
            "model-00002-of-00002.safetensors": names[1::2]}
  for file, keys in shards.items():
    save_file({k: tensors[k] for k in keys}, str(directory / file), metadata={"format": "pt"})
  if weight_map is None:
    weight_map = {k: file for file, keys in shards.items() for k in keys}
  (directory / index).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
  return shards


def write_safetensors(path, tensors: dict) -> None:
  """A safetensors file written by hand ({name: (dtype code, shape, raw bytes)}), for dtypes that
  numpy cannot write (FP8)."""
  header, data = {}, b""
  for name, (dtype, shape, raw) in tensors.items():
    offsets = [len(data), len(data) + len(raw)]
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": offsets}
    data += raw
  text = json.dumps(header).encode()
  text += b" " * (-len(text) % 8)
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)


# ------------------------------------------------------------------------------------ finding 1


def test_a_shard_index_names_only_files_inside_its_directory(tmp_path):
  other = tmp_path / "other"
  shutil.copytree(GOLDEN, other)  # another model, which must not load in the checkpoint's name
  names = sorted(load_file(os.path.join(GOLDEN, "model.safetensors")))
  outside = {
      "a relative path": "../other/model.safetensors",
      "an absolute path": str(other / "model.safetensors"),
      "a system file": "/etc/passwd",
      "a name with a directory": "sub/model.safetensors",
  }
  for case, shard in outside.items():
    directory = tmp_path / case.replace(" ", "_")
    sharded(directory, weight_map=dict.fromkeys(names, shard))
    (directory / "sub").mkdir()
    shutil.copy(other / "model.safetensors", directory / "sub")
    message = refusal(directory)
    assert "model.safetensors.index.json" in message and quote(shard) in message, (case, message)
    assert "a file name in the checkpoint's own directory" in message, (case, message)

  # a plain name that is a link out of the directory
  link = tmp_path / "link"
  shards = sharded(link)
  first = sorted(shards)[0]
  os.remove(link / first)
  os.symlink(os.path.join("..", "other", "model.safetensors"), link / first)
  message = refusal(link)
  assert quote(first) in message and "a link to" in message and "outside" in message, message
  assert "t5rank score: " in score_refusal(link, tmp_path)

  # the same for a torch or Flax shard index (refused before anything is opened)
  for index, shard in (("pytorch_model.bin.index.json", "/proc/self/environ"),
                       ("flax_model.msgpack.index.json", "../other/flax_model.msgpack")):
    directory = tmp_path / index
    directory.mkdir()
    shutil.copy(os.path.join(GOLDEN, "config.json"), directory)
    (directory / index).write_text(json.dumps({"weight_map": {"shared.weight": shard}}))
    assert index in refusal(directory) and quote(shard) in refusal(directory)

  # values that are no file names at all
  for value, shown in ((3, "3"), (None, "None"), (["a"], "['a']")):
    directory = tmp_path / f"value_{shown}"
    sharded(directory, weight_map={**dict.fromkeys(names, "model-00001-of-00002.safetensors"),
                                   "shared.weight": value})
    message = refusal(directory)
    assert "'shared.weight'" in message and shown in message and "Traceback" not in message


def test_a_sharded_hub_snapshot_still_reads_its_blobs(tmp_path):
  source = tmp_path / "source"
  sharded(source)
  snapshot = make_hub_cache(str(tmp_path / "hub"), REPO,
                            {f.name: str(f) for f in source.iterdir()})
  assert os.path.islink(os.path.join(snapshot, "model-00001-of-00002.safetensors"))
  _, params = load_checkpoint(snapshot)
  _, expected = load_checkpoint(GOLDEN)
  np.testing.assert_array_equal(params["token_embedder"]["embedding"],
                                expected["token_embedder"]["embedding"])


# ------------------------------------------------------------------------------------ finding 2


def test_a_hub_revision_never_leaves_the_cache(tmp_path, monkeypatch):
  cache = tmp_path / "hub"
  make_hub_cache(str(cache), REPO, {"config.json": os.path.join(GOLDEN, "config.json")})
  shutil.copytree(GOLDEN, tmp_path / "elsewhere")  # a model outside the cache
  # a file in the cache that names a directory outside it, relative to the repo's snapshots/
  (cache / "x").write_text(os.path.join("..", "..", "..", "elsewhere"))
  monkeypatch.setenv("HF_HUB_CACHE", str(cache))
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.chdir(tmp_path)
  for revision in ("../../x", "refs/../../../x", "/x", "main/", ".hidden", "a..b", "v1.lock"):
    with pytest.raises(HubError, match="not a branch, tag or commit") as e:
      local_path(f"{REPO}@{revision}")
    assert "\n" not in str(e.value)
  # a valid ref whose cached commit climbs out
  (cache / f"models--{REPO.replace('/', '--')}" / "refs" / "main").write_text(
      os.path.join("..", "..", "..", "elsewhere"))
  with pytest.raises(HubError, match="outside the Hugging Face cache"):
    local_path(REPO)


# ------------------------------------------------------------------------------------ finding 7


def test_a_hub_that_never_answers_is_refused_within_its_timeout(tmp_path, monkeypatch):
  with socket.socket() as server:  # accepts (the kernel completes the handshake), never answers
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")  # the user's override, honoured
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "2")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.monotonic()
    result = read_bounded("from t5rank.checkpoints.locate import local_path\n"
                          "local_path('castorini/not-cached')", str(tmp_path), seconds=30)
    elapsed = time.monotonic() - start
  message = one_line_error(result)
  assert "castorini/not-cached" in message and "HF_HUB_ETAG_TIMEOUT" in message, message
  assert elapsed < 15, elapsed


def fake_hub(files: dict, repo: str, commit: str = "b" * 40):
  """A local HTTP server answering as the Hub does for `repo` holding `files` ({name: bytes}):
  its listing (model_info) and each file's metadata and bytes. Returns the server, serving."""
  class Hub(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
      pass

    def file(self):
      path = urllib.parse.unquote(urllib.parse.urlparse(self.path).path)
      prefix = f"/{repo}/resolve/"
      return files.get(path[len(prefix):].split("/", 1)[-1]) if path.startswith(prefix) else None

    def answer(self, body, **headers):
      self.send_response(200 if body is not None else 404)
      for key, value in {"Content-Length": len(body or b""), **headers}.items():
        self.send_header(key, str(value))
      self.end_headers()

    def do_HEAD(self):
      data = self.file()
      self.answer(data, **{"X-Repo-Commit": commit, "ETag": f'"{len(data or b"")}"'})

    def do_GET(self):
      if self.path.startswith(f"/api/models/{repo}"):
        listing = json.dumps({"id": repo, "sha": commit,
                              "siblings": [{"rfilename": name} for name in files]}).encode()
        self.answer(listing, **{"Content-Type": "application/json"})
        self.wfile.write(listing)
        return
      self.do_HEAD()
      self.wfile.write(self.file() or b"")

  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
  threading.Thread(target=server.serve_forever, daemon=True).start()
  return server


def test_a_hub_download_fetches_only_what_a_reranker_reads(tmp_path, monkeypatch):
  files = {name: open(os.path.join(GOLDEN, name), "rb").read()
           for name in ("config.json", "model.safetensors", "reference.json")}
  server = fake_hub(files, REPO)
  try:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    result = read_bounded(
        "import os\n"
        "from t5rank.checkpoints.locate import local_path\n"
        f"snapshot = local_path({REPO!r})\n"
        "assert sorted(os.listdir(snapshot)) == ['config.json', 'model.safetensors'], snapshot\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
        f"assert local_path({REPO!r}) == snapshot  # refs/main written: found again offline\n",
        str(tmp_path), seconds=30)
  finally:
    server.shutdown()
  assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


# ------------------------------------------------------------------------------------ finding 8


def test_a_safetensors_file_of_200000_tensors_is_parsed_once(tmp_path):
  directory = tmp_path / "many"
  directory.mkdir()
  shutil.copy(os.path.join(GOLDEN, "config.json"), directory)
  one = np.zeros(1, np.float32)
  save_file({f"encoder.block.{i}.layer.0.SelfAttention.q.weight": one for i in range(200_000)},
            str(directory / "model.safetensors"))
  result = read_bounded(
      "from t5rank.checkpoints.formats import hf_tensors\n"
      "shapes, read = hf_tensors(PATH)\n"
      "assert len(shapes) == 200_000\n"
      "assert sum(read(name).size for name in shapes) == 200_000\n", str(directory), seconds=30)
  assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


# ------------------------------------------------------------------------------------ finding 9

LFS_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
               b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
               b"size 891691430\n")


def test_a_git_lfs_pointer_or_a_snapshot_without_weights_says_how_to_fetch_them(tmp_path):
  for name in ("model.safetensors", "pytorch_model.bin"):
    clone = tmp_path / name
    clone.mkdir()
    shutil.copy(os.path.join(GOLDEN, "config.json"), clone)
    (clone / name).write_bytes(LFS_POINTER)
    message = refusal(clone)
    assert f"{name} is a Git LFS pointer" in message and "git lfs pull" in message, message
    assert "hf download" in message, message
  assert "Git LFS pointer" in score_refusal(tmp_path / "model.safetensors", tmp_path)

  snapshot = make_hub_cache(str(tmp_path / "hub"), REPO,
                            {"config.json": os.path.join(GOLDEN, "config.json")})
  with pytest.raises(FileNotFoundError) as e:
    detect_format(snapshot)
  message = str(e.value)
  assert "download is incomplete" in message and f"hf download {REPO}" in message, message
  assert "\n" not in message


# ----------------------------------------------------------------------------------- finding 10


def test_names_from_a_hostile_file_are_escaped_and_bounded(tmp_path):
  hostile = "\x1b[2J\x1b]0;owned\x07" + "A" * 100_000
  directory = tmp_path / "names"
  directory.mkdir()
  shutil.copy(os.path.join(GOLDEN, "config.json"), directory)
  tensors = load_file(os.path.join(GOLDEN, "model.safetensors"))
  save_file({**tensors, hostile: np.zeros(1, np.float32)}, str(directory / "model.safetensors"))
  with pytest.raises(CheckpointError) as e:
    load_checkpoint(str(directory))
  message = str(e.value)
  assert "\\x1b[2J" in message and len(message) < 2000, message[:300]
  assert not any(ord(c) < 32 and c != "\n" or ord(c) == 127 for c in message), message[:300]

  shard_name = "\x1b[31m" + "B" * 100_000 + ".safetensors"
  directory = tmp_path / "shard_names"
  sharded(directory, weight_map={"shared.weight": shard_name})
  message = refusal(directory)
  assert "\\x1b[31m" in message and len(message) < 1000, message[:300]


# ----------------------------------------------------------------------------------- finding 11


def test_fp8_and_complex_safetensors_tensors_are_refused_by_dtype(tmp_path):
  tensors = load_file(os.path.join(GOLDEN, "model.safetensors"))
  name = "shared.weight"
  raw = {"F8_E4M3": bytes(tensors[name].size), "C64": np.zeros(tensors[name].shape,
                                                               np.complex64).tobytes()}
  for dtype, data in raw.items():
    directory = tmp_path / dtype
    directory.mkdir()
    shutil.copy(os.path.join(GOLDEN, "config.json"), directory)
    entries = {k: ("F32", list(v.shape), v.tobytes()) for k, v in tensors.items()}
    entries[name] = (dtype, list(tensors[name].shape), data)
    write_safetensors(directory / "model.safetensors", entries)
    with warnings.catch_warnings():
      warnings.simplefilter("error")  # numpy's ComplexWarning (imaginary part dropped) included
      message = refusal(directory)
    assert "model.safetensors" in message and f"'{name}'" in message and dtype in message, message
