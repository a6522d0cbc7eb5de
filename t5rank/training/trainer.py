"""Training: a pure jitted `train_step` and `train(...)`, the loop around it, for every model.

    batches (numpy, this host's rows) -> global arrays on the (data, model) mesh
      -> train_step: the model's loss (`Trainable.loss_and_metrics`: monoT5's token cross-entropy in
         `seq2seq`, TK's hinge loss in `pairwise`) -> grads -> the optimizer -> new state
      -> metrics (loss, accuracy, learning rate, grad and param norms)
      -> console progress line + TensorBoard events; Orbax checkpoint every N steps and at the end;
         evaluation every M steps (`best/` when it improves); the final model exported to `final/`

`train` is a plain keyword-only function (a notebook can call it); `t5rank.training.gin_config` attaches gin.
A run resumes from the latest checkpoint in `model_dir`: parameters, optimizer state, step and data
position (the dataset is deterministic and skips to the step), so killing the process and running the
same command again continues where it left off. A non-finite loss (or parameters) stops training with
an error before anything non-finite is saved, leaving the last good checkpoint in place.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import optax

from t5rank import partitioning
from t5rank.checkpoints import native
from t5rank.checkpoints.locate import local_path
from t5rank.files import Output, WORK, atomic_write, check_outputs, holds
from t5rank.training.trainable import DatasetFn, Trainable, trainable_for

Batch = Mapping[str, Any]
State = dict[str, Any]  # {"step": int32 scalar, "params": pytree, "opt_state": pytree}
LearningRate = Union[float, optax.Schedule]


def adafactor(learning_rate: LearningRate) -> optax.GradientTransformation:
  """Adafactor as T5 and t5x fine-tune with it: factored second moments (dims >= 128), no momentum,
  decay rate 0.8 (beta2 = 1 - t^-0.8), update clipping at RMS 1.0, updates scaled by the parameter's
  RMS (at least 1e-3)."""
  return optax.adafactor(learning_rate, min_dim_size_to_factor=128, decay_rate=0.8,
                         multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
                         eps=1e-30, factored=True)


def inverse_square_root(warmup_steps: int = 10_000, scale: float = 1.0) -> optax.Schedule:
  """T5's pre-training schedule (Raffel et al. 2020, section 3.1.2): scale / sqrt(max(n, k)) at step
  n with k = `warmup_steps` (T5: 1.0 / sqrt(max(n, 10^4)), i.e. 0.01 for the first 10^4 steps,
  then decaying). Steps count from 0 here as in the trainer; step 0 and 1 both give 1/sqrt(k)."""
  if warmup_steps < 1:
    raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}")

  def schedule(step):
    return scale * jax.lax.rsqrt(jnp.maximum(jnp.asarray(step, jnp.float32), float(warmup_steps)))

  return schedule


def learning_rate_fn(learning_rate: LearningRate) -> optax.Schedule:
  return learning_rate if callable(learning_rate) else optax.constant_schedule(learning_rate)


# --------------------------------------------------------------------------------------- the step


def train_step(state: State, batch: Batch, *, model: Trainable,
               optimizer: optax.GradientTransformation, schedule: optax.Schedule,
               dropout_seed: int) -> tuple[State, dict[str, jax.Array]]:
  """One optimizer step on one global batch. Pure: the dropout key is derived from the step."""
  rng = jax.random.fold_in(jax.random.PRNGKey(dropout_seed), state["step"])
  grad_fn = jax.value_and_grad(functools.partial(model.loss_and_metrics, dropout_rng=rng),
                               has_aux=True)
  (_, metrics), grads = grad_fn(state["params"], batch)
  updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
  params = optax.apply_updates(state["params"], updates)
  metrics = dict(metrics, learning_rate=schedule(state["step"]), grad_norm=optax.tree.norm(grads),
                 param_norm=optax.tree.norm(params))
  return {"step": state["step"] + 1, "params": params, "opt_state": opt_state}, metrics


@dataclasses.dataclass(frozen=True)
class Trainer:
  """The compiled pieces of one run: state layout on the mesh, the init and the step functions."""
  mesh: jax.sharding.Mesh
  state_shardings: Any
  abstract_state: Any  # ShapeDtypeStructs with shardings, the target of a checkpoint restore
  init_fn: Callable[[Any], State]  # params (host or device) -> fresh state on the mesh
  step_fn: Callable[[State, Batch], tuple[State, dict[str, jax.Array]]]


def make_trainer(model: Trainable, mesh: jax.sharding.Mesh, *,
                 optimizer: optax.GradientTransformation, schedule: optax.Schedule,
                 dropout_seed: int = 0) -> Trainer:
  """Places parameters by the logical axis rules; the optimizer state goes where XLA puts it."""
  abstract_params = jax.eval_shape(functools.partial(model.init_params, init=Init()),
                                   jax.random.PRNGKey(0))
  params_sharding = partitioning.shardings_for(abstract_params, model.param_axes(), mesh)

  def new_state(params):
    params = jax.lax.with_sharding_constraint(params, params_sharding)
    return {"step": jnp.zeros((), jnp.int32), "params": params, "opt_state": optimizer.init(params)}

  init_fn = jax.jit(new_state, in_shardings=(params_sharding,))
  state_shardings = init_fn.lower(abstract_params).compile().output_shardings
  abstract_state = jax.tree.map(
      lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
      jax.eval_shape(new_state, abstract_params), state_shardings)
  step = functools.partial(train_step, model=model, optimizer=optimizer, schedule=schedule,
                           dropout_seed=dropout_seed)
  step_fn = jax.jit(step, in_shardings=(state_shardings, partitioning.batch_sharding(mesh)),
                    out_shardings=(state_shardings, partitioning.replicated(mesh)),
                    donate_argnums=0)
  return Trainer(mesh, state_shardings, abstract_state, init_fn, step_fn)


# ------------------------------------------------------------------------------- the orchestration


def _duration(seconds: float) -> str:
  seconds = int(max(seconds, 0))
  h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
  return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class Progress:
  """Accumulates per-step metrics and throughput; reports them every few steps. The clock starts
  after the first step of the process, so that compilation does not count against examples/s."""

  def __init__(self, train_steps: int):
    self.train_steps = train_steps
    self.start: Optional[float] = None
    self.sums: dict[str, float] = {}
    self.steps = self.timed_steps = self.examples = self.tokens = 0

  def add(self, metrics: Mapping[str, float], examples: int, tokens: int) -> None:
    for k, v in metrics.items():
      self.sums[k] = self.sums.get(k, 0.0) + float(v)
    self.steps += 1
    if self.start is None:
      self.start = time.perf_counter()
      return
    self.timed_steps += 1
    self.examples += examples
    self.tokens += tokens

  def report(self, step: int) -> tuple[dict[str, float], str]:
    """Means since the last report, examples/s and tokens/s, and a console line with the ETA."""
    now = time.perf_counter()
    elapsed = max(now - self.start, 1e-9)
    scalars = {k: v / self.steps for k, v in self.sums.items()}
    scalars.update(examples_per_second=self.examples / elapsed,
                   tokens_per_second=self.tokens / elapsed,
                   steps_per_second=self.timed_steps / elapsed)
    eta = ("?" if not self.timed_steps
           else _duration((self.train_steps - step) / scalars["steps_per_second"]))
    line = (f"step {step}/{self.train_steps}  loss {scalars['loss']:.4f}  "
            f"acc {scalars['accuracy']:.3f}  "
            + (f"tok_acc {scalars['token_accuracy']:.3f}  " if "token_accuracy" in scalars else "")
            + f"lr {scalars['learning_rate']:.2e}  |  "
            f"{scalars['examples_per_second']:.1f} ex/s  {scalars['tokens_per_second']:.0f} tok/s  |  "
            f"ETA {eta}")
    self.start = now
    self.sums, self.steps, self.timed_steps, self.examples, self.tokens = {}, 0, 0, 0, 0
    return scalars, line


def _checkpoint_manager(model_dir: str, keep_checkpoints: int):
  import orbax.checkpoint as ocp
  options = ocp.CheckpointManagerOptions(max_to_keep=keep_checkpoints, create=True,
                                         enable_async_checkpointing=True)
  return ocp.CheckpointManager(os.path.join(os.path.abspath(model_dir), "checkpoints"),
                               options=options)


def _save(manager, state: State, data_position: dict) -> None:
  import orbax.checkpoint as ocp
  manager.save(int(data_position["step"]),
               args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                       data=ocp.args.JsonSave(data_position)))


def _restore(manager, trainer: Trainer, run: dict, model: Trainable) -> tuple[State, int]:
  """The latest checkpoint's state, after checking (on its small JSON part, before the arrays are
  read) that it belongs to the same run settings."""
  import orbax.checkpoint as ocp
  step = manager.latest_step()
  saved = manager.restore(step, args=ocp.args.Composite(data=ocp.args.JsonRestore()))["data"]
  changed = {k: (saved.get(k), v) for k, v in run.items() if saved.get(k) != v
             and not (k == "config" and saved.get(k) is not None and _same_config(model, saved[k]))}
  if changed:
    details = ", ".join(f"{k}: checkpoint {a!r} vs now {b!r}" for k, (a, b) in changed.items())
    raise ValueError(f"{manager.directory} holds step {step} of a run with other settings "
                     f"({details}); use a new MODEL_DIR or the same settings to resume")
  restored = manager.restore(step, args=ocp.args.Composite(
      state=ocp.args.StandardRestore(trainer.abstract_state)))
  return restored["state"], int(saved["step"])


def _same_config(model: Trainable, saved_json: str) -> bool:
  try:  # the config of another model family does not even parse as this one's
    return model.same_config(saved_json)
  except (TypeError, ValueError, KeyError):
    return False


def _to_jsonable(value: Any) -> Any:
  return json.loads(json.dumps(value, default=str))


@dataclasses.dataclass
class Init:
  """Where training starts. `checkpoint`: for T5, any checkpoint
  `t5rank.models.t5_weights.load_checkpoint` reads (Orbax, Hugging Face, Mesh TensorFlow, t5x);
  for TK, a TK checkpoint or a word-embedding directory of `t5rank embeddings` (pre-trained
  embeddings, the rest random); None for random weights. `term_matching_heads` (T5 only):
  from random weights, start this many heads of encoder layer 0 as term-matching heads
  (`t5rank.models.network.term_matching_init`; 0 = T5's plain init; refused with a checkpoint,
  whose weights are the starting point); `term_matching_scale` is its `scale` (the attention logit
  between two copies of a token is about scale x d_kv)."""
  checkpoint: Optional[str] = None
  term_matching_heads: int = 0
  term_matching_scale: float = 1.0

  def __post_init__(self):
    self.checkpoint = local_path(self.checkpoint)  # `shipped:NAME`: a model t5rank ships


@dataclasses.dataclass
class Optimization:
  """The update: `learning_rate` (a constant or an optax schedule of the step), `optimizer`
  (learning rate -> optax transformation; T5's Adafactor by default), dropout (replaces the model
  config's rate; TK has none and refuses it), the z-loss of the cross-entropy, and the ranking loss
  of the models trained on lists (RankT5: `t5rank.training.ranking_losses`; None = its default)."""
  learning_rate: LearningRate = 1e-3
  optimizer: Callable[[LearningRate], optax.GradientTransformation] = adafactor
  dropout_rate: float = 0.1
  z_loss: float = 0.0
  ranking_loss: Optional[Callable[..., Any]] = None


@dataclasses.dataclass
class Loop:
  """What the loop does besides stepping: a console line and TensorBoard point every `log_every`
  steps; a checkpoint every `checkpoint_every` steps and at the end, the last `keep_checkpoints`
  kept; every `eval_every` steps (and at the end) `eval_fn(params, config)`, whose results are
  logged, e.g. MRR@10 from `t5rank.training.rerank_eval.RerankEval` (an `eval_fn` with a
  `check_task(task_name, vocab, targets, bm25_in_input)` method is asked before training whether it
  fits the task). The host reads the device's metrics back only on these steps. `keep_best`
  names one of eval_fn's metrics (e.g. "mrr@10"): each evaluation that improves on it exports the
  model to `best/` (model selection by validation, the TK paper's early stopping; training still
  runs `train_steps`)."""
  checkpoint_every: int = 1000
  keep_checkpoints: int = 3
  log_every: int = 100
  eval_every: int = 0
  eval_fn: Optional[Callable[[Any, Any], Mapping[str, float]]] = None
  keep_best: Optional[str] = None


def train(*, model_config: Any, task_name: str, feature_lengths: Mapping[str, int],
          train_steps: int, batch_size: int, model_dir: str, init: Init = Init(),
          optimization: Optimization = Optimization(), loop: Loop = Loop(), pack: bool = False,
          mesh_shape: Sequence[int] = (-1, 1), seed: int = 0,
          dataset_fn: Optional[DatasetFn] = None,
          record: Mapping[str, str] = {}, model: Optional[str] = None) -> dict[str, float]:
  """Trains `model_config` on `task_name` for `train_steps` steps; returns the last reported
  metrics. The model's `Trainable` (`t5rank.training.trainable.trainable_for`) supplies the loss,
  the parameters, the data and the export: monoT5 for a T5Config, TK for a TKConfig.

  Args:
    model_config: the architecture (T5Config or TKConfig). A T5's vocab_size must hold the task's
      vocabulary (pieces + extra ids), a TK's word list must be its task's, else a ValueError
      before training.
    task_name: for T5 a registered SeqIO task or mixture (see `t5rank.tasks`), class-balanced
      batches; for TK a triple source of `t5rank.data.tk_triples.SOURCES`.
    feature_lengths: T5: {"inputs": 512, "targets": 2} (target word + EOS); TK: {"query": 30,
      "document": 200}.
    train_steps: total steps, counted from the start of the run (not from a resume).
    batch_size: global batch size (rows; with `pack`, rows hold several examples).
    model_dir: checkpoints (`checkpoints/<step>`), TensorBoard events (`train/`), `config.json`, and
      at the end the trained model as a t5rank checkpoint (`final/`, for `t5rank score`) with the
      task's vocabulary file and target words. An existing run in it is resumed.
    init, optimization, loop: the `Init`, `Optimization` and `Loop` above.
    mesh_shape: (data, model) device mesh; -1 for all remaining devices.
    seed: seeds the data order, parameter init and dropout.
    dataset_fn: `fn(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
      num_shards)` yielding this host's rows of each global batch as numpy arrays; default the
      model's (T5: `t5rank.data.training_data.training_dataset`).
    record: {file name: text} written into `model_dir` beside config.json (the gin configuration),
      once `model_dir` is known to be new or to hold this run.
    model: the family to train, by name (`t5rank.models.registry`); None: the family of
      `model_config`'s class (monoT5 for a T5Config, `registry.for_config`).
  """
  from clu import metric_writers


  if train_steps < 1:
    raise ValueError(f"train_steps (TRAIN_STEPS) must be at least 1, got {train_steps}: a model "
                     "that never trained is not exported")
  check_outputs([Output("MODEL_DIR", model_dir, WORK,
                        holds("checkpoints", "config.json", "config.gin", "final"))], {})
  model = trainable_for(model_config, optimization, model)
  model.check(task_name, init, optimization, loop)
  config = model.config
  if dataset_fn is None:
    dataset_fn = model.dataset_fn()
  mesh = partitioning.create_mesh(mesh_shape)
  schedule = learning_rate_fn(optimization.learning_rate)
  trainer = make_trainer(model, mesh, optimizer=optimization.optimizer(schedule),
                         schedule=schedule, dropout_seed=seed)
  run = _to_jsonable({"task_name": task_name, "batch_size": batch_size, "seed": seed, "pack": pack,
                      "feature_lengths": dict(feature_lengths), "config": config.to_json(),
                      **({"term_matching": [init.term_matching_heads, init.term_matching_scale]}
                         if init.term_matching_heads else {})})
  is_chief = jax.process_index() == 0
  os.makedirs(model_dir, exist_ok=True)
  manager = _checkpoint_manager(model_dir, loop.keep_checkpoints)
  resuming = manager.latest_step() is not None
  if resuming:  # refused before anything of this run is written when it is another run's
    state, step = _restore(manager, trainer, run, model)
  if is_chief:

    for name, text in {"config.json": config.to_json(), **record}.items():
      with atomic_write(os.path.join(model_dir, name)) as f:
        f.write(text)
  if resuming:
    print(f"resumed from {manager.directory}/{step}", flush=True)
  else:
    rng = jax.random.PRNGKey(seed)
    if init.checkpoint is None:  # built on the devices, never whole on the host
      params = jax.jit(functools.partial(model.init_params, init=init),
                       out_shardings=trainer.state_shardings["params"])(rng)
    else:
      params = model.init_params(rng, init)
    state, step = trainer.init_fn(params), 0

  say = functools.partial(print, flush=True) if is_chief else lambda *_: None
  say(f"step {step}/{train_steps}: preparing the training data ({task_name}) and compiling the "
      "step")
  started = time.perf_counter()
  shard_index, num_shards = partitioning.host_data_shard(mesh, batch_size)
  batches = dataset_fn(task_name, batch_size=batch_size,
                       feature_lengths=dict(feature_lengths), seed=seed, start_step=step, pack=pack,
                       shard_index=shard_index, num_shards=num_shards)
  writer = metric_writers.create_default_writer(os.path.join(model_dir, "train"),
                                                just_logging=not is_chief)
  progress = Progress(train_steps)
  scalars: dict[str, float] = {}
  pending: list[tuple[dict, tuple[int, int]]] = []  # device metrics of the steps since the last sync
  first_step = step + 1  # synced at once: the progress clock starts after its compilation
  best = _best_so_far(model_dir, loop.keep_best)  # a resumed run keeps improving on its best/
  try:
    while step < train_steps:
      local = next(batches)
      if step + 1 == first_step:
        say(f"data ready in {time.perf_counter() - started:.1f} s; compiling the step")
        started = time.perf_counter()
      state, metrics = trainer.step_fn(state, partitioning.global_batch(mesh, local, batch_size))
      step += 1
      pending.append((metrics, model.batch_counts(local)))
      logging_now = step % loop.log_every == 0 or step == train_steps
      evaluating = bool(loop.eval_fn is not None and loop.eval_every
                        and (step % loop.eval_every == 0 or step == train_steps))
      saving = step % loop.checkpoint_every == 0 or step == train_steps
      if not (logging_now or evaluating or saving or step == first_step):
        continue  # the host dispatches ahead; the device's metrics stay there until a sync step
      _sync(pending, progress, step, manager)
      pending = []
      if step == first_step:
        say(f"step {step} done in {time.perf_counter() - started:.1f} s (compilation included)")
      if logging_now:
        scalars, line = progress.report(step)
        writer.write_scalars(step, scalars)
        if is_chief:
          print(line, flush=True)
      if evaluating:
        say(f"step {step}: evaluating")
        results = {f"eval/{k}": v for k, v in loop.eval_fn(state["params"], config).items()}
        writer.write_scalars(step, results)
        if is_chief:
          print(f"step {step} eval " + "  ".join(f"{k} {v:.4f}" for k, v in results.items()),
                flush=True)
        scalars = {**scalars, **results}  # the async writer may still be reading `scalars`
        if loop.keep_best and _improves(results, loop.keep_best, best):
          best = results[f"eval/{loop.keep_best}"]
          _export(os.path.join(model_dir, "best"), state["params"], model,
                  dict(run, step=step, **{f"eval/{loop.keep_best}": best}), keep_old=False)
      if saving:
        _save(manager, state, dict(run, step=step))
  finally:
    manager.wait_until_finished()
    manager.close()
    writer.flush()
  _export(os.path.join(model_dir, "final"), state["params"], model, dict(run, step=step))
  return scalars


def _best_so_far(model_dir: str, metric: Optional[str]) -> float:
  """The `metric` value of the model in `model_dir/best` (-inf when there is none)."""
  path = os.path.join(model_dir, "best")
  if not metric or not os.path.exists(os.path.join(path, "config.json")):
    return -math.inf
  return float(native.read_metadata(path).get(f"eval/{metric}", -math.inf))


def _improves(results: Mapping[str, float], metric: str, best: float) -> bool:
  key = f"eval/{metric}"
  if key not in results:
    raise ValueError(f"Loop.keep_best is {metric!r} but the evaluation gives "
                     f"{sorted(k[5:] for k in results)}")
  return results[key] > best


def _sync(pending: Sequence[tuple[dict, tuple[int, int]]], progress: Progress, step: int,
          manager) -> None:
  """Reads the pending steps' metrics back to the host (one transfer) and adds them to `progress`.
  A non-finite loss or parameter norm in any of them stops training with FloatingPointError before
  anything is saved: the last checkpoint (an earlier sync step) stays the last good one."""
  values = jax.device_get([metrics for metrics, _ in pending])
  first_step = step - len(pending) + 1
  for offset, (metrics, (_, (examples, tokens))) in enumerate(zip(values, pending)):
    if not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["param_norm"])):
      manager.wait_until_finished()
      raise FloatingPointError(
          f"step {first_step + offset}: loss {metrics['loss']}, parameter norm "
          f"{metrics['param_norm']}; stopped at step {step}. The last good checkpoint is step "
          f"{manager.latest_step()} in {manager.directory}. Lower the learning rate or check the "
          "data, then rerun.")
    progress.add(metrics, examples, tokens)


def _export(directory: str, params, model: Trainable, metadata: dict,
            keep_old: bool = True) -> None:
  """The parameters as a t5rank checkpoint (`model.export`: `t5rank score` reads it), once per
  step: an existing export of the same step is kept; one of an earlier step (a run resumed with more
  TRAIN_STEPS) is moved to `<directory>.step{N}` (`keep_old`) or removed (a better `best/`), and
  the new one written."""
  from jax.experimental import multihost_utils

  if os.path.exists(os.path.join(directory, "config.json")):
    old_step = native.read_metadata(directory).get("step")
    if old_step == metadata.get("step"):
      return
    if jax.process_index() == 0:
      aside = f"{directory.rstrip(os.sep)}.step{old_step}"
      shutil.rmtree(aside, ignore_errors=True)
      os.rename(directory, aside)
      if keep_old:
        print(f"{directory} held step {old_step}; moved to {aside}", flush=True)
      else:
        shutil.rmtree(aside)
    multihost_utils.sync_global_devices("t5rank train: old export moved")
  model.export(directory, multihost_utils.process_allgather(params, tiled=True), metadata)
  if jax.process_index() == 0:
    print(f"exported: {directory}", flush=True)
