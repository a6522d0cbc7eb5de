"""Fine-tuning: a pure jitted `train_step` and `train(...)`, the loop around it.

    batches (numpy, this host's rows) -> global arrays on the (data, model) mesh
      -> train_step: T5 forward with dropout -> token cross-entropy -> grads -> Adafactor -> new state
      -> metrics (loss, accuracy of the first target token, learning rate, grad and param norms)
      -> console progress line + TensorBoard events; Orbax checkpoint every N steps and at the end

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
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax

from t5rank import partitioning
from t5rank.models.config import T5Config
from t5rank.models.network import T5, init_params, term_matching_init
from t5rank.models.vocab import Vocabulary

Batch = Mapping[str, Any]
State = dict[str, Any]  # {"step": int32 scalar, "params": pytree, "opt_state": pytree}
DatasetFn = Callable[..., Iterator[dict[str, np.ndarray]]]
LearningRate = Union[float, optax.Schedule]

MODEL_INPUTS = ("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens",
                "encoder_segment_ids", "decoder_segment_ids", "encoder_positions",
                "decoder_positions")


def adafactor(learning_rate: LearningRate) -> optax.GradientTransformation:
  """Adafactor as T5 and t5x fine-tune with it: factored second moments (dims >= 128), no momentum,
  decay rate 0.8 (beta2 = 1 - t^-0.8), update clipping at RMS 1.0, updates scaled by the parameter's
  RMS (at least 1e-3)."""
  return optax.adafactor(learning_rate, min_dim_size_to_factor=128, decay_rate=0.8,
                         multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
                         eps=1e-30, factored=True)


def learning_rate_fn(learning_rate: LearningRate) -> optax.Schedule:
  return learning_rate if callable(learning_rate) else optax.constant_schedule(learning_rate)


# --------------------------------------------------------------------------------------- the step


def cross_entropy(logits: jax.Array, targets: jax.Array,
                  z_loss: float = 0.0) -> jax.Array:
  """Per-token loss (B, T): -log softmax(logits)[target] + z_loss * log(Z)^2, in float32."""
  logits = logits.astype(jnp.float32)  # (B, T, V)
  log_z = jax.nn.logsumexp(logits, axis=-1)  # (B, T)
  target_logit = jnp.take_along_axis(logits, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
  return log_z - target_logit + z_loss * jnp.square(log_z)


def loss_and_metrics(params, batch: Batch, *, config: T5Config, dropout_rng: Optional[jax.Array],
                     z_loss: float = 0.0) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean token loss over `decoder_loss_weights`, and the accuracy of the first target token (the
  target word) of every example. Packed rows (segment ids and positions given) give the same values
  as the same examples unpacked. Dropout is on when `dropout_rng` is given."""
  inputs = {k: batch[k] for k in MODEL_INPUTS if k in batch}
  logits = T5(config).apply({"params": params}, **inputs, deterministic=dropout_rng is None,
                            rngs=None if dropout_rng is None else {"dropout": dropout_rng})
  targets = batch["decoder_target_tokens"]  # (B, T)
  weights = batch["decoder_loss_weights"].astype(jnp.float32)  # (B, T)
  loss = jnp.sum(cross_entropy(logits, targets, z_loss) * weights) / jnp.maximum(weights.sum(), 1.0)
  positions = batch.get("decoder_positions")
  if positions is None:
    positions = jnp.broadcast_to(jnp.arange(targets.shape[1]), targets.shape)
  first = ((positions == 0) & (weights > 0)).astype(jnp.float32)  # (B, T) the target word of each
  correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
  accuracy = jnp.sum(correct * first) / jnp.maximum(first.sum(), 1.0)
  return loss, {"loss": loss, "accuracy": accuracy}


def train_step(state: State, batch: Batch, *, config: T5Config,
               optimizer: optax.GradientTransformation, schedule: optax.Schedule,
               dropout_seed: int, z_loss: float) -> tuple[State, dict[str, jax.Array]]:
  """One optimizer step on one global batch. Pure: the dropout key is derived from the step."""
  rng = jax.random.fold_in(jax.random.PRNGKey(dropout_seed), state["step"])
  grad_fn = jax.value_and_grad(
      functools.partial(loss_and_metrics, config=config, dropout_rng=rng, z_loss=z_loss),
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


def make_trainer(config: T5Config, mesh: jax.sharding.Mesh, *,
                 optimizer: optax.GradientTransformation, schedule: optax.Schedule,
                 dropout_seed: int = 0, z_loss: float = 0.0) -> Trainer:
  """Places parameters by the logical axis rules; the optimizer state goes where XLA puts it."""
  params_sharding = partitioning.param_shardings(config, mesh)

  def new_state(params):
    params = jax.lax.with_sharding_constraint(params, params_sharding)
    return {"step": jnp.zeros((), jnp.int32), "params": params, "opt_state": optimizer.init(params)}

  abstract_params = jax.eval_shape(functools.partial(init_params, config), jax.random.PRNGKey(0))
  init_fn = jax.jit(new_state, in_shardings=(params_sharding,))
  state_shardings = init_fn.lower(abstract_params).compile().output_shardings
  abstract_state = jax.tree.map(
      lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
      jax.eval_shape(new_state, abstract_params), state_shardings)
  step = functools.partial(train_step, config=config, optimizer=optimizer, schedule=schedule,
                           dropout_seed=dropout_seed, z_loss=z_loss)
  step_fn = jax.jit(step, in_shardings=(state_shardings, partitioning.batch_sharding(mesh)),
                    out_shardings=(state_shardings, partitioning.replicated(mesh)),
                    donate_argnums=0)
  return Trainer(mesh, state_shardings, abstract_state, init_fn, step_fn)


# ------------------------------------------------------------------------------- the orchestration


def batch_counts(batch: Batch) -> tuple[int, int]:
  """(examples, non-padding tokens) of a numpy batch; a packed row holds several examples."""
  weights = batch["decoder_loss_weights"] > 0
  positions = batch.get("decoder_positions")
  if positions is None:
    examples = int(weights.any(axis=1).sum())
  else:
    examples = int(((positions == 0) & weights).sum())
  tokens = int((batch["encoder_input_tokens"] > 0).sum() + (batch["decoder_target_tokens"] > 0).sum())
  return examples, tokens


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
            f"acc {scalars['accuracy']:.3f}  lr {scalars['learning_rate']:.2e}  |  "
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


def _restore(manager, trainer: Trainer, run: dict) -> tuple[State, int]:
  """The latest checkpoint's state, after checking it belongs to the same run settings."""
  import orbax.checkpoint as ocp
  step = manager.latest_step()
  restored = manager.restore(step, args=ocp.args.Composite(
      state=ocp.args.StandardRestore(trainer.abstract_state), data=ocp.args.JsonRestore()))
  saved = restored["data"]
  changed = {k: (saved.get(k), v) for k, v in run.items() if saved.get(k) != v
             and not (k == "config" and saved.get(k) is not None
                      and T5Config.from_json(saved[k]) == T5Config.from_json(v))}
  # (a config saved before a field existed, e.g. scale_decoder_outputs, is the same architecture)
  if changed:
    details = ", ".join(f"{k}: checkpoint {a!r} vs now {b!r}" for k, (a, b) in changed.items())
    raise ValueError(f"{manager.directory} holds step {step} of a run with other settings "
                     f"({details}); use a new MODEL_DIR or the same settings to resume")
  return restored["state"], int(saved["step"])


def _to_jsonable(value: Any) -> Any:
  return json.loads(json.dumps(value, default=str))


@dataclasses.dataclass
class Init:
  """Where training starts. `checkpoint`: any checkpoint `t5rank.checkpoints.load_checkpoint` reads
  (Orbax, Hugging Face, Mesh TensorFlow, t5x), or None for random weights. `term_matching_heads`:
  from random weights, start this many heads of encoder layer 0 as term-matching heads
  (`t5rank.models.network.term_matching_init`; 0 = T5's plain init; refused with a checkpoint,
  whose weights are the starting point); `term_matching_scale` is its `scale` (the attention logit
  between two copies of a token is about scale x d_kv)."""
  checkpoint: Optional[str] = None
  term_matching_heads: int = 0
  term_matching_scale: float = 1.0


@dataclasses.dataclass
class Optimization:
  """The update: `learning_rate` (a constant or an optax schedule of the step), `optimizer`
  (learning rate -> optax transformation; T5's Adafactor by default), dropout (replaces the model
  config's rate) and the z-loss of the cross-entropy."""
  learning_rate: LearningRate = 1e-3
  optimizer: Callable[[LearningRate], optax.GradientTransformation] = adafactor
  dropout_rate: float = 0.1
  z_loss: float = 0.0


@dataclasses.dataclass
class Loop:
  """What the loop does besides stepping: a console line and TensorBoard point every `log_every`
  steps; a checkpoint every `checkpoint_every` steps and at the end, the last `keep_checkpoints`
  kept; every `eval_every` steps (and at the end) `eval_fn(params, config)`, whose results are
  logged, e.g. MRR@10 from `t5rank.training.rerank_eval.RerankEval` (an `eval_fn` with a
  `check_task(task_name, vocab, targets, bm25_in_input)` method is asked before training whether it
  fits the task). The host reads the device's metrics back only on these steps."""
  checkpoint_every: int = 1000
  keep_checkpoints: int = 3
  log_every: int = 100
  eval_every: int = 0
  eval_fn: Optional[Callable[[Any, T5Config], Mapping[str, float]]] = None


def train(*, model_config: T5Config, task_name: str, feature_lengths: Mapping[str, int],
          train_steps: int, batch_size: int, model_dir: str, init: Init = Init(),
          optimization: Optimization = Optimization(), loop: Loop = Loop(), pack: bool = False,
          mesh_shape: Sequence[int] = (-1, 1), seed: int = 0,
          dataset_fn: Optional[DatasetFn] = None) -> dict[str, float]:
  """Fine-tunes `model_config` on the SeqIO task `task_name` for `train_steps` steps; returns the
  last reported metrics.

  Args:
    model_config: the architecture. Its vocab_size must hold the task's vocabulary (pieces + extra
      ids), else a ValueError before training.
    task_name: a registered task or mixture (see `t5rank.tasks`), class-balanced batches.
    feature_lengths: {"inputs": 512, "targets": 2} (target word + EOS).
    train_steps: total steps, counted from the start of the run (not from a resume).
    batch_size: global batch size (rows; with `pack`, rows hold several examples).
    model_dir: checkpoints (`checkpoints/<step>`), TensorBoard events (`train/`), `config.json`, and
      at the end the trained model as a t5rank checkpoint (`final/`, for `t5rank score`) with the
      task's vocabulary file and target words. An existing run in it is resumed.
    init, optimization, loop: the `Init`, `Optimization` and `Loop` above.
    mesh_shape: (data, model) device mesh; -1 for all remaining devices.
    seed: seeds the data order, parameter init and dropout.
    dataset_fn: `fn(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
      num_shards)` yielding this host's rows of each global batch as numpy arrays; default
      `t5rank.data.training_data.training_dataset`.
  """
  from clu import metric_writers

  from t5rank.data.seqio_tasks import task_bm25_in_input, task_target_words, task_vocabulary

  if dataset_fn is None:
    import t5rank.tasks  # noqa: F401  (registers the tasks)
    from t5rank.data.training_data import training_dataset as dataset_fn
  config = model_config.replace(dropout_rate=optimization.dropout_rate)
  vocab, targets = task_vocabulary(task_name), task_target_words(task_name)
  bm25_in_input = task_bm25_in_input(task_name)
  if vocab is not None:
    check_vocabulary(vocab, config, task_name)
    if hasattr(loop.eval_fn, "check_task"):
      loop.eval_fn.check_task(task_name, vocab, targets, bm25_in_input)
  if init.term_matching_heads and init.checkpoint is not None:
    raise ValueError("term_matching_heads initializes random weights; it cannot be combined with "
                     f"an init checkpoint {init.checkpoint!r} (set one of them)")
  mesh = partitioning.create_mesh(mesh_shape)
  schedule = learning_rate_fn(optimization.learning_rate)
  trainer = make_trainer(config, mesh, optimizer=optimization.optimizer(schedule),
                         schedule=schedule, dropout_seed=seed, z_loss=optimization.z_loss)
  run = _to_jsonable({"task_name": task_name, "batch_size": batch_size, "seed": seed, "pack": pack,
                      "feature_lengths": dict(feature_lengths), "config": config.to_json(),
                      **({"term_matching": [init.term_matching_heads, init.term_matching_scale]}
                         if init.term_matching_heads else {})})
  is_chief = jax.process_index() == 0
  os.makedirs(model_dir, exist_ok=True)
  if is_chief:
    with open(os.path.join(model_dir, "config.json"), "w") as f:
      f.write(config.to_json())

  manager = _checkpoint_manager(model_dir, loop.keep_checkpoints)
  if manager.latest_step() is not None:
    state, step = _restore(manager, trainer, run)
    print(f"resumed from {manager.directory}/{step}", flush=True)
  else:
    state, step = _initial_state(trainer, config, init, seed), 0

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
  try:
    while step < train_steps:
      local = next(batches)
      state, metrics = trainer.step_fn(state, partitioning.global_batch(mesh, local, batch_size))
      step += 1
      pending.append((metrics, batch_counts(local)))
      logging_now = step % loop.log_every == 0 or step == train_steps
      evaluating = bool(loop.eval_fn is not None and loop.eval_every
                        and (step % loop.eval_every == 0 or step == train_steps))
      saving = step % loop.checkpoint_every == 0 or step == train_steps
      if not (logging_now or evaluating or saving or step == first_step):
        continue  # the host dispatches ahead; the device's metrics stay there until a sync step
      _sync(pending, progress, step, manager)
      pending = []
      if logging_now:
        scalars, line = progress.report(step)
        writer.write_scalars(step, scalars)
        if is_chief:
          print(line, flush=True)
      if evaluating:
        results = {f"eval/{k}": v for k, v in loop.eval_fn(state["params"], config).items()}
        writer.write_scalars(step, results)
        if is_chief:
          print(f"step {step} eval " + "  ".join(f"{k} {v:.4f}" for k, v in results.items()),
                flush=True)
        scalars = {**scalars, **results}  # the async writer may still be reading `scalars`
      if saving:
        _save(manager, state, dict(run, step=step))
  finally:
    manager.wait_until_finished()
    manager.close()
    writer.flush()
  extra = {} if targets is None else {"target_words": targets}  # `t5rank score` uses the same words
  if bm25_in_input:
    extra["bm25_in_input"] = True  # ... and writes the candidates' BM25 scores into the inputs
  _export_final(os.path.join(model_dir, "final"), state["params"], config,
                dict(run, step=step, **extra), vocab)
  return scalars


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


def check_vocabulary(vocab: Vocabulary, config: T5Config, task_name: str) -> None:
  """Raises ValueError when the task's vocabulary has more ids than the model has embedding rows."""
  if vocab.vocab_size > config.vocab_size:
    raise ValueError(
        f"task {task_name} tokenizes with {vocab.path}: {vocab.base_vocab_size} pieces + "
        f"{vocab.extra_ids} extra ids = {vocab.vocab_size} ids, more than the model's vocab_size "
        f"{config.vocab_size}; set it to at least {vocab.vocab_size} (gin: "
        f"config.get_config.vocab_size = {vocab.vocab_size})")


def _export_final(directory: str, params, config: T5Config, metadata: dict,
                  vocab: Optional[Vocabulary] = None) -> None:
  """The trained parameters as a t5rank checkpoint (`load_checkpoint`, `t5rank score`), once per
  step: an existing export of the same step is kept; one of an earlier step (a run resumed with more
  TRAIN_STEPS) is moved to `final.step{N}` and the new one written. With `vocab`, its SentencePiece
  file is copied in before config.json marks the checkpoint complete, and metadata.json names it
  (`vocabulary`, relative to the checkpoint, and `vocabulary_extra_ids`), so that `t5rank score`
  tokenizes as the training did."""
  from jax.experimental import multihost_utils

  from t5rank.checkpoints import native, save_checkpoint
  if os.path.exists(os.path.join(directory, "config.json")):
    old_step = native.read_metadata(directory).get("step")
    if old_step == metadata.get("step"):
      return
    if jax.process_index() == 0:
      aside = f"{directory.rstrip(os.sep)}.step{old_step}"
      shutil.rmtree(aside, ignore_errors=True)
      os.rename(directory, aside)
      print(f"{directory} held step {old_step}; moved to {aside}", flush=True)
    multihost_utils.sync_global_devices("t5rank train: old final moved")
  if vocab is not None:
    name = os.path.basename(vocab.path)
    metadata = dict(metadata, vocabulary=name, vocabulary_extra_ids=vocab.extra_ids)
    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      shutil.copyfile(vocab.path, os.path.join(directory, name + ".tmp"))
      os.replace(os.path.join(directory, name + ".tmp"), os.path.join(directory, name))
  save_checkpoint(directory, multihost_utils.process_allgather(params, tiled=True), config, metadata)
  if jax.process_index() == 0:
    print(f"final model: {directory}", flush=True)


def _initial_state(trainer: Trainer, config: T5Config, init: Init, seed: int) -> State:
  """Fresh state from random weights (`seed`) or from the parameters of `init.checkpoint`."""
  if init.checkpoint is None:
    def fresh(rng):
      params = init_params(config, rng)
      if init.term_matching_heads:
        params = term_matching_init(params, config, jax.random.fold_in(rng, 1),
                                    num_heads=init.term_matching_heads,
                                    scale=init.term_matching_scale)
      return params

    params = jax.jit(fresh,
                     out_shardings=partitioning.param_shardings(config, trainer.mesh))(
                         jax.random.PRNGKey(seed))
  else:
    from t5rank.checkpoints import load_checkpoint
    _, params = load_checkpoint(init.checkpoint, config=config)
  return trainer.init_fn(params)
