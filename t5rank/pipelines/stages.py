"""A job as a list of stages: each reads what the stages before it left in one `Record` and adds its
own (runs, models, data, the results it reports); `run_stages` runs them in order, prints each one's
title and time, and keeps the timings. A cascade of any length is a longer list.

    record = JobRecord(workdir)      # the job's own `Record`: the fields its stages share
    run_stages([export, first_stage, train, rerank, ..., evaluate, report], record)
    record.results    # what results.json holds
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Sequence, Union


@dataclasses.dataclass
class Record:
  """What every job's stages share: the work directory, the timings (seconds, by the name each
  stage reports) and the results to report. A job's own record adds what its stages produce as
  named fields (`t5rank.pipelines.insuranceqa_pools.InsuranceQARecord`,
  `t5rank.pipelines.cascade.CascadeRecord`, ...)."""
  workdir: str
  timings: dict[str, float] = dataclasses.field(default_factory=dict)
  results: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Stage:
  """One step of a job: `title` (or a function of the record giving it) is printed when it starts;
  `run(record)` does the work and returns (the name its time is kept under, a detail for the
  log)."""
  title: Union[str, Callable[[Record], str]]
  run: Callable[[Record], tuple[str, str]]


def run_stages(stages: Sequence[Stage], record: Record) -> Record:
  """Runs `stages` in order on `record` (`== title` when a stage starts, `== name: seconds;
  detail` when it ends) and keeps its timings and their total."""
  begin = time.perf_counter()
  for stage in stages:
    title = stage.title(record) if callable(stage.title) else stage.title
    print(f"== {title}", flush=True)
    start = time.perf_counter()
    name, detail = stage.run(record)
    record.timings[name] = round(time.perf_counter() - start, 1)
    print(f"== {name}: {record.timings[name]:.1f} s{'; ' + detail if detail else ''}", flush=True)
  record.timings["total"] = round(time.perf_counter() - begin, 1)
  return record


def finite(value: Any) -> Any:
  """`value` with every NaN or infinite float replaced by None: JSON has no NaN (a figure that is
  not a number, e.g. a metric of no query, is written as null)."""
  if isinstance(value, float):
    return value if math.isfinite(value) else None
  if isinstance(value, dict):
    return {k: finite(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [finite(v) for v in value]
  return value
