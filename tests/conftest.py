"""Test settings shared by every module: quiet TensorFlow, CPU only, one compilation cache for the
session; and the benchmark scripts importable as modules (`load_benchmark`)."""

import importlib.util
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
_SESSION_CACHE = None
if os.environ.get("T5RANK_TEST_CACHE", "1") == "1":
  # One compilation cache for the whole session, made by the first process (pytest itself; xdist's
  # workers and every subprocess inherit it): a program one test compiled is read back by the
  # others that compile the same program. T5RANK_TEST_CACHE=0 compiles everything in every test.
  # Tests of the cache itself (test_device_settings, device_check) give their own directories.
  if "T5RANK_TEST_CACHE_DIR" not in os.environ:  # never the user's own cache
    _SESSION_CACHE = os.environ["T5RANK_TEST_CACHE_DIR"] = tempfile.mkdtemp(
        prefix="t5rank-test-cache-")
  os.environ["T5RANK_CACHE_DIR"] = os.environ["T5RANK_TEST_CACHE_DIR"]
  os.environ["T5RANK_COMPILATION_CACHE"] = "1"
  from t5rank.compilation import enable_compilation_cache

  enable_compilation_cache()
else:
  os.environ["T5RANK_COMPILATION_CACHE"] = "0"


def pytest_sessionfinish(session):
  if _SESSION_CACHE is not None:  # the process that made it, after its workers ended
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.fixture(scope="session")
def load_benchmark():
  """`load_benchmark("xpr_table")`: benchmarks/xpr_table.py imported as a module (the benchmark
  scripts are not a package); `load_benchmark("experiments/dense_ensemble")` one of the one-off
  experiments, benchmarks/experiments/dense_ensemble.py."""
  def load(path: str):
    name = path.rsplit("/", 1)[-1]
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCHMARKS, f"{path}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
  return load
