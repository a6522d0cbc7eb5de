"""The InsuranceQA cascades' catalogue (`t5rank demo`): which models they use (`Model`: each one's
recipe, the model it starts from, whether it is distilled), which cascades there are (`CascadeJob`:
`ENGLISH_CASCADE`, `XPR_CASCADE`), their rerankers, default depths, metrics, work directories and
the validation queries their fusion weights are tuned on, the distillation teacher's members
and weights, and what a cascade job's stages share (`CascadeJobRecord`). Data only:
`t5rank.pipelines.insuranceqa_provisioning` provides these models,
`t5rank.pipelines.insuranceqa_cascade` runs the cascades."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from t5rank.pipelines.insuranceqa_pools import (CROSS_LINGUAL, DEFAULT_GIN_FILE, ENGLISH,
                                                METRICS, TUNE_QUERIES, XPR_METRICS,
                                                InsuranceQARecord, Job)

# the teacher: BM25, TK and monoT5 fused with the weights the shipped cascade's validation queries
# gave its monoT5 fusion (BENCHMARKS.md, "Distillation (Margin-MSE)")
TEACHER_MEMBERS = ("bm25", "tk", "monot5")
TEACHER_WEIGHTS = (0.05, 0.55, 0.4)


@dataclasses.dataclass(frozen=True)
class Model:
  """A model of the cascade: trained by `gin_file` with `bindings` (and the job's own for monoT5),
  from the model named `init` (its INIT_CHECKPOINT), on the teacher's scores when `distilled`
  (its TEACHER_SCORES), shipped as shipped:NAME."""
  name: str
  gin_file: str
  bindings: tuple[str, ...] = ()
  init: Optional[str] = None
  distilled: bool = False


MODELS = (
    Model("dual_encoder", "gin/experiments/dual_encoder_insuranceqa_cpu.gin"),
    Model("tk", "gin/experiments/tk_insuranceqa_cpu.gin"),
    # twice the single-model job's 8,000 steps (BENCHMARKS.md, "monoT5 trained 16,000 steps")
    Model("monot5", DEFAULT_GIN_FILE, bindings=("TRAIN_STEPS = 16000",)),
    # RankT5 (listwise softmax loss) of 32,000 steps, BM25's score in its input (BENCHMARKS.md,
    # "RankT5 of 32,000 steps in the cascade")
    Model("rankt5", "gin/experiments/rankt5_insuranceqa_bm25_cpu.gin",
          bindings=("TRAIN_STEPS = 32000",)),
    Model("duot5", "gin/experiments/duot5_bm25_insuranceqa_cpu.gin", init="monot5"),
)
DISTILLED_TK = Model("tk_distilled", "gin/experiments/tk_distill_insuranceqa_cpu.gin",
                     distilled=True)
# the cross-lingual models: the bilingual T5 pre-trained with span corruption and the monoT5
# fine-tuned from it on the mixed strategy's pairs; the dual encoder's first stage on XPI's
# sentence pairs and its second on the mixed strategy's pairs (`t5rank demo --cross-lingual`)
XPR_MODELS = (
    Model("xpr_pretrained", CROSS_LINGUAL.pretrain_gin_file),
    Model("xpr_monot5", CROSS_LINGUAL.gin_file, init="xpr_pretrained"),
    Model("xpr_dual_encoder_xpi", CROSS_LINGUAL.dense_gin_file,
          bindings=CROSS_LINGUAL.dense_pretrain_bindings),
    Model("xpr_dual_encoder", CROSS_LINGUAL.dense_gin_file, init="xpr_dual_encoder_xpi"),
)


@dataclasses.dataclass(frozen=True)
class CascadeJob:
  """What differs between the cascades: the data (`data`: its export and BM25's analyzer), the
  models (prepared in this order, each after the one it starts from), the rerankers of the cascade
  (each a row's name and a model's), their default depths, the metrics, the work directory, the
  validation queries the fusion weights are tuned on, and the file of t5rank/shipped holding the
  weights tuned with the shipped models (`shipped_weights`)."""
  key: str
  data: Job
  models: tuple[Model, ...]
  rerankers: tuple[tuple[str, str], ...]
  depths: tuple[int, ...]
  workdir: str
  metrics: tuple[str, ...] = METRICS
  tune_queries: int = TUNE_QUERIES
  weights_file: Optional[str] = None


@dataclasses.dataclass
class CascadeJobRecord(InsuranceQARecord):
  """What a cascade job's stages share besides the export and BM25: the `job`; the rerankers of
  the cascade run (`cascade`: each a row's name and a model's; `cascade_models` the models'
  names); what each model is (`models`, by name, as results.json says) and what the models
  prepared so far were trained by (`trained`: by name, (recipe hash, checkpoint, trained now),
  and the teacher's); the `teacher` (with `distil`); the validation cascade's results or the
  shipped weights (`valid`) and the test cascade's results (`test`)."""
  job: Optional[CascadeJob] = None
  cascade: list[tuple[str, str]] = dataclasses.field(default_factory=list)
  cascade_models: list[str] = dataclasses.field(default_factory=list)
  models: dict[str, dict] = dataclasses.field(default_factory=dict)
  trained: dict[str, tuple] = dataclasses.field(default_factory=dict)
  teacher: Optional[dict] = None
  valid: dict = dataclasses.field(default_factory=dict)
  test: dict = dataclasses.field(default_factory=dict)


# the dual encoder, TK and monoT5: the whole pool (~200; monoT5 over the fused top 100 instead loses
# a sixth of the relevant answers it would rank high: validation MRR .3913 against .4079, before
# the dual encoder joined); RankT5: the fused top 50 (validation MRR of its fusion .4871 against
# .4898 over the pool, a quarter of its time; BENCHMARKS.md, "RankT5 of 32,000 steps in the
# cascade"); duoT5: the top 10. The dual encoder first: validation MRR of monoT5's
# fusion .4280 against .4079 without it (BENCHMARKS.md, "The cascade: `make demo`"). The weights:
# tuned on 1,000 validation queries (on the other 1,000, MRR .4532 against .4345 with weights tuned
# on 200; BENCHMARKS.md, "Fusion weights tuned on 1,000 validation questions"), shipped
ENGLISH_CASCADE = CascadeJob(
    key="t5rank demo: the InsuranceQA cascade", data=ENGLISH, models=MODELS,
    rerankers=(("dual_encoder", "dual_encoder"), ("tk", "tk"), ("monot5", "monot5"),
               ("rankt5", "rankt5"), ("duot5", "duot5")),
    depths=(1000, 1000, 1000, 50, 10), workdir=os.path.join("runs", "insuranceqa_cascade"),
    tune_queries=1000, weights_file="insuranceqa_cascade_weights.json")
# the dual encoder: the whole pool; monoT5: the fused top 100 (validation MRR of its fusion .211,
# over the pool .210, top 20 .204; half the time of the pool)
XPR_CASCADE = CascadeJob(
    key="t5rank demo --cross-lingual: the XPR cascade", data=CROSS_LINGUAL, models=XPR_MODELS,
    rerankers=(("dual_encoder", "xpr_dual_encoder"), ("monot5", "xpr_monot5")),
    depths=(1000, 100), workdir=os.path.join("runs", "insuranceqa_xpr_cascade"),
    metrics=XPR_METRICS)
