"""Training a translator with `model.fit`, into a resumable run folder.

The run folder is the contract between `train` and the later steps (evaluate,
export):

    config.json           {"preset", "model": TransformerConfig fields, "data": corpus,
                           split and tokenizer settings, "training": fit settings}
    source.model          SentencePiece models (keras_transformer.data.tokenizer)
    target.model
    splits/{train,validation,test}.tsv    source<TAB>target, the split used
    backup/ checkpoints/ history.json history.csv logs/   (see callbacks.py)
    model.keras           the whole model at the end of training
    final.weights.h5      its weights (with the optimizer state)

The first call prepares the folder (split, tokenizers, config); any later call on
the same folder reads it back and resumes from the backup: same weights, same
optimizer state and step counter, same epoch.

Shape notation: B batch, S source length, T target length.
"""

import dataclasses
import json
import math
import os
import sys
import warnings

from keras_transformer.runs import CONFIG_NAME
from keras_transformer.runs import FINAL_WEIGHTS_NAME
from keras_transformer.runs import SPLIT_DIR
from keras_transformer.training.schedule import DEFAULT_SCALE
from keras_transformer.training.schedule import DEFAULT_WARMUP_STEPS
from keras_transformer.training.strategy import is_chief
from keras_transformer.training.strategy import make_strategy
from keras_transformer.training.strategy import worker_name

MODEL_NAME = "model.keras"
FORMAT_VERSION = 1

MIXED_PRECISION_POLICIES = ("none", "mixed_bfloat16", "mixed_float16")

# Defaults by device, chosen by measurement. On the 2-core CPU (small preset, the
# bundled corpus, 4,096-token batches; the machine shared with other jobs, so
# absolute numbers are low):
#   150 steps after 20 warm-up steps, bucketed batches:
#     no XLA  1,228 target tokens/s (median step 2.30 s; warm-up 76 s)
#     XLA       670 target tokens/s (median step 3.22 s; warm-up 172 s), the batches
#               padded to fixed shapes (`_static_shapes`), each shape compiled once
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

# Training settings: defaults, used when neither the call nor the run folder sets one.
TRAINING_DEFAULTS = {
    "epochs": 1000,  # a time budget or early stopping usually ends the run first
    "token_budget": 4096,
    "warmup_steps": DEFAULT_WARMUP_STEPS,
    "lr_scale": DEFAULT_SCALE,
    "label_smoothing": 0.1,
    "clipnorm": None,
    "jit_compile": None,  # None: by device, see CPU_DEFAULTS / GPU_DEFAULTS
    "mixed_precision": None,
    "save_freq": 200,  # steps between checkpoints/backups (and at each epoch end)
    "keep_checkpoints": 3,
    "patience": 5,
    "validation_batch_size": 128,
    "seed": 0,
}


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


def read_run_config(run_dir):
    """The parsed `config.json` of a run folder."""
    path = os.path.join(run_dir, CONFIG_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist; is {run_dir} a run folder?")
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def write_run_config(run_dir, config):
    """Writes `config.json` atomically."""
    path = os.path.join(run_dir, CONFIG_NAME)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(config, file, indent=2, sort_keys=True)
        file.write("\n")
    os.replace(temporary, path)


def _write_pairs(path, pairs):
    with open(path, "w", encoding="utf-8") as file:
        for pair in pairs:
            file.write(f"{pair.source}\t{pair.target}\n")


def read_split(run_dir, part):
    """The (sources, targets) of one split part ("train", "validation", "test")."""
    from keras_transformer.data.corpus import read_tsv
    from keras_transformer.data.corpus import sources_and_targets

    path = os.path.join(run_dir, SPLIT_DIR, f"{part}.tsv")
    if os.path.getsize(path) == 0:
        return [], []
    return sources_and_targets(read_tsv(path, 0, 1))


def prepare_run(
    run_dir,
    data_path,
    src="zh",
    tgt="en",
    preset="small",
    source_column=None,
    target_column=None,
    max_pairs=None,
    split_seed=0,
    validation_fraction=0.05,
    test_fraction=0.05,
    source_vocab_size=None,
    target_vocab_size=None,
    joint_vocabulary=False,
    model_overrides=None,
):
    """Splits the corpus, trains the tokenizers and writes `config.json`.

    Args:
        run_dir: the run folder (created).
        data_path: tab-separated corpus.
        src: source language code.
        tgt: target language code.
        preset: model preset name ("tiny", "small", "base", "big").
        source_column: 0-based column of the source; None for the cmn.txt layout
            of `src`.
        target_column: likewise for the target.
        max_pairs: use only the first this many pairs (None: all).
        split_seed: seed of the train/validation/test split.
        validation_fraction: share of pairs for validation.
        test_fraction: share of pairs for test.
        source_vocab_size: None for the tokenizer's measured default.
        target_vocab_size: None for the default.
        joint_vocabulary: one SentencePiece model for both languages.
        model_overrides: TransformerConfig fields to change from the preset.

    Returns:
        The run config (the dict written to `config.json`, without "training").
    """
    from keras_transformer.data.corpus import columns_for
    from keras_transformer.data.corpus import read_tsv
    from keras_transformer.data.corpus import sources_and_targets
    from keras_transformer.data.corpus import split_pairs
    from keras_transformer.data.pipeline import DEFAULT_MAX_SOURCE_LENGTH
    from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.data.tokenizer import train_tokenizers
    from keras_transformer.models.config import preset as make_preset

    if data_path is None:
        raise ValueError(f"{run_dir} is not a run folder yet: pass the corpus (--data).")
    if (source_column is None) != (target_column is None):
        raise ValueError("Give both the source and the target column, or neither.")
    if source_column is None:
        source_column, target_column = columns_for(src, tgt)
    pairs = read_tsv(data_path, source_column, target_column)
    if max_pairs is not None:
        pairs = pairs[:max_pairs]
    split = split_pairs(pairs, validation_fraction, test_fraction, seed=split_seed)
    if not split.train or not split.validation:
        raise ValueError(
            f"The split of {len(pairs)} pairs leaves {len(split.train)} for training and "
            f"{len(split.validation)} for validation; use a larger corpus."
        )

    os.makedirs(os.path.join(run_dir, SPLIT_DIR), exist_ok=True)
    for part in ("train", "validation", "test"):
        _write_pairs(os.path.join(run_dir, SPLIT_DIR, f"{part}.tsv"), getattr(split, part))
    train_sources, train_targets = sources_and_targets(split.train)
    try:
        source_path, target_path = train_tokenizers(
            train_sources,
            train_targets,
            run_dir,
            source_language=src,
            target_language=tgt,
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
            joint=joint_vocabulary,
        )
    except RuntimeError as error:  # SentencePiece reports bad sizes this way.
        raise ValueError(f"Training the tokenizers failed: {error}") from None
    source_vocab = SubwordTokenizer.from_file(source_path).vocab_size
    target_vocab = SubwordTokenizer.from_file(target_path).vocab_size
    model_config = make_preset(
        preset,
        **{
            "source_vocab_size": source_vocab,
            "target_vocab_size": target_vocab,
            "share_vocabulary": bool(joint_vocabulary),
            **(model_overrides or {}),
        },
    )
    config = {
        "format_version": FORMAT_VERSION,
        "preset": preset,
        "model": model_config.to_dict(),
        "data": {
            "path": os.path.abspath(data_path),
            "source_language": src,
            "target_language": tgt,
            "source_column": source_column,
            "target_column": target_column,
            "max_pairs": max_pairs,
            "split_seed": split_seed,
            "validation_fraction": validation_fraction,
            "test_fraction": test_fraction,
            "split_sizes": {
                "train": len(split.train),
                "validation": len(split.validation),
                "test": len(split.test),
            },
            "splits": {part: f"{SPLIT_DIR}/{part}.tsv" for part in ("train", "validation", "test")},
            "source_tokenizer": os.path.basename(source_path),
            "target_tokenizer": os.path.basename(target_path),
            "joint_vocabulary": bool(joint_vocabulary),
            "max_source_length": min(DEFAULT_MAX_SOURCE_LENGTH, model_config.max_length),
            "max_target_length": min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length),
        },
    }
    write_run_config(run_dir, config)
    return config


def make_optimizer(d_model, warmup_steps, lr_scale, clipnorm=None, mixed_precision="none"):
    """Adam(0.9, 0.98, 1e-9) on the warmup-then-rsqrt schedule.

    Args:
        d_model: model width (the schedule's scale).
        warmup_steps: schedule warmup.
        lr_scale: schedule scale factor.
        clipnorm: optional global gradient-norm clip.
        mixed_precision: "mixed_float16" wraps the optimizer in Keras'
            `LossScaleOptimizer` (dynamic loss scaling).

    Returns:
        A `keras.optimizers.Optimizer`.
    """
    import keras

    from keras_transformer.training.schedule import TransformerSchedule

    optimizer = keras.optimizers.Adam(
        learning_rate=TransformerSchedule(d_model, warmup_steps=warmup_steps, scale=lr_scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        global_clipnorm=clipnorm,
    )
    if mixed_precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def compile_model(
    model,
    warmup_steps=TRAINING_DEFAULTS["warmup_steps"],
    lr_scale=TRAINING_DEFAULTS["lr_scale"],
    clipnorm=None,
    label_smoothing=TRAINING_DEFAULTS["label_smoothing"],
    jit_compile=False,
    mixed_precision="none",
):
    """Compiles a `Seq2SeqTransformer` for training (call it under the strategy scope).

    Loss: masked label-smoothed cross-entropy; metric: masked token accuracy;
    optimizer: see `make_optimizer`.

    Example:
        >>> with strategy.scope():  # doctest: +SKIP
        ...     model = build_transformer(config)
        ...     compile_model(model, jit_compile=False)
    """
    from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
    from keras_transformer.training.losses import MaskedTokenAccuracy

    model.compile(
        optimizer=make_optimizer(
            model.config.d_model, warmup_steps, lr_scale, clipnorm, mixed_precision
        ),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=label_smoothing),
        metrics=[MaskedTokenAccuracy()],
        jit_compile=bool(jit_compile),
    )
    return model


def build_for_fit(model, dataset, strategy):
    """Works around two failures of Keras 3's `fit` under a multi-worker strategy.

    Keras' TensorFlow trainer (3.15) (1) builds the compiled loss and metrics from
    one batch reduced over replicas with `strategy.reduce`, which fails for a nested
    batch, and (2) reduces each step's logs with `strategy.reduce("MEAN", v,
    axis=0)`, which fails for scalars. Here the build is done from the dataset's
    `element_spec` (and Keras' own skipped), and the steps return their logs with
    shape (1,), which that reduction averages over replicas back into scalars (the
    metric values are already synchronised, so the mean is the value). Nothing is
    changed for other strategies.

    Args:
        model: a compiled model, created under `strategy.scope()`.
        dataset: the training `tf.data.Dataset`.
        strategy: the model's `tf.distribute.Strategy`.
    """
    import keras
    import tensorflow as tf

    if getattr(strategy, "cluster_resolver", None) is None:
        return
    batch = tf.nest.map_structure(
        lambda spec: keras.KerasTensor(spec.shape, spec.dtype.name), dataset.element_spec
    )
    with strategy.scope():
        model._symbolic_build(data_batch=batch)
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None

    def with_vector_logs(step):
        def wrapped(data):
            return {name: tf.reshape(value, [1]) for name, value in step(data).items()}

        return wrapped

    model.train_step = with_vector_logs(model.train_step)
    model.test_step = with_vector_logs(model.test_step)


def _static_shapes(dataset, max_length, token_budget=None, rows=None, step=8):
    """Pads batches to a few fixed shapes, so XLA compiles only those.

    A batch whose longest example has length L (max over S and T) becomes
    (R, L', L') with L' = L rounded up to a multiple of `step` (at most
    `max_length`) and R = `rows`, or `token_budget // L'` (the size of a full batch
    of its bucket in the token-budgeted pipeline). Extra rows and columns are
    padding, which the loss and the metric ignore.
    """
    import tensorflow as tf

    from keras_transformer.constants import PAD_ID

    @tf.autograph.experimental.do_not_convert  # plain tensor ops, nothing to convert
    def pad(features, labels):
        encoder, decoder = features["encoder_tokens"], features["decoder_tokens"]
        count = tf.shape(encoder)[0]
        longest = tf.maximum(tf.shape(encoder)[1], tf.shape(decoder)[1])
        length = tf.minimum((longest + step - 1) // step * step, max_length)
        batch = tf.maximum(token_budget // length if rows is None else rows, count)

        def to_shape(tensor):
            return tf.pad(
                tensor,
                [[0, batch - count], [0, length - tf.shape(tensor)[1]]],
                constant_values=PAD_ID,
            )

        return (
            {"encoder_tokens": to_shape(encoder), "decoder_tokens": to_shape(decoder)},
            to_shape(labels),
        )

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)


def make_datasets(run_dir, run_config, settings, static_shapes=False):
    """The training and validation `tf.data` pipelines of a run folder."""
    import tensorflow as tf

    from keras_transformer.data.pipeline import make_eval_dataset
    from keras_transformer.data.pipeline import make_training_dataset
    from keras_transformer.data.tokenizer import SubwordTokenizer

    data = run_config["data"]
    source_tokenizer = SubwordTokenizer.from_file(os.path.join(run_dir, data["source_tokenizer"]))
    target_tokenizer = SubwordTokenizer.from_file(os.path.join(run_dir, data["target_tokenizer"]))
    lengths = dict(
        max_source_length=data["max_source_length"], max_target_length=data["max_target_length"]
    )
    train_sources, train_targets = read_split(run_dir, "train")
    validation_sources, validation_targets = read_split(run_dir, "validation")
    train = make_training_dataset(
        train_sources,
        train_targets,
        source_tokenizer,
        target_tokenizer,
        token_budget=settings["token_budget"],
        seed=settings["seed"],
        **lengths,
    )
    validation = make_eval_dataset(
        validation_sources,
        validation_targets,
        source_tokenizer,
        target_tokenizer,
        batch_size=settings["validation_batch_size"],
        **lengths,
    )
    if static_shapes:
        max_length = max(lengths.values())
        train = _static_shapes(train, max_length, token_budget=settings["token_budget"])
        validation = _static_shapes(
            validation, max_length, rows=settings["validation_batch_size"]
        )
    options = tf.data.Options()
    # Every worker builds the same pipeline; each takes its share of every batch.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return train.with_options(options), validation.with_options(options)


@dataclasses.dataclass
class TrainResult:
    """What a `train` call did.

    Attributes:
        run_dir: the run folder.
        resumed: whether it continued an earlier run (from its backup).
        initial_step: the optimizer step it started from.
        step: the optimizer step it ended at.
        epochs: epochs completed in the run as a whole.
        stopped_by: "time", "early_stopping", "nan" or "epochs".
        history: this call's `keras.callbacks.History.history`.
    """

    run_dir: str
    resumed: bool
    initial_step: int
    step: int
    epochs: int
    stopped_by: str
    history: dict


def _backup_epoch(state_dir):
    """The epoch a backup in `state_dir` resumes at (0 when there is none)."""
    from keras_transformer.training.callbacks import BACKUP_DIR

    path = os.path.join(state_dir, BACKUP_DIR, "training_metadata.json")
    try:
        with open(path, encoding="utf-8") as file:
            return int(json.load(file).get("epoch", 0))
    except (OSError, ValueError):
        return 0


def _resolve_settings(stored, given):
    settings = dict(TRAINING_DEFAULTS)
    settings.update({key: value for key, value in stored.items() if key in settings})
    settings.update({key: value for key, value in given.items() if value is not None})
    return settings


def train(
    run_dir,
    data_path=None,
    src="zh",
    tgt="en",
    preset=None,
    minutes=None,
    epochs=None,
    token_budget=None,
    jit_compile=None,
    mixed_precision=None,
    strategy="default",
    devices=None,
    seed=None,
    warmup_steps=None,
    lr_scale=None,
    clipnorm=None,
    label_smoothing=None,
    save_freq=None,
    keep_checkpoints=None,
    patience=None,
    validation_batch_size=None,
    prepare_options=None,
    callbacks=(),
    verbose=None,
):
    """Trains (or resumes training) a translator in a run folder.

    Settings left as None take the run folder's stored value, else the default
    (`TRAINING_DEFAULTS`; `jit_compile`/`mixed_precision` by device); the values
    used are written back to `config.json`. The model's config is fixed when the
    folder is prepared.

    Args:
        run_dir: the run folder; prepared on the first call, resumed afterwards.
        data_path: the tab-separated corpus (needed on the first call only).
        src: source language code.
        tgt: target language code.
        preset: model preset for a new run (None: "small"); when resuming, None
            or the folder's preset.
        minutes: wall-time budget of this call (None: no budget).
        epochs: total epochs of the run.
        token_budget: most (padded) tokens per global batch.
        jit_compile: XLA on/off; None for the device default.
        mixed_precision: "none", "mixed_bfloat16" or "mixed_float16"; None for
            the device default.
        strategy: "default", "mirrored" or "multi-worker" (`strategy.py`), or a
            `tf.distribute.Strategy`.
        devices: devices of the mirrored strategy (None: all local GPUs).
        seed: seed of weights, dropout and data order.
        warmup_steps: learning-rate warmup steps.
        lr_scale: learning-rate schedule scale factor.
        clipnorm: global gradient-norm clip (None: no clipping).
        label_smoothing: ε of the loss.
        save_freq: steps between checkpoints and backups (also at epoch ends), or
            "epoch".
        keep_checkpoints: step checkpoints kept.
        patience: early-stopping patience in epochs (0 disables it).
        validation_batch_size: sentences per validation batch.
        prepare_options: extra `prepare_run` arguments for a new run (columns,
            max_pairs, vocabulary sizes, split fractions, model_overrides).
        callbacks: extra Keras callbacks, run after the run folder's own.
        verbose: `fit` verbosity; None for a progress bar on a terminal, one line
            per epoch otherwise.

    Returns:
        A `TrainResult`.

    Example:
        >>> train("runs/zh-en", "data/cmn-eng/cmn.txt", "zh", "en", "small", minutes=25)
        ... # doctest: +SKIP
    """
    if mixed_precision is not None and mixed_precision not in MIXED_PRECISION_POLICIES:
        raise ValueError(
            f"Unknown mixed precision {mixed_precision!r}; accepted: {list(MIXED_PRECISION_POLICIES)}."
        )
    if minutes is not None and minutes <= 0:
        raise ValueError(f"`minutes` must be positive; received {minutes}.")
    # The strategy comes first: a multi-worker one must set up the runtime.
    if isinstance(strategy, str):
        strategy = make_strategy(strategy, devices=devices)
    import keras

    chief = is_chief(strategy)
    private_dir = None if chief else os.path.join(run_dir, "workers", worker_name(strategy))
    # Non-chief workers prepare their own (identical, deterministic) copy of the run.
    config_dir = run_dir if chief else private_dir
    os.makedirs(config_dir, exist_ok=True)
    config_path = os.path.join(config_dir, CONFIG_NAME)
    resumed_folder = os.path.exists(config_path)
    if resumed_folder:
        run_config = read_run_config(config_dir)
        if preset is not None and preset != run_config["preset"]:
            raise ValueError(
                f"{run_dir} holds a run of preset {run_config['preset']!r}; received "
                f"preset={preset!r}. Use another folder for another model."
            )
    else:
        run_config = prepare_run(
            config_dir, data_path, src, tgt, preset or "small", **(prepare_options or {})
        )

    given = dict(
        epochs=epochs, token_budget=token_budget, jit_compile=jit_compile,
        mixed_precision=mixed_precision, seed=seed, warmup_steps=warmup_steps,
        lr_scale=lr_scale, clipnorm=clipnorm, label_smoothing=label_smoothing,
        save_freq=save_freq, keep_checkpoints=keep_checkpoints, patience=patience,
        validation_batch_size=validation_batch_size,
    )
    stored = run_config.get("training", {})
    settings = _resolve_settings(stored, given)
    # Stored as given (None = "by device"), so a run resumed on another device gets
    # that device's defaults; the values in effect are recorded under "device".
    run_config["training"] = dict(settings)
    defaults = device_defaults()
    if settings["jit_compile"] is None:
        # Keras does not support XLA with several replicas; keep it for one.
        settings["jit_compile"] = defaults["jit_compile"] and strategy.num_replicas_in_sync == 1
    if settings["mixed_precision"] is None:
        settings["mixed_precision"] = defaults["mixed_precision"]
    run_config["device"] = {
        "kind": defaults["kind"],
        "replicas": strategy.num_replicas_in_sync,
        "jit_compile": settings["jit_compile"],
        "mixed_precision": settings["mixed_precision"],
    }
    write_run_config(config_dir, run_config)

    from keras_transformer.models.config import TransformerConfig
    from keras_transformer.models.transformer import Seq2SeqTransformer
    from keras_transformer.training.callbacks import RunProgress
    from keras_transformer.training.callbacks import make_callbacks
    from keras_transformer.training.callbacks import optimizer_step

    keras.utils.set_random_seed(settings["seed"])
    # A resumed run must not replay the first epochs' data order: offset the seed
    # by the epoch it resumes at.
    data_settings = {**settings, "seed": settings["seed"] + _backup_epoch(private_dir or run_dir)}
    train_data, validation_data = make_datasets(
        config_dir, run_config, data_settings, static_shapes=settings["jit_compile"]
    )
    previous_policy = keras.config.dtype_policy()
    policy = settings["mixed_precision"]
    keras.config.set_dtype_policy("float32" if policy == "none" else policy)
    try:
        with strategy.scope():
            model = Seq2SeqTransformer(TransformerConfig.from_dict(run_config["model"]))
            compile_model(
                model,
                warmup_steps=settings["warmup_steps"],
                lr_scale=settings["lr_scale"],
                clipnorm=settings["clipnorm"],
                label_smoothing=settings["label_smoothing"],
                jit_compile=settings["jit_compile"],
                mixed_precision=policy,
            )
            model.optimizer.build(model.trainable_variables)
        build_for_fit(model, train_data, strategy)
        fit_callbacks, time_budget = make_callbacks(
            run_dir,
            save_freq=settings["save_freq"],
            keep_checkpoints=settings["keep_checkpoints"],
            minutes=minutes,
            patience=settings["patience"] or None,
            strategy=strategy,
            private_dir=private_dir,
        )
        probe = RunProgress()
        if verbose is None:
            verbose = 1 if sys.stdout.isatty() else 2
        with warnings.catch_warnings():
            # The pipeline has no fixed length: Keras learns the epoch's end from it.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            history = model.fit(
                train_data,
                validation_data=validation_data,
                epochs=settings["epochs"],
                callbacks=[*fit_callbacks, probe, *callbacks],
                verbose=verbose,
                shuffle=False,  # the pipeline shuffles
            )
        step = optimizer_step(model)
        if chief:
            model.save(os.path.join(run_dir, MODEL_NAME))
            model.save_weights(os.path.join(run_dir, FINAL_WEIGHTS_NAME))
    finally:
        keras.config.set_dtype_policy(previous_policy)

    losses = history.history.get("loss", [])
    if losses and not math.isfinite(losses[-1]):
        stopped_by = "nan"
    elif time_budget.stopped:
        stopped_by = "time"
    elif probe.epochs_done < settings["epochs"]:
        stopped_by = "early_stopping"
    else:
        stopped_by = "epochs"
    return TrainResult(
        run_dir=run_dir,
        resumed=probe.initial_step > 0 or probe.initial_epoch > 0,
        initial_step=probe.initial_step,
        step=step,
        epochs=probe.epochs_done,
        stopped_by=stopped_by,
        history=dict(history.history),
    )
