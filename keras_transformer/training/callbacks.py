"""Callbacks that make a training run resumable, bounded and observable.

They are built only on Keras' public callback hooks (`on_epoch_begin`,
`on_train_batch_end`, ...) and write through the run folder's checkpoint store and
history (`keras_transformer.runs`), which own the layout and write every file
atomically:

    backup/        the newest training state (weights + optimizer, epoch, step): `RunBackup`
    checkpoints/   step-<step>.weights.h5 and epoch-<epoch>.weights.h5: `Checkpoints`
    best.weights.h5, best.json    the lowest validation loss so far: `BestWeights`
    history.json, history.csv     one record per epoch, kept across resumes: `RunHistory`
    logs/          TensorBoard events (train/ and validation/)

Restoring is not a callback: the trainer loads the backup before `fit` and passes
its epoch as `fit(initial_epoch=...)` (`restore_backup`). Keras' own
`BackupAndRestore` is not used: its epoch counter restarts at 0 after a restore
(so a step backup written after a resume records epoch 0), and it overwrites its
files in place (a kill while saving leaves a broken backup).
"""

import importlib.util
import math
import time
import warnings

import keras

from keras_transformer.runs.folder import RunFolder


def optimizer_step(model):
    """The optimizer's update count, the run's step counter (survives resume)."""
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def _finite_loss(logs):
    loss = (logs or {}).get("loss")
    return loss is None or math.isfinite(float(loss))


def restore_backup(model, run_dir):
    """Loads a run's newest backup into a compiled model with a built optimizer.

    Args:
        model: the model (call under its strategy's scope).
        run_dir: the `RunFolder` holding the backup.

    Returns:
        The epoch to resume at (0 when there is no backup).
    """
    state = run_dir.checkpoints.read_backup()
    if state is None:
        return 0
    model.load_weights(state["weights"])
    return int(state["epoch"])


class RunBackup(keras.callbacks.Callback):
    """Saves the training state so that a run killed at any time can resume.

    Saves at optimizer steps that are multiples of `save_freq` (as `Checkpoints`,
    so both hold the same steps), at every epoch end and at the end of training
    (so a run stopped by a time budget or early stopping resumes from its very
    last state); never after a non-finite loss (a NaN state is not worth
    resuming). The state records the epoch to resume at and the optimizer step.

    Args:
        run_dir: the `RunFolder` to save into.
        save_freq: "epoch", or also every this many optimizer steps.

    Example:
        >>> backup = RunBackup(RunFolder("runs/zh-en"), save_freq=200)  # doctest: +SKIP
    """

    def __init__(self, run_dir, save_freq="epoch"):
        super().__init__()
        self.run_dir = run_dir
        self.save_freq = save_freq
        self._epoch = None
        self._poisoned = False
        self._saved = None

    def on_train_begin(self, logs=None):
        self._epoch, self._poisoned, self._saved = None, False, None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if not _finite_loss(logs):
            self._poisoned = True
        if self.save_freq != "epoch" and optimizer_step(self.model) % self.save_freq == 0:
            self._save()

    def on_epoch_end(self, epoch, logs=None):
        self._epoch = epoch + 1
        self._save()

    def on_train_end(self, logs=None):
        self._save()

    def _save(self):
        if self._poisoned or self._epoch is None:
            return
        state = (self._epoch, optimizer_step(self.model))
        if state != self._saved:
            self.run_dir.checkpoints.write_backup(self.model, *state)
            self._saved = state


class Checkpoints(keras.callbacks.Callback):
    """Saves the weights (with the optimizer state) every N steps and at each epoch end.

    Step checkpoints are named after the optimizer step (`step-00001200.weights.h5`),
    so names keep increasing across resumes; the newest `keep` are kept. Each epoch
    end also keeps `epoch-0007.weights.h5` (the newest `keep_epochs` of them), the
    checkpoints `keras-transformer average` averages: step checkpoints are too close
    together to be worth averaging, and too few survive.

    Args:
        run_dir: the `RunFolder` to save into.
        save_freq: "epoch", or also save at steps that are multiples of this.
        keep: how many step checkpoints to keep (>= 1).
        keep_epochs: how many epoch checkpoints to keep (0: none).

    Example:
        >>> Checkpoints(RunFolder("runs/zh-en"), save_freq=500, keep=3, keep_epochs=5)  # doctest: +SKIP
    """

    def __init__(self, run_dir, save_freq="epoch", keep=3, keep_epochs=5):
        super().__init__()
        if save_freq != "epoch" and (not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f"`save_freq` must be 'epoch' or a positive int; received {save_freq!r}.")
        if keep < 1:
            raise ValueError(f"`keep` must be at least 1; received {keep}.")
        self.run_dir = run_dir
        self.save_freq = save_freq
        self.keep = keep
        self.keep_epochs = keep_epochs

    def on_train_begin(self, logs=None):
        self._poisoned = False
        self._last_saved_step = None

    def on_train_batch_end(self, batch, logs=None):
        if not _finite_loss(logs):
            self._poisoned = True
        if self.save_freq != "epoch" and not self._poisoned:
            step = optimizer_step(self.model)
            if step % self.save_freq == 0:
                self._save_step(step)

    def on_epoch_end(self, epoch, logs=None):
        # Also with a step frequency: the backup is written at epoch ends too, and
        # every state the backup holds should have its checkpoint.
        if self._poisoned:
            return
        path = self._save_step(optimizer_step(self.model))
        if self.keep_epochs:
            self.run_dir.checkpoints.save(self.model, "epoch", epoch, self.keep_epochs, same_as=path)

    def _save_step(self, step):
        if step != self._last_saved_step:
            self._last_saved_step = step
            self.run_dir.checkpoints.save(self.model, "step", step, self.keep)
        return self.run_dir.checkpoint_path("step", step)


class BestWeights(keras.callbacks.Callback):
    """Keeps the weights of the lowest validation loss (`best.weights.h5`, `best.json`).

    Written at the end of an epoch whose `val_loss` is finite and lower than every
    earlier one of the run (across resumes: the stored best is read first), with the
    epoch, the optimizer step and the validation loss.

    Args:
        run_dir: the `RunFolder` to save into.
    """

    def __init__(self, run_dir):
        super().__init__()
        self.run_dir = run_dir
        self.best = math.inf

    def on_train_begin(self, logs=None):
        stored = self.run_dir.checkpoints.read_best()
        self.best = math.inf if stored is None else float(stored["val_loss"])

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get("val_loss")
        if value is None or not math.isfinite(float(value)) or float(value) >= self.best:
            return
        self.best = float(value)
        self.run_dir.checkpoints.write_best(self.model, epoch, optimizer_step(self.model), self.best)


class TrainingBudget(keras.callbacks.Callback):
    """Stops training cleanly once `minutes` of wall time have passed or the optimizer
    has taken `max_steps` steps.

    Training stops after the current step; Keras then still validates and ends
    the epoch, and the other callbacks save as usual. Under a multi-worker
    strategy every worker must stop at the same step: the step count is the same on
    every worker, and the time is decided at epoch ends, on the mean elapsed time of
    all workers (one all-reduced number, the same on every worker; `tf.distribute`
    reduces by sum or mean only).

    Args:
        minutes: budget for this `fit` call, counted from the start of training
            (None: none).
        max_steps: the optimizer step (counted over the whole run, resumes
            included) at which to stop (None: none).
        strategy: the distribution strategy (only a multi-worker one matters).

    Attributes:
        stopped_by: "time" or "steps" once a budget ended training, else None.

    Example:
        >>> model.fit(dataset, epochs=1000, callbacks=[TrainingBudget(25)])  # doctest: +SKIP
    """

    def __init__(self, minutes=None, max_steps=None, strategy=None):
        super().__init__()
        if minutes is not None and minutes <= 0:
            raise ValueError(f"`minutes` must be positive; received {minutes}.")
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                      or max_steps < 1):
            raise ValueError(f"`max_steps` must be a positive integer; received {max_steps!r}.")
        self.minutes = minutes
        self.max_steps = max_steps
        self.strategy = strategy
        self.stopped_by = None
        self._start = None

    @property
    def stopped(self):
        return self.stopped_by is not None

    @property
    def _multi_worker(self):
        return getattr(self.strategy, "cluster_resolver", None) is not None

    def elapsed(self):
        return 0.0 if self._start is None else time.monotonic() - self._start

    def _over(self, elapsed):
        return self.minutes is not None and elapsed >= 60.0 * self.minutes

    def _stop(self, reason):
        self.stopped_by = self.stopped_by or reason
        self.model.stop_training = True

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()
        self.stopped_by = None

    def on_train_batch_end(self, batch, logs=None):
        if self.max_steps is not None and optimizer_step(self.model) >= self.max_steps:
            self._stop("steps")
        elif not self._multi_worker and self._over(self.elapsed()):
            self._stop("time")

    def on_epoch_end(self, epoch, logs=None):
        elapsed = self.elapsed()
        if self._multi_worker:
            import tensorflow as tf

            elapsed = float(
                self.strategy.reduce(
                    tf.distribute.ReduceOp.MEAN,
                    self.strategy.run(lambda: tf.constant(elapsed, tf.float32)),
                    axis=None,
                )
            )
        if self._over(elapsed):
            self._stop("time")


class RunHistory(keras.callbacks.Callback):
    """Appends one record per epoch to the run's history (`keras_transformer.runs.history`).

    A resumed run first drops the records of the epochs it is about to redo (from
    the first epoch `fit` begins), so the history reads as one run. Each record has
    the epoch, the optimizer step, the learning rate, the training seconds of the
    whole run so far and the logs (loss, masked_accuracy, val_loss,
    val_masked_accuracy); non-finite values are stored as null.

    Args:
        run_dir: the `RunFolder`.

    Example:
        >>> RunFolder("runs/zh-en").history.read()[-1]["val_loss"]  # doctest: +SKIP
    """

    def __init__(self, run_dir):
        super().__init__()
        self.run_dir = run_dir
        self.records = []
        self._start = None
        self._previous_seconds = 0.0
        self._first_epoch = None

    def on_train_begin(self, logs=None):
        self.records = self.run_dir.history.read()
        self._first_epoch = None
        self._start = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        if self._first_epoch is None:
            self._first_epoch = epoch
            self.records = [record for record in self.records if record["epoch"] < epoch]
            self._previous_seconds = self.records[-1]["train_seconds"] if self.records else 0.0

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
        self.run_dir.history.write(self.records)


class RunProgress(keras.callbacks.Callback):
    """Records the step `fit` started from and the epochs the run has completed.

    Args:
        initial_epoch: the epoch `fit` starts at (from the backup).

    Attributes:
        initial_step: optimizer step at the start of training.
        epochs_done: epochs completed by the run as a whole.
    """

    def __init__(self, initial_epoch=0):
        super().__init__()
        self.initial_epoch = initial_epoch
        self.initial_step = 0
        self.epochs_done = initial_epoch

    def on_train_begin(self, logs=None):
        self.initial_step = optimizer_step(self.model)

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
    keep_epoch_checkpoints=5,
    minutes=None,
    max_steps=None,
    patience=5,
    strategy=None,
    state_dir=None,
    tensorboard_update_freq="epoch",
):
    """The training callbacks of a run folder, in the order they must run.

    Args:
        run_dir: the `RunFolder` (or its path).
        save_freq: "epoch" or a number of steps, for both the backup and the
            checkpoints.
        keep_checkpoints: how many step checkpoints to keep.
        keep_epoch_checkpoints: how many epoch checkpoints to keep.
        minutes: time budget of this `fit` call (None for none).
        max_steps: optimizer step at which the run stops (None for none).
        patience: epochs without a lower val_loss before early stopping (None
            disables early stopping).
        strategy: the distribution strategy.
        state_dir: the `RunFolder` where a non-chief worker writes its backup,
            checkpoints and best weights (None on the chief: everything goes into
            `run_dir`). Non-chief workers write no history or TensorBoard logs.
        tensorboard_update_freq: "epoch" or a number of steps between logged
            training summaries.

    Returns:
        `(callbacks, budget)`: the list for `fit`, and the `TrainingBudget`
        (whose `stopped_by` tells whether a time or step budget ended the run).
    """
    run_dir = run_dir if isinstance(run_dir, RunFolder) else RunFolder(run_dir)
    chief = state_dir is None
    state_dir = state_dir or run_dir
    budget = TrainingBudget(minutes, max_steps=max_steps, strategy=strategy)
    callbacks = [
        # Saves before the backup at the same step, so a kill between the two leaves
        # a checkpoint of every step the backup may hold.
        Checkpoints(state_dir, save_freq=save_freq, keep=keep_checkpoints,
                    keep_epochs=keep_epoch_checkpoints),
        RunBackup(state_dir, save_freq=save_freq),
        BestWeights(state_dir),
        keras.callbacks.TerminateOnNaN(),
        budget,
    ]
    if patience is not None:
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience, verbose=1)
        )
    if chief:
        callbacks.append(RunHistory(run_dir))
        if tensorboard_available():
            callbacks.append(
                keras.callbacks.TensorBoard(
                    log_dir=run_dir.log_dir, update_freq=tensorboard_update_freq
                )
            )
        else:
            warnings.warn(
                "TensorBoard is not installed (pip install tensorboard): no TensorBoard logs.",
                stacklevel=2,
            )
    return callbacks, budget


def tensorboard_available():
    """Whether `tf.summary` can write (it needs the `tensorboard` package)."""
    return importlib.util.find_spec("tensorboard") is not None
