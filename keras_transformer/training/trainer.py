"""Training a model with `model.fit`, into a resumable run folder.

The run folder (its layout: `keras_transformer.runs.folder`) is the contract
between `train` and the later steps (evaluate, export). The first call prepares it
(split, tokenizers, config.json); any later call on the same folder reads it back
and resumes from the backup: same weights, same optimizer state and step counter,
same epoch. The training settings are a `TrainingConfig`, stored in config.json.

One loop for every task ("translate", "lm", "classify"): the task of the run
(`keras_transformer.tasks`) says how to prepare the folder, build the
model and the datasets, and which loss and metrics to compile; the schedule,
optimizer, checkpoints, backup, best and averaged weights and history are shared.
The translation task's `prepare_run` and `make_datasets` live with the translator
(`keras_transformer.tasks.translator`) and are importable from here too.

Shape notation: B batch, S source length, T target length.
"""

import dataclasses
import math
import os
import sys
import warnings

from keras_transformer.constants import DEFAULT_TASK
from keras_transformer.runs.folder import RunFolder
from keras_transformer.runs.folder import task_of
from keras_transformer.runs.weights import average_checkpoints
from keras_transformer.runs.weights import epochs_to_average
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.strategy import is_chief
from keras_transformer.training.strategy import make_strategy
from keras_transformer.training.strategy import worker_name
from keras_transformer.training.strategy import worker_share
from keras_transformer.tasks.loading import task_for
from keras_transformer.tasks.translator import make_datasets  # noqa: F401 (re-exported)
from keras_transformer.tasks.translator import prepare_run  # noqa: F401 (re-exported)
from keras_transformer.training.optimizer import NO_WEIGHT_DECAY  # noqa: F401 (re-exported)
from keras_transformer.training.optimizer import make_optimizer


# Defaults by device, chosen by measurement. On the 2-core CPU (small preset, the
# bundled corpus, 4,096-token batches; the machine shared with other jobs, so
# absolute numbers are low):
#   150 steps after 20 warm-up steps, bucketed batches:
#     no XLA  1,228 target tokens/s (median step 2.30 s; warm-up 76 s)
#     XLA       670 target tokens/s (median step 3.22 s; warm-up 172 s), the batches
#               padded to fixed shapes (`pad_to_static_shapes`), each shape compiled once
#   the same (256, 16) batch, interleaved blocks of 4 steps: 3.12 s vs 3.14 s.
# XLA does not speed a step up here, and costs ~13 s of compilation per batch shape
# (about 16 shapes with validation) plus 2% more padding: off on CPU. (For the tiny
# preset, where per-op overhead dominates, XLA is 2.4x faster: 13.9k vs 33.2k
# tokens/s.)
# Mixed precision, same batch, interleaved, no XLA: float32 2.97 s/step (943
# tokens/s), mixed_bfloat16 2.06 s/step (1,362 tokens/s): 1.44x, as this CPU has
# AVX512_BF16 instructions (oneDNN uses them). Without them (or AMX) bfloat16 is
# emulated and slow, so the CPU default depends on the CPU's flags.
# On a GPU, XLA fuses the many small element-wise ops and bfloat16 uses the tensor
# cores without loss scaling.
CPU_DEFAULTS = {"jit_compile": False, "mixed_precision": "none"}
CPU_BF16_DEFAULTS = {"jit_compile": False, "mixed_precision": "mixed_bfloat16"}
GPU_DEFAULTS = {"jit_compile": True, "mixed_precision": "mixed_bfloat16"}

def device_defaults():
    """`jit_compile` and mixed-precision defaults for the local accelerator."""
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return {**GPU_DEFAULTS, "kind": "GPU"}
    if cpu_has_bfloat16():
        return {**CPU_BF16_DEFAULTS, "kind": "CPU"}
    return {**CPU_DEFAULTS, "kind": "CPU"}


def cpu_has_bfloat16():
    """Whether the CPU has bfloat16 matmul instructions (AVX512_BF16 or AMX), on Linux."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            flags = next((line for line in file if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags




def compile_model(
    model,
    warmup_steps=TrainingConfig.warmup_steps,
    lr_scale=TrainingConfig.lr_scale,
    lr_decay=TrainingConfig.lr_decay,
    total_steps=None,
    clipnorm=None,
    weight_decay=TrainingConfig.weight_decay,
    label_smoothing=TrainingConfig.label_smoothing,
    loss_weighting=TrainingConfig.loss_weighting,
    token_budget=TrainingConfig.token_budget,
    jit_compile=False,
    mixed_precision="none",
    d_model=None,
    loss=None,
    metrics=None,
):
    """Compiles a model for training (call it under the strategy scope).

    Loss: masked label-smoothed cross-entropy; metric: masked token accuracy (a
    translator's; another task passes its own `loss` and `metrics`, from its
    `Task`); optimizer: see `make_optimizer` (`lr_decay` and `total_steps` are its
    schedule's).

    Args:
        d_model: the schedule's width (None: `model.config.d_model`, a
            `Seq2SeqTransformer`'s).
        loss: the loss (None: the translator's, with `label_smoothing`, and its
            gradient weighted by `loss_weighting` over `token_budget`, as
            `TrainingConfig.gradient_denominator` says).
        metrics: the metrics (None: the translator's).

    Example:
        >>> with strategy.scope():  # doctest: +SKIP
        ...     model = build_transformer(config)
        ...     compile_model(model, jit_compile=False)
    """
    from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
    from keras_transformer.training.losses import MaskedTokenAccuracy

    model.compile(
        optimizer=make_optimizer(
            d_model or model.config.d_model, warmup_steps, lr_scale, clipnorm, mixed_precision,
            lr_decay, total_steps, weight_decay, model.trainable_variables,
        ),
        loss=loss or MaskedSparseCategoricalCrossentropy(
            label_smoothing=label_smoothing,
            gradient_denominator=TrainingConfig(
                loss_weighting=loss_weighting, token_budget=token_budget
            ).gradient_denominator,
        ),
        metrics=[MaskedTokenAccuracy()] if metrics is None else metrics,
        jit_compile=bool(jit_compile),
    )
    return model


def prepare_for_fit(model, strategy, train, validation=None):
    """The datasets to give `fit`, and the model set up for them, under any strategy.

    Under a multi-worker strategy Keras' TensorFlow trainer (3.15) (1) reduces the
    first batch over the replicas with `strategy.reduce("MEAN", batch)` to learn
    its shapes, which `MultiWorkerMirroredStrategy` refuses for a nested batch (a
    dict of features and the labels), and (2) reduces each step's logs with
    `strategy.reduce("MEAN", value, axis=0)`, which fails for scalars. With public
    APIs only, this function then (1) builds the compiled loss and metrics on one
    batch (`compute_loss`, `compute_metrics`, then `reset_metrics`), so Keras has
    nothing left to build, and packs every batch into one (B, 3, L) tensor
    (encoder tokens, decoder tokens, labels, padded to one length L, with all-padding
    rows added so that B divides evenly over the workers: padding is masked, so
    nothing changes); and (2) gives the model a `train_step`/`test_step` that unpack
    the batch and return their logs with shape (1,), which that reduction averages
    back into scalars (the metrics are already synchronised, so the mean is the
    value). Other strategies get their datasets back unchanged.

    Args:
        model: a compiled model with a built optimizer, created under `strategy.scope()`.
        strategy: the model's `tf.distribute.Strategy`.
        train: the training `tf.data.Dataset` of `(features, labels)`.
        validation: the validation dataset, or None.

    Returns:
        `(train, validation)` for `fit`.
    """
    import tensorflow as tf

    from keras_transformer.constants import PAD_ID

    if getattr(strategy, "cluster_resolver", None) is None:
        return train, validation
    features, labels = next(iter(train))
    if not isinstance(features, dict):
        raise ValueError(
            "Multi-worker training supports translation runs only; train a language model or a "
            "classifier with the default or mirrored strategy."
        )
    with strategy.scope():
        predictions = model(features, training=False)
        model.compute_loss(features, labels, predictions, training=False)
        model.compute_metrics(features, labels, predictions, None)
    model.reset_metrics()
    workers = strategy.num_replicas_in_sync

    @tf.autograph.experimental.do_not_convert  # plain tensor ops, nothing to convert
    def pack(features, labels):
        parts = [features["encoder_tokens"], features["decoder_tokens"], labels]
        length = tf.reduce_max([tf.shape(part)[1] for part in parts])
        rows = tf.shape(labels)[0]
        extra_rows = (workers - rows % workers) % workers
        return tf.stack(
            [tf.pad(part, [[0, extra_rows], [0, length - tf.shape(part)[1]]], constant_values=PAD_ID)
             for part in parts],
            axis=1,
        )

    def unpacked(step):
        def wrapped(batch):
            data = ({"encoder_tokens": batch[:, 0], "decoder_tokens": batch[:, 1]}, batch[:, 2])
            return {name: tf.reshape(value, [1]) for name, value in step(data).items()}

        return wrapped

    model.train_step = unpacked(model.train_step)
    model.test_step = unpacked(model.test_step)
    options = train.options()
    own = train.map(pack).with_options(options)
    # The worker's own share of the corpus, whole: not split again among the workers.
    train = strategy.distribute_datasets_from_function(lambda context: own)
    if validation is not None:
        validation = validation.map(pack).with_options(options)
    return train, validation


@dataclasses.dataclass
class TrainResult:
    """What a `train` call did.

    Attributes:
        run_dir: the run folder.
        config: the `TrainingConfig` used.
        resumed: whether it continued an earlier run (from its backup).
        initial_step: the optimizer step it started from.
        step: the optimizer step it ended at.
        epochs: epochs completed in the run as a whole.
        stopped_by: "time", "steps", "early_stopping", "nan" or "epochs".
        changed: the settings that differ from the stored run's, one line each.
        history: this call's `keras.callbacks.History.history`.
    """

    run_dir: str
    config: TrainingConfig
    resumed: bool
    initial_step: int
    step: int
    epochs: int
    stopped_by: str
    changed: list
    history: dict


def train(
    run_dir,
    config=None,
    *,
    data=None,
    preset=None,
    task=None,
    prepare_options=None,
    init_from=None,
    minutes=None,
    strategy="default",
    devices=None,
    callbacks=(),
    verbose=None,
):
    """Trains (or resumes training) a model of a task in a run folder.

    The settings are a `TrainingConfig`, stored in the run's config.json. A new run
    uses `config` (None: its task's defaults, `TrainingConfig.for_task`). A resumed run uses `config` when given and
    its stored one otherwise; the settings that differ from the stored ones are
    printed, one line each, and the config used is stored. (The `train` command
    builds `config` from the stored one and the flags given: a flag given
    overrides, a flag not given keeps the stored value.) `jit_compile` and
    `mixed_precision` left as None are chosen by device each time; the values in
    effect are recorded under "device". The model's config is fixed when the
    folder is prepared.

    Args:
        run_dir: the run folder; prepared on the first call, resumed afterwards.
        config: a `TrainingConfig`, or None (see above).
        data: the data of a new run. "translate": a
            `keras_transformer.data.corpus.PairFiles`, or the path of a TSV in the
            Tatoeba layout of `src`/`tgt`; "lm": a `TextFile` (or the path of a
            file of one text a line); "classify": a `LabelledFile` (or the path of
            a label<TAB>text file).
        preset: model preset of a new run (None: "small"); when resuming, None
            or the folder's preset.
        task: "translate", "lm" or "classify": the task of a new run (None:
            "translate"); when resuming, None or the folder's task.
        prepare_options: extra arguments of the task's `prepare` for a new run
            (translate: `prepare_run`'s src, tgt (default zh, en), max_pairs,
            vocabulary sizes, split seed and fractions, model_overrides; lm/classify: `TextTask.prepare`'s
            max_examples, vocab_size, split seed and fractions, model_overrides).
        init_from: a trained model to fine-tune (a run folder, a preset folder or
            an export, of the same task): a new run takes its tokenizers and model
            shape and starts from its weights, with a new optimizer; its path and
            weights file are recorded as "init_from" in config.json.
        minutes: wall-time budget of this call (None: no budget).
        strategy: "default", "mirrored" or "multi-worker" (`strategy.py`), or a
            `tf.distribute.Strategy`.
        devices: devices of the mirrored strategy (None: all local GPUs).
        callbacks: extra Keras callbacks, run after the run folder's own.
        verbose: `fit` verbosity; None for a progress bar on a terminal, one line
            per epoch otherwise.

    Returns:
        A `TrainResult`.

    Example:
        >>> train("runs/zh-en", TrainingConfig(epochs=30), data="data/cmn-eng/cmn.txt",
        ...       minutes=25)  # doctest: +SKIP
    """
    if config is not None and not isinstance(config, TrainingConfig):
        raise TypeError(f"`config` must be a TrainingConfig or None; received {type(config).__name__}.")
    if minutes is not None and minutes <= 0:
        raise ValueError(f"`minutes` must be positive; received {minutes}.")
    # The strategy comes first: a multi-worker one must set up the runtime.
    if isinstance(strategy, str):
        strategy = make_strategy(strategy, devices=devices)
    import keras

    run = RunFolder(run_dir)
    chief = is_chief(strategy)
    # Non-chief workers prepare their own (identical, deterministic) copy of the run
    # and keep their state in it.
    state = run if chief else run.worker(worker_name(strategy))
    os.makedirs(state.path, exist_ok=True)
    changed = []
    if state.exists():
        run_config = state.config
        stored_task = task_of(run_config)
        if task is not None and task != stored_task:
            raise ValueError(
                f"{run_dir} holds a run of task {stored_task!r}; received task={task!r}. Use "
                "another folder for another task."
            )
        task = stored_task
        if init_from is not None and run_config.get("init_from", {}).get("path") != os.path.abspath(init_from):
            raise ValueError(
                f"{run_dir} is an existing run; --init-from starts a new one: train into another "
                "folder (resuming needs no --init-from)."
            )
        if preset is not None and preset != run_config["preset"]:
            raise ValueError(
                f"{run_dir} holds a run of preset {run_config['preset']!r}; received "
                f"preset={preset!r}. Use another folder for another model."
            )
        stored = state.read_training_config()
        config = config or stored or TrainingConfig.for_task(task)
        if stored is not None:
            changed = config.differences(stored)
    else:
        task = task or DEFAULT_TASK
        config = config or TrainingConfig.for_task(task)
        options = dict(prepare_options or {})
        if init_from is not None:
            from keras_transformer.tasks.base import init_source

            init_config, init_folder, init_weights = init_source(init_from, task)
            options["init_from"] = (init_config, init_folder)
        run_config = task_for(task).prepare(state.path, data, preset or "small", **options)
        if init_from is not None:
            run_config["init_from"] = {"path": os.path.abspath(init_from),
                                       "weights": os.path.abspath(init_weights)}
    recipe = task_for(task)
    if chief:
        for line in changed:
            print(f"keras-transformer train: {run_dir}: resuming with {line}", flush=True)
    # Stored as given (None = "by device"), so a run resumed on another device gets
    # that device's defaults; the values in effect are recorded under "device".
    run_config["training"] = config.to_dict()
    defaults = device_defaults()
    jit_compile = config.jit_compile
    if jit_compile is None:
        # Keras does not support XLA with several replicas; keep it for one.
        jit_compile = defaults["jit_compile"] and strategy.num_replicas_in_sync == 1
    policy = config.mixed_precision or defaults["mixed_precision"]
    run_config["device"] = {
        "kind": defaults["kind"],
        "replicas": strategy.num_replicas_in_sync,
        "jit_compile": jit_compile,
        "mixed_precision": policy,
    }
    state.write_config(run_config)

    from keras_transformer.training.callbacks import RunProgress
    from keras_transformer.training.callbacks import make_callbacks
    from keras_transformer.training.callbacks import optimizer_step
    from keras_transformer.training.callbacks import restore_backup

    keras.utils.set_random_seed(config.seed)
    backup = state.checkpoints.read_backup()
    initial_epoch = int(backup["epoch"]) if backup else 0
    # The stream starts at the epoch the backup is in: a resumed run reads that epoch
    # again from its start, in the same order (`pipeline.epochs`).
    # Each worker of a cluster reads its own share of the corpus (`streaming.pass_strings`).
    shard, num_shards = worker_share(strategy)
    train_data, validation_data, steps_per_epoch = recipe.make_datasets(
        state, run_config, config, seed=config.seed, static_shapes=jit_compile,
        first_epoch=initial_epoch, shard=shard, num_shards=num_shards,
    )
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32" if policy == "none" else policy)
    try:
        with strategy.scope():
            model = recipe.build_model(run_config)
            if "init_from" in run_config and backup is None:
                # Before compiling: the weights only, never a source run's optimizer state.
                model.load_weights(run_config["init_from"]["weights"])
            compile_model(
                model,
                warmup_steps=config.warmup_steps,
                lr_scale=config.lr_scale,
                lr_decay=config.lr_decay,
                total_steps=config.max_steps,
                clipnorm=config.clipnorm,
                weight_decay=config.weight_decay,
                label_smoothing=config.label_smoothing,
                jit_compile=jit_compile,
                mixed_precision=policy,
                d_model=run_config["model"]["d_model"],
                loss=recipe.training_loss(run_config, config),
                metrics=recipe.training_metrics(run_config),
            )
            model.optimizer.build(model.trainable_variables)
            initial_epoch = restore_backup(model, state)
        train_data, validation_data = prepare_for_fit(model, strategy, train_data, validation_data)
        fit_callbacks, budget = make_callbacks(
            run,
            save_freq=config.save_freq,
            keep_checkpoints=config.keep_checkpoints,
            keep_epoch_checkpoints=config.keep_epoch_checkpoints,
            minutes=minutes,
            max_steps=config.max_steps,
            patience=config.patience or None,
            strategy=strategy,
            state_dir=None if chief else state,
        )
        probe = RunProgress(initial_epoch)
        if verbose is None:
            verbose = 1 if sys.stdout.isatty() else 2
        with warnings.catch_warnings():
            # The validation pipeline has no fixed length: Keras learns its end from it.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            history = model.fit(
                train_data,
                validation_data=validation_data,
                epochs=config.epochs,
                initial_epoch=initial_epoch,
                steps_per_epoch=steps_per_epoch,
                callbacks=[*fit_callbacks, probe, *callbacks],
                verbose=verbose,
                shuffle=False,  # the pipeline shuffles
            )
        step = optimizer_step(model)
        if chief:
            run.checkpoints.save_final(model)
            # Averaging the newest epoch checkpoints beat both the final and the
            # best-validation-loss weights on the bundled corpus (docs/experiments.md);
            # commands use this average by default.
            kept = run.checkpoints.kept("epoch")
            count = epochs_to_average(kept[-1].number + 1 if kept else 0, len(kept))
            if count >= 2:
                average_checkpoints(run, recipe.build_model(run_config), last=count)
    finally:
        keras.config.set_dtype_policy(previous_policy)

    losses = history.history.get("loss", [])
    if losses and not math.isfinite(losses[-1]):
        stopped_by = "nan"
    elif budget.stopped:
        stopped_by = budget.stopped_by
    elif probe.epochs_done < config.epochs:
        stopped_by = "early_stopping"
    else:
        stopped_by = "epochs"
    return TrainResult(
        run_dir=run.path,
        config=config,
        resumed=probe.initial_step > 0 or initial_epoch > 0,
        initial_step=probe.initial_step,
        step=step,
        epochs=probe.epochs_done,
        stopped_by=stopped_by,
        changed=changed,
        history=dict(history.history),
    )
