"""The run folder: the contract between `train` and the steps that read a model.

`RunDir` owns every path of a run folder and reads and writes what is in it; no
other module builds a path inside a run. A run trains one task (`RunDir.task`):
"translate" (a `Seq2SeqTransformer`), "lm" (a decoder-only language model,
`build_language_model`) or "classify" (an encoder classifier, `build_classifier`);
a config.json without "task" is a translation run from before tasks. The layout:

    config.json              {"format_version", "task" (absent: "translate"), "preset",
                              "model": the `BackboneConfig` (`to_dict`): a translator's
                                       has an encoder and a decoder, an lm's a decoder,
                                       a classifier's an encoder, each stack's
                                       vocab_size the tokenizer's,
                              "data": corpus, split and tokenizer settings,
                              "training": TrainingConfig fields, "device": what was in effect}
    splits/{train,validation,test}.tsv   the split used, one example a line
    translate: source.model, target.model   the SentencePiece models (`tokenizer_paths`)
               splits: source<TAB>target (`read_split`)
               data: source_language, target_language, source_tokenizer, target_tokenizer,
                     max_source_length, max_target_length, source_prefix (what the
                     source tokenizer puts before each sentence: `tokenizers`)
    lm:        tokenizer.model        the one SentencePiece model (`tokenizer_path`)
               splits: one text a line (`read_texts`)
               data: tokenizer, vocab_size, max_length (ids per example, BOS or EOS
                     included: the model reads BOS + text, predicts text + EOS), language
    classify:  tokenizer.model        the one SentencePiece model (`tokenizer_path`)
               labels.json            the class names, sorted; class id i is labels[i]
                                      (`read_labels`)
               splits: label<TAB>text (`read_labelled`)
               data: tokenizer, vocab_size, num_classes, max_length (ids per text; no
                     BOS/EOS), language
    (every task: `RunDir.tokenizer_files()` lists the tokenizer model files, to ship
    as an export's assets; `RunDir.load()` gives the model, its tokenizers and labels.)
    backup/state.json, backup/state-<step>.weights.h5
                             the newest training state (weights + optimizer); state.json
                             names its file and records epoch and step, and is written
                             last, so it always names a complete file
    checkpoints/step-<step>.weights.h5     the newest `keep_checkpoints` step checkpoints
    checkpoints/epoch-<epoch>.weights.h5   the newest `keep_epoch_checkpoints` epoch ends
    best.weights.h5, best.json       the weights of the lowest validation loss so far
                                     (epoch, step, val_loss)
    average.weights.h5, average.json the average of chosen checkpoints (`keras-transformer average`)
    final.weights.h5, model.keras    the state when training last ended
    history.json, history.csv        one record per epoch; logs/ TensorBoard events
    evaluation.json                  the last `evaluate` of a split
    workers/<task>/                  private state of non-chief workers (multi-worker runs)

Every file is written atomically (`keras_transformer.files`). Commands that read a
run choose its weights with `RunDir.weights("best" | "last" | "average" | FILE)`.

This module imports only the standard library at import time.

Example:
    >>> run_dir = RunDir("runs/zh-en")  # doctest: +SKIP
    >>> run_dir.weights("best")  # doctest: +SKIP
    Weights(path='runs/zh-en/best.weights.h5', kind='best', epoch=11, step=1150, val_loss=2.79)
    >>> run = run_dir.load("best")  # doctest: +SKIP
"""

import csv
import dataclasses
import io
import os
import re

from keras_transformer import files

CONFIG_NAME = "config.json"
SPLIT_DIR = "splits"
SPLITS = ("train", "validation", "test")
BACKUP_DIR = "backup"
CHECKPOINT_DIR = "checkpoints"
LOG_DIR = "logs"
HISTORY_NAME = "history.json"
HISTORY_CSV_NAME = "history.csv"
FINAL_WEIGHTS_NAME = "final.weights.h5"
MODEL_NAME = "model.keras"
BEST_NAME = "best"
AVERAGE_NAME = "average"
EVALUATION_NAME = "evaluation.json"
WORKERS_DIR = "workers"
WEIGHTS_CHOICES = ("best", "last", "average")
TOKENIZER_NAME = "tokenizer.model"
LABELS_NAME = "labels.json"
# The tasks a run can train; a config.json without "task" is a translation run.
TASKS = ("translate", "lm", "classify")
DEFAULT_TASK = "translate"
TASK_NAMES = {"translate": "translation", "lm": "language-model", "classify": "classifier"}
DEFAULT_AVERAGE_LAST = 5


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


_LEGACY_BACKUP = ("latest.weights.h5", "training_metadata.json")
_STEP = re.compile(r"^step-(\d{8})\.weights\.h5$")
_EPOCH = re.compile(r"^epoch-(\d{4,})\.weights\.h5$")


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


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint file: `kind` "step" or "epoch", its number and its optimizer step."""

    path: str
    kind: str
    number: int


class RunDir:
    """A run folder: every path in it, and the readers and writers of its files.

    Args:
        path: the folder (it need not exist yet).
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def __repr__(self):
        return f"RunDir({self.path!r})"

    def file(self, *parts):
        """The path of a file or folder inside the run."""
        return os.path.join(self.path, *parts)

    # -- config --------------------------------------------------------------------------
    @property
    def config_path(self):
        return self.file(CONFIG_NAME)

    def exists(self):
        """Whether the folder holds a run (its config.json)."""
        return os.path.exists(self.config_path)

    def read_config(self):
        """The parsed config.json, with a clear error when this is not a run folder."""
        if not self.exists():
            raise FileNotFoundError(
                f"{self.config_path} does not exist: {self.path} is not a run folder. Create one "
                "with `keras-transformer train --run DIR ...`."
            )
        return files.read_json(self.config_path)

    def write_config(self, config):
        files.write_json(self.config_path, config)

    def read_training_config(self):
        """The stored `TrainingConfig` (None before the first `train`)."""
        from keras_transformer.training.config import TrainingConfig

        stored = self.read_config().get("training") if self.exists() else None
        return None if stored is None else TrainingConfig.from_dict(stored)

    def task(self, config=None):
        """The run's task: "translate" (also for runs from before tasks), "lm" or "classify"."""
        return task_of(config or self.read_config())

    def require_task(self, task, command, config=None):
        """Raises a one-line `ValueError` when the run's task is not `task` (for `command`)."""
        found = self.task(config)
        if found != task:
            raise ValueError(
                f"{self.path} is a {TASK_NAMES[found]} run (task {found}); `keras-transformer "
                f"{command}` needs a {TASK_NAMES[task]} run (task {task})."
            )

    def worker(self, name):
        """The private run folder of a non-chief worker."""
        return RunDir(self.file(WORKERS_DIR, name))

    # -- splits and tokenizers -------------------------------------------------------------
    def split_path(self, part):
        if part not in SPLITS:
            raise ValueError(f"Unknown split {part!r}; accepted: {list(SPLITS)}.")
        return self.file(SPLIT_DIR, f"{part}.tsv")

    def write_split(self, part, pairs):
        """Writes `SentencePair`s as source<TAB>target lines."""
        files.write_lines(self.split_path(part), [f"{p.source}\t{p.target}" for p in pairs])

    def read_split(self, part):
        """The (sources, targets) of the "train", "validation" or "test" split."""
        from keras_transformer.data.corpus import read_tsv
        from keras_transformer.data.corpus import sources_and_targets

        path = self.split_path(part)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} does not exist; is {self.path} a run folder?")
        if os.path.getsize(path) == 0:
            return [], []
        return sources_and_targets(read_tsv(path, 0, 1))

    def tokenizer_paths(self, config=None):
        """(source, target) SentencePiece model files of a translation run."""
        config = config or self.read_config()
        if task_of(config) != "translate":
            raise ValueError(
                f"{self.path} is a {TASK_NAMES[task_of(config)]} run: it has one tokenizer "
                "(`tokenizer_path`), not a source and a target one."
            )
        data = config["data"]
        return self.file(data["source_tokenizer"]), self.file(data["target_tokenizer"])

    def tokenizers(self, config=None):
        """The (source, target) `SubwordTokenizer`s of a translation run, as sentences
        to translate meet them: the source one puts the run's `source_prefix` (a
        bidirectional run's direction tag; none before it existed) before each."""
        from keras_transformer.data.tokenizer import SubwordTokenizer

        config = config or self.read_config()
        source_path, target_path = self.tokenizer_paths(config)
        prefix = config["data"].get("source_prefix", "")
        return (SubwordTokenizer.from_file(source_path, prefix=prefix),
                SubwordTokenizer.from_file(target_path))

    @property
    def tokenizer_file(self):
        """Where a new "lm" or "classify" run keeps its SentencePiece model (tokenizer.model)."""
        return self.file(TOKENIZER_NAME)

    def write_tokenizer(self, model_proto):
        """Writes the SentencePiece model of an "lm" or "classify" run (tokenizer.model) atomically."""
        with files.atomic_path(self.tokenizer_file) as temporary:
            with open(temporary, "wb") as file:
                file.write(model_proto)
        return self.tokenizer_file

    def tokenizer_path(self, config=None):
        """The one SentencePiece model file of an "lm" or "classify" run (tokenizer.model)."""
        config = config or self.read_config()
        if task_of(config) == "translate":
            raise ValueError(f"{self.path} is a translation run: it has a source and a target tokenizer.")
        return self.file(config["data"]["tokenizer"])

    def tokenizer_files(self, config=None):
        """Every tokenizer model file of the run, whatever its task (an export's assets)."""
        config = config or self.read_config()
        if task_of(config) == "translate":
            return list(self.tokenizer_paths(config))
        return [self.tokenizer_path(config)]

    def write_texts(self, part, texts):
        """Writes an "lm" split: one text a line."""
        files.write_lines(self.split_path(part), list(texts))

    def read_texts(self, part):
        """The texts of an "lm" split."""
        path = self._existing_split(part)
        from keras_transformer.data.corpus import TextFile

        return TextFile(path).read() if os.path.getsize(path) else []

    def write_labelled(self, part, labels, texts):
        """Writes a "classify" split: label<TAB>text lines."""
        files.write_lines(self.split_path(part), [f"{label}\t{text}" for label, text in zip(labels, texts)])

    def read_labelled(self, part):
        """The (labels, texts) of a "classify" split."""
        from keras_transformer.data.corpus import LabelledFile

        path = self._existing_split(part)
        return LabelledFile(path).read() if os.path.getsize(path) else ([], [])

    def _existing_split(self, part):
        path = self.split_path(part)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} does not exist; is {self.path} a run folder?")
        return path

    @property
    def labels_path(self):
        return self.file(LABELS_NAME)

    def write_labels(self, labels):
        """Writes labels.json: the class names of a "classify" run, class id i = labels[i]."""
        files.write_json(self.labels_path, list(labels))

    def read_labels(self):
        """The class names of a "classify" run (class id i is the i-th)."""
        if not os.path.exists(self.labels_path):
            raise FileNotFoundError(f"{self.labels_path} does not exist; is {self.path} a classifier run?")
        return files.read_json(self.labels_path)

    # -- history -----------------------------------------------------------------------------
    @property
    def history_path(self):
        return self.file(HISTORY_NAME)

    def read_history(self, required=False):
        """The epoch records of history.json.

        Args:
            required: raise when there is no record yet (for the plots); otherwise
                return [] (training starts a history).

        Raises:
            FileNotFoundError: `required` and no folder or no history.json.
            ValueError: a history.json that is not a list of records (or, when
                `required`, an empty one).
        """
        if not os.path.exists(self.history_path):
            if not required:
                return []
            if not os.path.isdir(self.path):
                raise FileNotFoundError(f"{self.path} does not exist: train a run first.")
            raise FileNotFoundError(
                f"{self.history_path} does not exist: training writes it at the end of each "
                "epoch; wait for the first epoch to end."
            )
        records = files.read_json(self.history_path)
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError(f"{self.history_path} must hold a list of epoch records.")
        if required and not records:
            raise ValueError(f"{self.history_path} has no epochs yet: wait for the first epoch to end.")
        return records

    def write_history(self, records):
        """Writes history.json and history.csv (columns: every key seen, in order)."""
        files.write_json(self.history_path, records, indent=1)
        keys = []
        for record in records:
            keys.extend(key for key in record if key not in keys)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        files.write_text(self.file(HISTORY_CSV_NAME), text.getvalue())

    # -- checkpoints, backup, best, final ---------------------------------------------------
    @property
    def checkpoint_dir(self):
        return self.file(CHECKPOINT_DIR)

    def step_checkpoint_path(self, step):
        return self.file(CHECKPOINT_DIR, f"step-{step:08d}.weights.h5")

    def epoch_checkpoint_path(self, epoch):
        return self.file(CHECKPOINT_DIR, f"epoch-{epoch:04d}.weights.h5")

    def checkpoints(self, kind="step"):
        """Checkpoints of `kind` ("step" or "epoch"), oldest first."""
        pattern = {"step": _STEP, "epoch": _EPOCH}[kind]
        if not os.path.isdir(self.checkpoint_dir):
            return []
        found = []
        for name in os.listdir(self.checkpoint_dir):
            match = pattern.match(name)
            if match:
                found.append(Checkpoint(self.file(CHECKPOINT_DIR, name), kind, int(match.group(1))))
        return sorted(found, key=lambda checkpoint: checkpoint.number)

    def save_weights(self, model, path):
        """`model.save_weights(path)` atomically (weights and, if compiled, optimizer state)."""
        with files.atomic_path(path) as temporary:
            model.save_weights(temporary)

    def save_checkpoint(self, model, kind, number, keep, same_as=None):
        """Saves a step or epoch checkpoint, then deletes all but the newest `keep` of its kind.

        Args:
            model: the model (its weights and optimizer state are saved).
            kind: "step" or "epoch".
            number: the step or the epoch.
            keep: how many checkpoints of this kind to keep.
            same_as: a file that already holds exactly this state: it is linked
                instead of written again (written when the file system cannot link).
        """
        path = self.step_checkpoint_path(number) if kind == "step" else self.epoch_checkpoint_path(number)
        with files.atomic_path(path) as temporary:
            try:
                os.link(same_as, temporary)
            except (OSError, TypeError):
                model.save_weights(temporary)
        for old in self.checkpoints(kind)[: max(len(self.checkpoints(kind)) - keep, 0)]:
            os.remove(old.path)
        return path

    @property
    def backup_dir(self):
        return self.file(BACKUP_DIR)

    def read_backup(self):
        """The newest backup {"epoch", "step", "weights": path}, or None."""
        path = self.file(BACKUP_DIR, "state.json")
        if not os.path.exists(path):
            return self._read_legacy_backup()
        state = files.read_json(path)
        return {**state, "weights": self.file(BACKUP_DIR, state["weights"])}

    def _read_legacy_backup(self):
        """The backup of a run trained before state.json (Keras' BackupAndRestore layout)."""
        weights = self.file(BACKUP_DIR, "latest.weights.h5")
        metadata = self.file(BACKUP_DIR, "training_metadata.json")
        if not (os.path.exists(weights) and os.path.exists(metadata)):
            return None
        state = files.read_json(metadata)
        return {"epoch": int(state.get("epoch", 0)), "step": state.get("step"), "weights": weights}

    def write_backup(self, model, epoch, step):
        """Saves the training state: a new weights file first, then state.json naming it.

        A kill at any point leaves state.json naming a complete file (the old one
        is deleted only after the new state.json is in place).
        """
        name = f"state-{step:08d}.weights.h5"
        self.save_weights(model, self.file(BACKUP_DIR, name))
        files.write_json(self.file(BACKUP_DIR, "state.json"), {"epoch": epoch, "step": step, "weights": name})
        for old in os.listdir(self.backup_dir):
            if old != name and (old.startswith("state-") or old in _LEGACY_BACKUP):
                os.remove(self.file(BACKUP_DIR, old))

    def write_best(self, model, epoch, step, val_loss):
        """Saves the weights of a new lowest validation loss (best.weights.h5 + best.json)."""
        self.save_weights(model, self.file(f"{BEST_NAME}.weights.h5"))
        files.write_json(self.file(f"{BEST_NAME}.json"), {"epoch": epoch, "step": step, "val_loss": val_loss})

    def read_best(self):
        """{"epoch", "step", "val_loss"} of best.weights.h5, or None."""
        path = self.file(f"{BEST_NAME}.json")
        if not os.path.exists(path) or not os.path.exists(self.file(f"{BEST_NAME}.weights.h5")):
            return None
        return files.read_json(path)

    @property
    def final_weights_path(self):
        return self.file(FINAL_WEIGHTS_NAME)

    @property
    def model_path(self):
        return self.file(MODEL_NAME)

    def save_final(self, model):
        """Saves model.keras and final.weights.h5 at the end of training."""
        with files.atomic_path(self.model_path) as temporary:
            model.save(temporary)
        self.save_weights(model, self.final_weights_path)

    # -- choosing weights ----------------------------------------------------------------------
    def _history_record(self, epoch=None, step=None):
        for record in reversed(self.read_history()):
            if (epoch is not None and record.get("epoch") == epoch) or (
                step is not None and record.get("step") == step
            ):
                return record
        return {}

    def last_weights(self):
        """The final weights if training ended, else the newest checkpoint."""
        if os.path.exists(self.final_weights_path):
            history = self.read_history()
            last = history[-1] if history else {}
            return Weights(self.final_weights_path, "last", last.get("epoch"), last.get("step"),
                           last.get("val_loss"))
        candidates = [(c.number, c.path) for c in self.checkpoints("step")]
        for checkpoint in self.checkpoints("epoch"):
            step = self._history_record(epoch=checkpoint.number).get("step")
            if step is not None:
                candidates.append((step, checkpoint.path))
        if not candidates:
            raise FileNotFoundError(
                f"{self.path} holds no weights yet ({FINAL_WEIGHTS_NAME} or "
                f"{CHECKPOINT_DIR}/*.weights.h5); train longer, or wait for the first checkpoint."
            )
        step, path = max(candidates)
        record = self._history_record(step=step)
        return Weights(path, "checkpoint", record.get("epoch"), step, record.get("val_loss"))

    def best_weights(self):
        """The weights of the lowest validation loss (None when none were recorded)."""
        best = self.read_best()
        if best is None:
            return None
        return Weights(self.file(f"{BEST_NAME}.weights.h5"), "best", best.get("epoch"),
                       best.get("step"), best.get("val_loss"))

    def average_weights(self):
        """The weights written by `keras-transformer average` (None when there are none)."""
        path = self.file(f"{AVERAGE_NAME}.weights.h5")
        record_path = self.file(f"{AVERAGE_NAME}.json")
        if not (os.path.exists(path) and os.path.exists(record_path)):
            return None
        record = files.read_json(record_path)
        return Weights(path, "average", record.get("epoch"), record.get("step"),
                       record.get("val_loss"), tuple(record.get("sources", ())))

    def current_average_weights(self):
        """The average written at the end of training, if no epoch checkpoint is newer."""
        average = self.average_weights()
        epochs = self.checkpoints("epoch")
        if average is None or not epochs or average.epoch != epochs[-1].number:
            return None
        return average

    def weights(self, choice=None):
        """The weights a command should use.

        Args:
            choice: None for the default: the average of the newest epoch
                checkpoints that training writes when it ends (measured best on the
                bundled corpus, README), else "best"; "best" (the lowest validation
                loss; the last weights for a run that recorded none), "last" (final
                weights, else the newest checkpoint), "average" (average.weights.h5,
                computed from the last `DEFAULT_AVERAGE_LAST` epoch checkpoints when
                missing), or the path of a weights file.

        Returns:
            A `Weights`.
        """
        if choice is None:
            return self.current_average_weights() or self.best_weights() or self.last_weights()
        if choice == "best":
            return self.best_weights() or self.last_weights()
        if choice == "last":
            return self.last_weights()
        if choice == "average":
            return self.average_weights() or self.average(last=DEFAULT_AVERAGE_LAST)
        if not os.path.isfile(choice):
            raise FileNotFoundError(
                f"--weights {choice}: no such file; accepted: {', '.join(WEIGHTS_CHOICES)} or a "
                "weights file."
            )
        return Weights(os.fspath(choice), "file")

    # -- averaging ---------------------------------------------------------------------------------
    def select_checkpoints(self, last=None, best=None):
        """The epoch checkpoints to average: the `last` newest, or the `best` by validation loss.

        Returns:
            A list of (Checkpoint, history record).
        """
        if (last is None) == (best is None):
            raise ValueError("Choose the checkpoints to average: --last N or --best N.")
        count = last if last is not None else best
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"The number of checkpoints must be a positive integer; received {count!r}.")
        available = [(c, self._history_record(epoch=c.number)) for c in self.checkpoints("epoch")]
        if not available:
            raise FileNotFoundError(
                f"{self.checkpoint_dir} holds no epoch checkpoints (epoch-*.weights.h5) to average; "
                "train for a few epochs first (--keep-epoch-checkpoints keeps them)."
            )
        if len(available) < count:
            raise ValueError(
                f"{self.path} keeps {len(available)} epoch checkpoints; received {count}. "
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

    def average(self, last=None, best=None):
        """Averages the model weights (not the optimizer state) of chosen epoch checkpoints.

        Writes average.weights.h5 (model weights only) and average.json (the files
        averaged, their epochs and steps), as OpenNMT-tf's `average_checkpoints`
        does. Loads TensorFlow and the model code.

        Returns:
            The `Weights` written.
        """
        import numpy as np

        chosen = self.select_checkpoints(last=last, best=best)
        model = self.build_model()
        total = None
        for checkpoint, _ in chosen:
            model.load_weights(checkpoint.path)
            values = [np.asarray(value, dtype=np.float64) for value in model.get_weights()]
            total = values if total is None else [a + b for a, b in zip(total, values)]
        model.set_weights([value / len(chosen) for value in total])
        path = self.file(f"{AVERAGE_NAME}.weights.h5")
        self.save_weights(model, path)
        newest = max(chosen, key=lambda item: item[0].number)
        sources = [os.path.relpath(c.path, self.path) for c, _ in chosen]
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
        files.write_json(self.file(f"{AVERAGE_NAME}.json"), record)
        return Weights(path, "average", record["epoch"], record["step"], None, tuple(sources))

    # -- evaluation ----------------------------------------------------------------------------------
    @property
    def evaluation_path(self):
        return self.file(EVALUATION_NAME)

    def read_evaluation(self):
        """The last evaluation.json, or None."""
        return files.read_json(self.evaluation_path) if os.path.exists(self.evaluation_path) else None

    def write_evaluation(self, record):
        files.write_json(self.evaluation_path, record)

    # -- loading -------------------------------------------------------------------------------------
    def build_model(self, config=None):
        """The run's model, freshly initialised, from its config.json (`build_run_model`)."""
        return build_run_model(config or self.read_config())

    _build_model = build_model

    def load(self, weights=None, task=None, command=None):
        """The model (with the chosen weights), tokenizers and labels of the run, as a `Run`.

        Args:
            weights: see `weights`.
            task: when given, the task the caller needs: another run's task is a
                one-line `ValueError` naming `command`.
            command: the command named in that error.
        """
        from keras_transformer.data.tokenizer import SubwordTokenizer

        config = self.read_config()
        if task is not None:
            self.require_task(task, command or task, config)
        chosen = self.weights(weights)
        model = self.build_model(config)
        model.load_weights(chosen.path)
        found = task_of(config)
        if found == "translate":
            source, target = self.tokenizers(config)
            return Run(self.path, config, model, source, target, chosen)
        tokenizer = SubwordTokenizer.from_file(self.tokenizer_path(config))
        labels = tuple(self.read_labels()) if found == "classify" else ()
        return Run(self.path, config, model, None, None, chosen, task=found, tokenizer=tokenizer,
                   labels=labels)


@dataclasses.dataclass
class Run:
    """A trained model read from its run folder (`RunDir.load`).

    Attributes:
        path: the run folder.
        config: its config.json.
        model: the model with the chosen weights (a `Seq2SeqTransformer` for
            "translate"; the functional model of `build_language_model` or
            `build_classifier` otherwise).
        source_tokenizer: "translate": the source `SubwordTokenizer` (else None).
        target_tokenizer: "translate": the target `SubwordTokenizer` (else None).
        weights: the `Weights` loaded.
        task: "translate", "lm" or "classify".
        tokenizer: "lm" and "classify": the one `SubwordTokenizer` (else None).
        labels: "classify": the class names, class id i = labels[i] (else ()).
    """

    path: str
    config: dict
    model: object
    source_tokenizer: object
    target_tokenizer: object
    weights: Weights
    task: str = DEFAULT_TASK
    tokenizer: object = None
    labels: tuple = ()

    @property
    def weights_path(self):
        return self.weights.path

    @property
    def max_source_length(self):
        return self.config["data"]["max_source_length"]

    @property
    def max_length(self):
        """"lm" and "classify": ids per example the model was trained on."""
        return self.config["data"]["max_length"]

    def split(self, part):
        """The (sources, targets) of the "train", "validation" or "test" split."""
        return RunDir(self.path).read_split(part)


def read_config(run_dir):
    """The parsed config.json of a run folder (`RunDir(run_dir).read_config()`)."""
    return RunDir(run_dir).read_config()


def task_of(config):
    """The task of a parsed config.json ("translate" when it names none)."""
    task = config.get("task", DEFAULT_TASK)
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r} in a run's config.json; accepted: {list(TASKS)}.")
    return task


def build_run_model(config):
    """The model of a run's parsed config.json, freshly initialised.

    "translate": `Seq2SeqTransformer(model)`; "lm": `LanguageModel(model)`;
    "classify": `EncoderClassifier(model, num_classes=data.num_classes)`, where
    `model` is the stored `BackboneConfig`.
    """
    model_config = config["model"]
    task = task_of(config)
    if task == "translate":
        from keras_transformer.models.transformer import Seq2SeqTransformer

        return Seq2SeqTransformer(model_config)
    if task == "lm":
        from keras_transformer.models.language_model import LanguageModel

        return LanguageModel(model_config)
    from keras_transformer.models.classifier import EncoderClassifier

    return EncoderClassifier(model_config, num_classes=config["data"]["num_classes"])


def load_run(run_dir, weights=None, task=None, command=None):
    """Loads a run folder's model and tokenizers (`RunDir(run_dir).load(weights, task, command)`).

    Args:
        run_dir: the run folder.
        weights: None (the default choice), "best", "last", "average" or a weights
            file (see `RunDir.weights`).
        task: the task the caller needs (None: any); another is a one-line error.
        command: the command named in that error.

    Returns:
        A `Run`.
    """
    return RunDir(run_dir).load(weights, task=task, command=command)


def add_weights_argument(parser):
    """The `--weights` option of every command that reads a run."""
    parser.add_argument(
        "--weights", default=None,
        help="weights of the run: best (lowest validation loss; the last weights if none "
        "was recorded), last (final, else the newest checkpoint), average (average.weights.h5, "
        "computed from the last 5 epoch checkpoints if missing), or a weights file (default: the "
        "average that training writes when it ends, while no newer checkpoint exists; else best)",
    )
