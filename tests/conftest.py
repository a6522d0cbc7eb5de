"""Test settings shared by every module: quiet TensorFlow, CPU only; and the benchmark scripts
importable as modules (`load_benchmark`)."""

import importlib.util
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("T5RANK_COMPILATION_CACHE", "0")  # tests/test_device_settings.py turns it on

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
