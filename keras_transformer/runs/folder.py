"""The run folder: where each file is, the run's config, and each task's data files.

`RunFolder` owns every path of a run folder; no other module builds a path inside
a run. Its config.json is read in one way only: `RunFolder(path).config`. A run
trains one task (`RunFolder.task`): "translate" (a `Seq2SeqTransformer`), "lm" (a
decoder-only language model) or "classify" (an encoder classifier). The layout:

    config.json              {"format_version", "task", "preset",
                              "model": the `BackboneConfig` (`to_dict`): a translator's
                                       has an encoder and a decoder, an lm's a decoder,
                                       a classifier's an encoder, each stack's
                                       vocab_size the tokenizer's,
                              "data": corpus, split and tokenizer settings,
                              "training": TrainingConfig fields, "device": what was in effect}
    splits/{validation,test}.tsv   the held-out parts (at most `max_held_out` examples
                             each), one example a line; the training part is streamed
                             from the corpus files config.json records (paths, sizes,
                             SHA-256), never copied
    splits/dictionary.tsv    translate: the dictionary entries a run trains on beside the
                             corpus (`dictionary_path`)
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
    (every task: `tokenizer_files()` lists the tokenizer model files, to ship as an
    export's assets.)
    backup/state.json, backup/state-<step>.weights.h5
                             the newest training state (`runs.checkpoints`)
    checkpoints/step-<step>.weights.h5     the newest `keep_checkpoints` step checkpoints
    checkpoints/epoch-<epoch>.weights.h5   the newest `keep_epoch_checkpoints` epoch ends
    best.weights.h5, best.json       the weights of the lowest validation loss so far
                                     (epoch, step, val_loss)
    average.weights.h5, average.json the average of chosen epoch checkpoints (`runs.weights`)
    final.weights.h5, model.keras    the state when training last ended
    history.json, history.csv        one record per epoch (`runs.history`); logs/ TensorBoard events
    evaluation.json                  the last `evaluate` of a split
    workers/<task>/                  private state of non-chief workers (multi-worker runs)

Every file is written atomically (`keras_transformer.files`). The parts of a run
folder, each in its own module: the checkpoint store (`folder.checkpoints`,
`runs.checkpoints`), the history (`folder.history`, `runs.history`), the choice of
weights and their averaging (`folder.weights(choice)`, `runs.weights`); the model
with its tokenizers: `runs.loading.load_run`.

This module imports only the standard library at import time.

Example:
    >>> folder = RunFolder("runs/zh-en")  # doctest: +SKIP
    >>> folder.task, folder.config["data"]["target_language"]  # doctest: +SKIP
    ('translate', 'en')
    >>> folder.weights("best")  # doctest: +SKIP
    Weights(path='runs/zh-en/best.weights.h5', kind='best', epoch=11, step=1150, val_loss=2.79)
"""

import os
import re

from keras_transformer import files
from keras_transformer.constants import TASKS
from keras_transformer.runs.checkpoints import CheckpointStore
from keras_transformer.runs.history import History
from keras_transformer.runs.weights import choose_weights

CONFIG_NAME = "config.json"
SPLIT_DIR = "splits"
SPLITS = ("train", "validation", "test")
# The parts a run folder stores; the training part streams from the corpus's files.
HELD_OUT = ("validation", "test")
DICTIONARY_NAME = "dictionary.tsv"
BACKUP_DIR = "backup"
BACKUP_STATE_NAME = "state.json"
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
TOKENIZER_NAME = "tokenizer.model"
# The "data" entries of config.json naming tokenizer files: a translator's two, or the one
# of a language model or a classifier.
TOKENIZER_ENTRIES = ("source_tokenizer", "target_tokenizer", "tokenizer")
LABELS_NAME = "labels.json"
TASK_NAMES = {"translate": "translation", "lm": "language-model", "classify": "classifier"}
# The checkpoint files, by kind: the optimizer step or the epoch in each name.
CHECKPOINT_NAMES = {"step": "step-{:08d}.weights.h5", "epoch": "epoch-{:04d}.weights.h5"}
_CHECKPOINT_PATTERNS = {"step": re.compile(r"^step-(\d{8})\.weights\.h5$"),
                        "epoch": re.compile(r"^epoch-(\d{4,})\.weights\.h5$")}


def task_of(config):
    """The task a parsed config.json names ("translate", "lm" or "classify")."""
    task = config.get("task")
    if task not in TASKS:
        raise ValueError(f"A run's config.json names task {task!r}; accepted: {list(TASKS)}.")
    return task


class RunFolder:
    """A run folder: every path in it, its config, and each task's data files.

    Args:
        path: the folder (it need not exist yet).

    Attributes:
        checkpoints: its `CheckpointStore` (checkpoints, backup, best, final weights).
        history: its `History` (history.json, history.csv).
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.checkpoints = CheckpointStore(self)
        self.history = History(self)

    def __repr__(self):
        return f"RunFolder({self.path!r})"

    def file(self, *parts):
        """The path of a file or folder inside the run."""
        return os.path.join(self.path, *parts)

    def worker(self, name):
        """The private run folder of a non-chief worker."""
        return RunFolder(self.file(WORKERS_DIR, name))

    # -- config --------------------------------------------------------------------------
    @property
    def config_path(self):
        return self.file(CONFIG_NAME)

    def exists(self):
        """Whether the folder holds a run (its config.json)."""
        return os.path.exists(self.config_path)

    @property
    def config(self):
        """The parsed config.json (read on each access), with a clear error when this is
        not a run folder."""
        if not self.exists():
            raise FileNotFoundError(
                f"{self.config_path} does not exist: {self.path} is not a run folder. Create one "
                "with `keras-transformer train --run DIR ...`."
            )
        return files.read_json(self.config_path)

    def write_config(self, config):
        files.write_json(self.config_path, config)

    @property
    def task(self):
        """The run's task: "translate", "lm" or "classify"."""
        return task_of(self.config)

    def read_training_config(self):
        """The stored `TrainingConfig` (None before the first `train`)."""
        from keras_transformer.training.config import TrainingConfig

        stored = self.config.get("training") if self.exists() else None
        return None if stored is None else TrainingConfig.from_dict(stored)

    def require_task(self, task, command):
        """Raises a one-line `ValueError` when the run's task is not `task` (for `command`)."""
        found = self.task
        if found != task:
            raise ValueError(
                f"{self.path} is a {TASK_NAMES[found]} run (task {found}); `keras-transformer "
                f"{command}` needs a {TASK_NAMES[task]} run (task {task})."
            )

    # -- weights -------------------------------------------------------------------------------
    def weights(self, choice=None, build_model=None):
        """The `Weights` a command should use (`runs.weights.choose_weights`)."""
        return choose_weights(self, choice, build_model)

    @property
    def checkpoint_dir(self):
        return self.file(CHECKPOINT_DIR)

    def checkpoint_path(self, kind, number):
        """The file of the "step" or "epoch" checkpoint `number`."""
        return self.file(CHECKPOINT_DIR, CHECKPOINT_NAMES[kind].format(number))

    def checkpoint_number(self, kind, name):
        """The step or epoch in a checkpoint file's name of `kind`; None for other names."""
        match = _CHECKPOINT_PATTERNS[kind].match(name)
        return int(match.group(1)) if match else None

    @property
    def backup_dir(self):
        return self.file(BACKUP_DIR)

    @property
    def backup_state_path(self):
        """backup/state.json: the epoch, the step and the name of the newest backup file."""
        return self.file(BACKUP_DIR, BACKUP_STATE_NAME)

    def backup_weights_name(self, step):
        return f"state-{step:08d}.weights.h5"

    @property
    def best_weights_path(self):
        return self.file(f"{BEST_NAME}.weights.h5")

    @property
    def best_record_path(self):
        return self.file(f"{BEST_NAME}.json")

    @property
    def average_weights_path(self):
        return self.file(f"{AVERAGE_NAME}.weights.h5")

    @property
    def average_record_path(self):
        return self.file(f"{AVERAGE_NAME}.json")

    @property
    def final_weights_path(self):
        return self.file(FINAL_WEIGHTS_NAME)

    @property
    def model_path(self):
        return self.file(MODEL_NAME)

    @property
    def history_path(self):
        return self.file(HISTORY_NAME)

    @property
    def history_csv_path(self):
        return self.file(HISTORY_CSV_NAME)

    @property
    def log_dir(self):
        """logs/: TensorBoard events."""
        return self.file(LOG_DIR)

    # -- splits ----------------------------------------------------------------------------
    def split_path(self, part):
        """The file of a held-out part ("validation" or "test")."""
        if part == "train":
            raise ValueError(
                f"{self.path} stores no training split: training streams from the corpus files "
                "its config.json records (\"data\": \"files\"); use --split validation or test."
            )
        if part not in HELD_OUT:
            raise ValueError(f"Unknown split {part!r}; accepted: {list(HELD_OUT)}.")
        return self.file(SPLIT_DIR, f"{part}.tsv")

    @property
    def dictionary_path(self):
        """splits/dictionary.tsv: a translation run's dictionary entries, source<TAB>target."""
        return self.file(SPLIT_DIR, DICTIONARY_NAME)

    def write_dictionary(self, pairs):
        """Writes the dictionary entries a translation run trains on (`SentencePair`s)."""
        files.write_lines(self.dictionary_path, [f"{p.source}\t{p.target}" for p in pairs])

    def _existing_split(self, part):
        path = self.split_path(part)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} does not exist; is {self.path} a run folder?")
        return path

    def write_split(self, part, pairs):
        """Writes a "translate" split: `SentencePair`s as source<TAB>target lines."""
        files.write_lines(self.split_path(part), [f"{p.source}\t{p.target}" for p in pairs])

    def read_split(self, part):
        """The (sources, targets) of a "translate" split: "train", "validation" or "test"."""
        from keras_transformer.data.corpus import read_tsv
        from keras_transformer.data.corpus import sources_and_targets

        path = self._existing_split(part)
        if os.path.getsize(path) == 0:
            return [], []
        return sources_and_targets(read_tsv(path, 0, 1))

    def write_texts(self, part, texts):
        """Writes an "lm" split: one text a line."""
        files.write_lines(self.split_path(part), list(texts))

    def read_texts(self, part):
        """The texts of an "lm" split."""
        from keras_transformer.data.corpus import TextFile

        path = self._existing_split(part)
        return TextFile(path).read() if os.path.getsize(path) else []

    def write_labelled(self, part, labels, texts):
        """Writes a "classify" split: label<TAB>text lines."""
        files.write_lines(self.split_path(part), [f"{label}\t{text}" for label, text in zip(labels, texts)])

    def read_labelled(self, part):
        """The (labels, texts) of a "classify" split."""
        from keras_transformer.data.corpus import LabelledFile

        path = self._existing_split(part)
        return LabelledFile(path).read() if os.path.getsize(path) else ([], [])

    # -- tokenizers and labels -----------------------------------------------------------------
    def tokenizer_paths(self):
        """(source, target) SentencePiece model files of a "translate" run."""
        config = self.config
        if "source_tokenizer" not in config["data"]:
            raise ValueError(
                f"{self.path} is a {TASK_NAMES[task_of(config)]} run: it has one tokenizer "
                "(`tokenizer_path`), not a source and a target one."
            )
        data = config["data"]
        return self.file(data["source_tokenizer"]), self.file(data["target_tokenizer"])

    def tokenizers(self):
        """The (source, target) `SubwordTokenizer`s of a "translate" run, as sentences to
        translate meet them: the source one puts the run's `source_prefix` (a
        bidirectional run's direction tag, else "") before each."""
        from keras_transformer.data.tokenizer import SubwordTokenizer

        source_path, target_path = self.tokenizer_paths()
        prefix = self.config["data"]["source_prefix"]
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

    def tokenizer_path(self):
        """The one SentencePiece model file of an "lm" or "classify" run (tokenizer.model)."""
        config = self.config
        if "tokenizer" not in config["data"]:
            raise ValueError(f"{self.path} is a translation run: it has a source and a target tokenizer.")
        return self.file(config["data"]["tokenizer"])

    def tokenizer(self):
        """The one `SubwordTokenizer` of an "lm" or "classify" run."""
        from keras_transformer.data.tokenizer import SubwordTokenizer

        return SubwordTokenizer.from_file(self.tokenizer_path())

    def tokenizer_files(self):
        """Every tokenizer model file of the run, whatever its task (an export's assets)."""
        data = self.config["data"]
        return [self.file(data[entry]) for entry in TOKENIZER_ENTRIES if entry in data]

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

    # -- evaluation ----------------------------------------------------------------------------
    @property
    def evaluation_path(self):
        return self.file(EVALUATION_NAME)

    def read_evaluation(self):
        """The last evaluation.json, or None."""
        return files.read_json(self.evaluation_path) if os.path.exists(self.evaluation_path) else None

    def write_evaluation(self, record):
        files.write_json(self.evaluation_path, record)
