"""Which weights of a run a command uses, and the average of its epoch checkpoints.

`choose_weights(folder, choice)` (also `RunFolder.weights(choice)`) answers
"best", "last", "average", a weights file, or None for the default: the average
that training writes when it ends, while no newer epoch checkpoint exists, else
the best. `average_checkpoints` averages the model weights (not the optimizer
state) of chosen epoch checkpoints into average.weights.h5, with average.json
naming them, as OpenNMT-tf's `average_checkpoints` does; `keras-transformer
average` (`runs.average_command`) and the end of training call it.

Each function takes the `RunFolder` (its paths, `checkpoints` and `history`).
This module imports only the standard library at import time; averaging loads
TensorFlow and the model code.
"""

import dataclasses
import os

from keras_transformer import files

WEIGHTS_CHOICES = ("best", "last", "average")
DEFAULT_AVERAGE_LAST = 5


@dataclasses.dataclass(frozen=True)
class Weights:
    """A weights file of a run and what is known about it.

    Attributes:
        path: the .weights.h5 file.
        kind: "best", "last", "average", "checkpoint" or "file".
        epoch: the (0-based) epoch it ends, when known.
        step: the optimizer step, when known.
        val_loss: the validation loss of those weights, when known.
        sources: for an average, the checkpoint files averaged.
    """

    path: str
    kind: str
    epoch: int | None = None
    step: int | None = None
    val_loss: float | None = None
    sources: tuple = ()

    def record(self, relative_to=None):
        """A JSON-ready dict (path relative to `relative_to` when given)."""
        path = os.path.relpath(self.path, relative_to) if relative_to else self.path
        record = {"kind": self.kind, "path": path, "epoch": self.epoch, "step": self.step,
                  "val_loss": self.val_loss}
        if self.sources:
            record["sources"] = list(self.sources)
        return record


def epochs_to_average(epochs_trained, kept):
    """How many of the newest epoch checkpoints the end of training averages.

    `DEFAULT_AVERAGE_LAST`, but never more than half the epochs trained: the early
    epochs of a short run are still in the steep part of the loss curve, and an
    average that reaches back to them loses (README, the 636-step table: averaging 5
    of 6 epochs scored 14.5 test BLEU, the last 3 of them 21.4).

    Args:
        epochs_trained: epochs the run has completed (across resumes).
        kept: epoch checkpoints in the run folder.

    Returns:
        The count; below 2 means no average (the best weights serve instead).
    """
    return min(DEFAULT_AVERAGE_LAST, epochs_trained // 2, kept)


def choose_weights(folder, choice=None, build_model=None):
    """The weights a command should use.

    Args:
        folder: the `RunFolder`.
        choice: None for the default: the average of the newest epoch checkpoints
            that training writes when it ends (measured best on the bundled
            corpus, README), else "best"; "best" (the lowest validation loss; the
            last weights for a run that recorded none), "last" (final weights, else
            the newest checkpoint), "average" (average.weights.h5, computed from
            the last `DEFAULT_AVERAGE_LAST` epoch checkpoints when missing, with
            `build_model`), or the path of a weights file.
        build_model: makes the run's model, for an average still to compute
            (`average_checkpoints`); the run folder knows files, not models.

    Returns:
        A `Weights`.
    """
    if choice is None:
        return _current_average(folder) or _best(folder) or _last(folder)
    if choice == "best":
        return _best(folder) or _last(folder)
    if choice == "last":
        return _last(folder)
    if choice == "average":
        average = _average(folder)
        if average is None and build_model is None:
            raise FileNotFoundError(
                f"{folder.path} holds no average.weights.h5; write one with `keras-transformer "
                f"average --run {folder.path} --last {DEFAULT_AVERAGE_LAST}`."
            )
        return average or average_checkpoints(folder, build_model(), last=DEFAULT_AVERAGE_LAST)
    if not os.path.isfile(choice):
        raise FileNotFoundError(
            f"--weights {choice}: no such file; accepted: {', '.join(WEIGHTS_CHOICES)} or a "
            "weights file."
        )
    return Weights(os.fspath(choice), "file")


def _last(folder):
    """The final weights if training ended, else the newest checkpoint."""
    if os.path.exists(folder.final_weights_path):
        history = folder.history.read()
        last = history[-1] if history else {}
        return Weights(folder.final_weights_path, "last", last.get("epoch"), last.get("step"),
                       last.get("val_loss"))
    candidates = [(c.number, c.path) for c in folder.checkpoints.kept("step")]
    for checkpoint in folder.checkpoints.kept("epoch"):
        step = folder.history.record(epoch=checkpoint.number).get("step")
        if step is not None:
            candidates.append((step, checkpoint.path))
    if not candidates:
        raise FileNotFoundError(
            f"{folder.path} holds no weights yet ({os.path.basename(folder.final_weights_path)} or "
            f"{os.path.basename(folder.checkpoint_dir)}/*.weights.h5); train longer, or wait for "
            "the first checkpoint."
        )
    step, path = max(candidates)
    record = folder.history.record(step=step)
    return Weights(path, "checkpoint", record.get("epoch"), step, record.get("val_loss"))


def _best(folder):
    """The weights of the lowest validation loss (None when none were recorded)."""
    best = folder.checkpoints.read_best()
    if best is None:
        return None
    return Weights(folder.best_weights_path, "best", best.get("epoch"), best.get("step"),
                   best.get("val_loss"))


def _average(folder):
    """The weights of the last `average_checkpoints` (None when there are none)."""
    path, record_path = folder.average_weights_path, folder.average_record_path
    if not (os.path.exists(path) and os.path.exists(record_path)):
        return None
    record = files.read_json(record_path)
    return Weights(path, "average", record.get("epoch"), record.get("step"),
                   record.get("val_loss"), tuple(record.get("sources", ())))


def _current_average(folder):
    """The average written at the end of training, if no epoch checkpoint is newer."""
    average = _average(folder)
    epochs = folder.checkpoints.kept("epoch")
    if average is None or not epochs or average.epoch != epochs[-1].number:
        return None
    return average


def select_checkpoints(folder, last=None, best=None):
    """The epoch checkpoints to average: the `last` newest, or the `best` by validation loss.

    Standard library only, so the command checks its arguments before TensorFlow loads.

    Returns:
        A list of (Checkpoint, history record).
    """
    if (last is None) == (best is None):
        raise ValueError("Choose the checkpoints to average: --last N or --best N.")
    count = last if last is not None else best
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"The number of checkpoints must be a positive integer; received {count!r}.")
    available = [(c, folder.history.record(epoch=c.number)) for c in folder.checkpoints.kept("epoch")]
    if not available:
        raise FileNotFoundError(
            f"{folder.checkpoint_dir} holds no epoch checkpoints (epoch-*.weights.h5) to average; "
            "train for a few epochs first (--keep-epoch-checkpoints keeps them)."
        )
    if len(available) < count:
        raise ValueError(
            f"{folder.path} keeps {len(available)} epoch checkpoints; received {count}. "
            f"Average at most {len(available)} (train with a larger --keep-epoch-checkpoints)."
        )
    if last is not None:
        return available[-count:]
    scored = [item for item in available if item[1].get("val_loss") is not None]
    if len(scored) < count:
        raise ValueError(
            f"Only {len(scored)} epoch checkpoints have a recorded validation loss; received --best {count}."
        )
    return sorted(scored, key=lambda item: item[1]["val_loss"])[:count]


def average_checkpoints(folder, model, last=None, best=None):
    """Averages the model weights (not the optimizer state) of chosen epoch checkpoints.

    Writes average.weights.h5 (model weights only) and average.json (the files
    averaged, their epochs, steps and validation losses).

    Args:
        folder: the `RunFolder`.
        model: the run's model (its weights are overwritten), built by the caller:
            the run folder knows files, the task objects know models.
        last: average the newest this many epoch checkpoints, or
        best: those of the this many lowest validation losses.

    Returns:
        The `Weights` written.
    """
    import numpy as np

    chosen = select_checkpoints(folder, last=last, best=best)
    total = None
    for checkpoint, _ in chosen:
        model.load_weights(checkpoint.path)
        values = [np.asarray(value, dtype=np.float64) for value in model.get_weights()]
        total = values if total is None else [a + b for a, b in zip(total, values)]
    model.set_weights([value / len(chosen) for value in total])
    folder.checkpoints.save_weights(model, folder.average_weights_path)
    newest = max(chosen, key=lambda item: item[0].number)
    sources = [os.path.relpath(c.path, folder.path) for c, _ in chosen]
    record = {
        "selection": f"last {last}" if last is not None else f"best {best}",
        "sources": sources,
        "epochs": [c.number for c, _ in chosen],
        "steps": [r.get("step") for _, r in chosen],
        "val_losses": [r.get("val_loss") for _, r in chosen],
        "epoch": newest[0].number,
        "step": newest[1].get("step"),
        "val_loss": None,  # not measured: evaluate the average to know it
    }
    files.write_json(folder.average_record_path, record)
    return Weights(folder.average_weights_path, "average", record["epoch"], record["step"], None,
                   tuple(sources))
