"""The checkpoint store of a run folder: rotated checkpoints, the backup, best and final weights.

    checkpoints/step-<step>.weights.h5     every `save_freq` steps and at epoch ends; the
                                           newest `keep` are kept
    checkpoints/epoch-<epoch>.weights.h5   each epoch end (the newest `keep_epochs`), what
                                           averaging reads (`runs.weights`)
    backup/state.json, backup/state-<step>.weights.h5
                                           the newest training state (weights + optimizer,
                                           epoch, step) that `train` resumes from
    best.weights.h5, best.json             the lowest validation loss so far
    final.weights.h5, model.keras          the state when training last ended

Every file is a Keras `.weights.h5` file (or `model.keras`), written by
`model.save_weights` to a temporary name and renamed (`files.atomic_path`). Neither
`tf.train.CheckpointManager` nor Keras' `ModelCheckpoint` fits: the manager writes
TensorFlow's checkpoint format (ckpt-N.index, ckpt-N.data-*), while averaging,
`--weights FILE`, the export and `model.load_weights` read Keras `.weights.h5`
files (and it loads TensorFlow, which the command line reads this module without);
`ModelCheckpoint` keeps no newest N and writes the file in place, so a kill while
saving leaves a broken file. Keras' `BackupAndRestore` is not used either
(`training.callbacks` says why).

The store is given its `RunFolder`, which names every path. This module imports
only the standard library at import time.
"""

import dataclasses
import os

from keras_transformer import files


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint file: `kind` "step" or "epoch" and its number (the step or the epoch)."""

    path: str
    kind: str
    number: int


class CheckpointStore:
    """Writes and lists the weights files of one run folder.

    Args:
        folder: the `RunFolder` (its paths).
    """

    def __init__(self, folder):
        self.folder = folder

    @staticmethod
    def save_weights(model, path):
        """`model.save_weights(path)` atomically (weights and, if compiled, optimizer state)."""
        with files.atomic_path(path) as temporary:
            model.save_weights(temporary)

    # -- rotated checkpoints ------------------------------------------------------------------
    def kept(self, kind="step"):
        """The checkpoints of `kind` ("step" or "epoch") in the folder, oldest first."""
        directory = self.folder.checkpoint_dir
        if not os.path.isdir(directory):
            return []
        found = []
        for name in os.listdir(directory):
            number = self.folder.checkpoint_number(kind, name)
            if number is not None:
                found.append(Checkpoint(os.path.join(directory, name), kind, number))
        return sorted(found, key=lambda checkpoint: checkpoint.number)

    def save(self, model, kind, number, keep, same_as=None):
        """Saves a step or epoch checkpoint, then deletes all but the newest `keep` of its kind.

        Args:
            model: the model (its weights and optimizer state are saved).
            kind: "step" or "epoch".
            number: the step or the epoch.
            keep: how many checkpoints of this kind to keep.
            same_as: a file that already holds exactly this state: it is linked
                instead of written again (written when the file system cannot link).

        Returns:
            The checkpoint's path.
        """
        path = self.folder.checkpoint_path(kind, number)
        with files.atomic_path(path) as temporary:
            try:
                os.link(same_as, temporary)
            except (OSError, TypeError):
                model.save_weights(temporary)
        kept = self.kept(kind)
        for old in kept[: max(len(kept) - keep, 0)]:
            os.remove(old.path)
        return path

    # -- backup ----------------------------------------------------------------------------------
    def read_backup(self):
        """The newest backup {"epoch", "step", "weights": path}, or None."""
        path = self.folder.backup_state_path
        if not os.path.exists(path):
            return None
        state = files.read_json(path)
        return {**state, "weights": os.path.join(self.folder.backup_dir, state["weights"])}

    def write_backup(self, model, epoch, step):
        """Saves the training state: a new weights file first, then state.json naming it.

        A kill at any point leaves state.json naming a complete file (the old one
        is deleted only after the new state.json is in place).
        """
        name = self.folder.backup_weights_name(step)
        self.save_weights(model, os.path.join(self.folder.backup_dir, name))
        files.write_json(self.folder.backup_state_path, {"epoch": epoch, "step": step, "weights": name})
        for old in os.listdir(self.folder.backup_dir):
            if old != name and old.startswith("state-"):
                os.remove(os.path.join(self.folder.backup_dir, old))

    # -- best and final ------------------------------------------------------------------------------
    def write_best(self, model, epoch, step, val_loss):
        """Saves the weights of a new lowest validation loss (best.weights.h5 + best.json)."""
        self.save_weights(model, self.folder.best_weights_path)
        files.write_json(self.folder.best_record_path, {"epoch": epoch, "step": step, "val_loss": val_loss})

    def read_best(self):
        """{"epoch", "step", "val_loss"} of best.weights.h5, or None."""
        if not (os.path.exists(self.folder.best_record_path)
                and os.path.exists(self.folder.best_weights_path)):
            return None
        return files.read_json(self.folder.best_record_path)

    def save_final(self, model):
        """Saves model.keras and final.weights.h5 at the end of training."""
        with files.atomic_path(self.folder.model_path) as temporary:
            model.save(temporary)
        self.save_weights(model, self.folder.final_weights_path)
