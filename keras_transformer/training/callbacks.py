"""Callbacks that make a training run resumable, bounded and observable.

The run folder (see `keras_transformer.training.trainer`) holds what they write:

    backup/        BackupAndRestore's state: latest weights + optimizer, epoch, step
    checkpoints/   step-00001200.weights.h5 ... (the last `keep` ones)
    history.json   one record per epoch, kept across resumes (history.csv alike)
    logs/          TensorBoard events (train/ and validation/)

Every file is written to a temporary name and then renamed, so a process killed
with SIGKILL leaves either the previous file or the new one, never half of one.
"""

import csv
import importlib.util
import json
import math
import os
import time
import warnings

import keras

from keras_transformer.runs import CHECKPOINT_DIR  # the run folder layout: one definition

BACKUP_DIR = "backup"
HISTORY_JSON = "history.json"
HISTORY_CSV = "history.csv"
LOG_DIR = "logs"


def _atomic_write_text(path, text):
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _atomic_save_weights(model, path):
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".tmp-{os.getpid()}-{name}")
    model.save_weights(temporary, overwrite=True)
    os.replace(temporary, path)


def optimizer_step(model):
    """The optimizer's update count, the run's step counter (survives resume)."""
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def _finite_loss(logs):
    loss = (logs or {}).get("loss")
    return loss is None or math.isfinite(float(loss))


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` with atomic saves, kept after training.

    Differences from the base class: the backup is written atomically; with a
    step frequency, at optimizer steps that are multiples of it (as
    `WeightsCheckpoint`, so both hold the same steps); also at every epoch end and
    at the end of training (so a run stopped by a time budget or early stopping
    resumes from its very last state); never after a non-finite loss (a NaN
    state is not worth resuming); it is not deleted when training ends (running
    again continues the run); the metadata records the optimizer step; and the
    epoch counter is right after a resume (the base class restarts it at 0, so a
    second interruption would rewind the epoch).

    Args:
        backup_dir: folder for the backup, used by nothing else.
        save_freq: "epoch", or save every this many steps.

    Example:
        >>> backup = ResumableBackup("runs/zh-en/backup", save_freq=200)  # doctest: +SKIP
    """

    def __init__(self, backup_dir, save_freq="epoch"):
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=False)
        self._poisoned = False
        self._saved = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._current_epoch = getattr(self.model, "_initial_epoch", 0) or 0
        self._poisoned = False
        self._saved = None

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._last_batch_seen = batch
        if not _finite_loss(logs):
            self._poisoned = True
        if self.save_freq != "epoch" and optimizer_step(self.model) % self.save_freq == 0:
            self._save_model()

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._last_batch_seen = 0
        self._save_model()

    def on_train_end(self, logs=None):
        self._save_model()

    def _save_model(self):
        metadata = {
            "epoch": self._current_epoch,
            "batch": self._last_batch_seen,
            "step": optimizer_step(self.model),
        }
        if self._poisoned or metadata == self._saved:
            return
        os.makedirs(self.backup_dir, exist_ok=True)
        _atomic_save_weights(self.model, self._weights_path)
        _atomic_write_text(self._training_metadata_path, json.dumps(metadata))
        self._saved = metadata


class WeightsCheckpoint(keras.callbacks.Callback):
    """Saves the weights (with the optimizer state) every N steps and each epoch.

    Files are named after the optimizer step, `step-00001200.weights.h5`, so names
    keep increasing across resumes; only the newest `keep` files are kept.

    Args:
        directory: the checkpoints folder.
        save_freq: "epoch", or also save at steps that are multiples of this.
        keep: how many checkpoints to keep (>= 1).

    Example:
        >>> WeightsCheckpoint("runs/zh-en/checkpoints", save_freq=500, keep=3)  # doctest: +SKIP
    """

    def __init__(self, directory, save_freq="epoch", keep=3):
        super().__init__()
        if save_freq != "epoch" and (not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f"`save_freq` must be 'epoch' or a positive int; received {save_freq!r}.")
        if keep < 1:
            raise ValueError(f"`keep` must be at least 1; received {keep}.")
        self.directory = directory
        self.save_freq = save_freq
        self.keep = keep

    def on_train_begin(self, logs=None):
        self._poisoned = False
        self._last_saved_step = None

    def on_train_batch_end(self, batch, logs=None):
        if not _finite_loss(logs):
            self._poisoned = True
        if self.save_freq != "epoch" and not self._poisoned:
            step = optimizer_step(self.model)
            if step % self.save_freq == 0:
                self.save(step)

    def on_epoch_end(self, epoch, logs=None):
        # Also with a step frequency: the backup is written at epoch ends too, and
        # every state the backup holds should have its checkpoint.
        if not self._poisoned:
            self.save(optimizer_step(self.model))

    def save(self, step):
        if step == self._last_saved_step:
            return
        self._last_saved_step = step
        path = checkpoint_path(self.directory, step)
        os.makedirs(self.directory, exist_ok=True)
        _atomic_save_weights(self.model, path)
        for old in list_checkpoints(self.directory)[: -self.keep]:
            os.remove(old)


def checkpoint_path(directory, step):
    """The file name of the checkpoint written at optimizer step `step`."""
    return os.path.join(directory, f"step-{step:08d}.weights.h5")


def list_checkpoints(directory):
    """Checkpoint files in `directory`, oldest first."""
    if not os.path.isdir(directory):
        return []
    names = sorted(
        name
        for name in os.listdir(directory)
        if name.startswith("step-") and name.endswith(".weights.h5")
    )
    return [os.path.join(directory, name) for name in names]


class TimeBudget(keras.callbacks.Callback):
    """Stops training cleanly once `minutes` of wall time have passed.

    Training stops after the current step; Keras then still validates and ends
    the epoch, and the other callbacks save as usual. Under a multi-worker
    strategy every worker must stop at the same step, so the decision is taken at
    epoch ends, on the largest elapsed time of all workers.

    Args:
        minutes: budget for this `fit` call, counted from the start of training.
        strategy: the distribution strategy (only a multi-worker one matters).

    Example:
        >>> model.fit(dataset, epochs=1000, callbacks=[TimeBudget(25)])  # doctest: +SKIP
    """

    def __init__(self, minutes, strategy=None):
        super().__init__()
        if minutes is not None and minutes <= 0:
            raise ValueError(f"`minutes` must be positive; received {minutes}.")
        self.minutes = minutes
        self.strategy = strategy
        self.stopped = False
        self._start = None

    @property
    def _multi_worker(self):
        return getattr(self.strategy, "cluster_resolver", None) is not None

    def elapsed(self):
        return 0.0 if self._start is None else time.monotonic() - self._start

    def _over(self, elapsed):
        return self.minutes is not None and elapsed >= 60.0 * self.minutes

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if not self._multi_worker and self._over(self.elapsed()):
            self.stopped = True
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        elapsed = self.elapsed()
        if self._multi_worker:
            import tensorflow as tf

            elapsed = float(
                self.strategy.reduce(
                    tf.distribute.ReduceOp.MAX,
                    self.strategy.run(lambda: tf.constant(elapsed, tf.float32)),
                    axis=None,
                )
            )
        if self._over(elapsed):
            self.stopped = True
            self.model.stop_training = True


class RunHistory(keras.callbacks.Callback):
    """Appends one record per epoch to `history.json` and `history.csv`.

    A resumed run first drops the records of epochs it is about to redo, so the
    files read as one run. Each record has the epoch, the optimizer step, the
    learning rate, the training seconds of the whole run so far and the logs
    (loss, masked_accuracy, val_loss, val_masked_accuracy).

    Args:
        run_dir: the folder for both files.

    Example:
        >>> json.load(open("runs/zh-en/history.json"))[-1]["val_loss"]  # doctest: +SKIP
    """

    def __init__(self, run_dir):
        super().__init__()
        self.json_path = os.path.join(run_dir, HISTORY_JSON)
        self.csv_path = os.path.join(run_dir, HISTORY_CSV)
        self.records = []
        self._start = None
        self._previous_seconds = 0.0

    def on_train_begin(self, logs=None):
        self.records = read_history(os.path.dirname(self.json_path))
        initial_epoch = getattr(self.model, "_initial_epoch", 0) or 0
        self.records = [record for record in self.records if record["epoch"] < initial_epoch]
        self._previous_seconds = self.records[-1]["train_seconds"] if self.records else 0.0
        self._start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        record = {
            "epoch": epoch,
            "step": optimizer_step(self.model),
            "train_seconds": round(self._previous_seconds + time.monotonic() - self._start, 3),
            "learning_rate": _current_learning_rate(self.model),
        }
        for key, value in (logs or {}).items():
            value = float(value)
            record[key] = value if math.isfinite(value) else None
        self.records.append(record)
        self._write()

    def _write(self):
        _atomic_write_text(self.json_path, json.dumps(self.records, indent=1))
        keys = []
        for record in self.records:
            keys.extend(key for key in record if key not in keys)
        temporary = f"{self.csv_path}.tmp-{os.getpid()}"
        with open(temporary, "w", newline="", encoding="utf-8") as file:
            writer = csv.DictWriter(file, fieldnames=keys)
            writer.writeheader()
            writer.writerows(self.records)
        os.replace(temporary, self.csv_path)


def read_history(run_dir):
    """The epoch records of a run folder ([] when there are none yet)."""
    path = os.path.join(run_dir, HISTORY_JSON)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as file:
        return json.load(file)


class RunProgress(keras.callbacks.Callback):
    """Records where `fit` started (after the backup was restored) and how far it got.

    Attributes:
        initial_step: optimizer step at the start of training.
        initial_epoch: epoch training started at.
        epochs_done: epochs completed by the run as a whole.
    """

    def __init__(self):
        super().__init__()
        self.initial_step = 0
        self.initial_epoch = 0
        self.epochs_done = 0

    def on_train_begin(self, logs=None):
        self.initial_step = optimizer_step(self.model)
        self.initial_epoch = getattr(self.model, "_initial_epoch", 0) or 0
        self.epochs_done = self.initial_epoch

    def on_epoch_end(self, epoch, logs=None):
        self.epochs_done = epoch + 1


def _current_learning_rate(model):
    optimizer = model.optimizer
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    rate = optimizer.learning_rate
    if callable(rate):
        rate = rate(optimizer.iterations)
    return float(keras.ops.convert_to_numpy(rate))


def make_callbacks(
    run_dir,
    save_freq="epoch",
    keep_checkpoints=3,
    minutes=None,
    patience=5,
    strategy=None,
    private_dir=None,
    tensorboard_update_freq="epoch",
):
    """The training callbacks of a run folder, in the order they must run.

    Args:
        run_dir: the run folder.
        save_freq: "epoch" or a number of steps, for both the backup and the
            checkpoints.
        keep_checkpoints: how many step checkpoints to keep.
        minutes: time budget of this `fit` call (None for none).
        patience: epochs without a lower val_loss before early stopping (None
            disables early stopping).
        strategy: the distribution strategy.
        private_dir: where a non-chief worker writes its backup and checkpoints
            (None on the chief: everything goes into `run_dir`). Non-chief workers
            write no history or TensorBoard logs.
        tensorboard_update_freq: "epoch" or a number of steps between logged
            training summaries.

    Returns:
        `(callbacks, time_budget)`: the list for `fit`, and the `TimeBudget`
        (whose `stopped` tells whether the budget ended the run).
    """
    state_dir = private_dir or run_dir
    time_budget = TimeBudget(minutes, strategy=strategy)
    callbacks = [
        # Saves before the backup at the same step, so a kill between the two leaves
        # a checkpoint of every step the backup may hold.
        WeightsCheckpoint(
            os.path.join(state_dir, CHECKPOINT_DIR), save_freq=save_freq, keep=keep_checkpoints
        ),
        # Restores weights, optimizer state and epoch before anyone else reads them.
        ResumableBackup(os.path.join(state_dir, BACKUP_DIR), save_freq=save_freq),
        keras.callbacks.TerminateOnNaN(),
        time_budget,
    ]
    if patience is not None:
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience, verbose=1)
        )
    if private_dir is None:
        callbacks.append(RunHistory(run_dir))
        if tensorboard_available():
            callbacks.append(
                keras.callbacks.TensorBoard(
                    log_dir=os.path.join(run_dir, LOG_DIR), update_freq=tensorboard_update_freq
                )
            )
        else:
            warnings.warn(
                "TensorBoard is not installed (pip install tensorboard): no TensorBoard logs.",
                stacklevel=2,
            )
    return callbacks, time_budget


def tensorboard_available():
    """Whether `tf.summary` can write (it needs the `tensorboard` package)."""
    return importlib.util.find_spec("tensorboard") is not None
