"""A trained model read from its run folder: the model with chosen weights, its tokenizers, labels.

`load_run(path)` builds the run's model from its config (`models.task_model`),
loads the weights `choose_weights` picks and reads the task's tokenizers (and, for
a classifier, its labels). This module imports only the standard library at
import time; `load_run` loads TensorFlow and the model code.

Example:
    >>> run = load_run("runs/zh-en", weights="best")  # doctest: +SKIP
    >>> run.task, run.weights.kind  # doctest: +SKIP
    ('translate', 'best')
"""

import dataclasses

from keras_transformer.runs.folder import RunFolder
from keras_transformer.runs.weights import Weights


@dataclasses.dataclass
class Run:
    """A trained model read from its run folder (`load_run`).

    Attributes:
        path: the run folder.
        config: its config.json.
        model: the model with the chosen weights (a `Seq2SeqTransformer` for
            "translate"; the functional model of `build_language_model` or
            `build_classifier` otherwise).
        weights: the `Weights` loaded.
        task: "translate", "lm" or "classify".
        source_tokenizer: "translate": the source `SubwordTokenizer` (else None).
        target_tokenizer: "translate": the target `SubwordTokenizer` (else None).
        tokenizer: "lm" and "classify": the one `SubwordTokenizer` (else None).
        labels: "classify": the class names, class id i = labels[i] (else ()).
    """

    path: str
    config: dict
    model: object
    weights: Weights
    task: str
    source_tokenizer: object = None
    target_tokenizer: object = None
    tokenizer: object = None
    labels: tuple = ()

    @property
    def folder(self):
        """The `RunFolder` it was read from."""
        return RunFolder(self.path)

    @property
    def max_source_length(self):
        """"translate": source ids the model reads at most."""
        return self.config["data"]["max_source_length"]

    @property
    def max_length(self):
        """"lm" and "classify": ids per example the model was trained on."""
        return self.config["data"]["max_length"]

    def split(self, part):
        """The (sources, targets) of the "train", "validation" or "test" split of a translation run."""
        return self.folder.read_split(part)


def load_run(run, weights=None, task=None, command=None):
    """Loads a run folder's model (with the chosen weights), tokenizers and labels.

    Args:
        run: the run folder (a path or a `RunFolder`).
        weights: None (the default choice), "best", "last", "average" or a weights
            file (`RunFolder.weights`).
        task: the task the caller needs (None: any); another is a one-line
            `ValueError` naming `command`.
        command: the command named in that error (default: `task`).

    Returns:
        A `Run`.
    """
    from keras_transformer.tasks.loading import task_for

    folder = run if isinstance(run, RunFolder) else RunFolder(run)
    config = folder.config
    if task is not None:
        folder.require_task(task, command or task)
    recipe = task_for(config)
    chosen = folder.weights(weights, build_model=lambda: recipe.build_model(config))
    loaded = recipe.from_folder(folder.path, config, chosen.path, weights=chosen)
    # The task object knows its tokenizers (and a classifier its labels).
    return Run(folder.path, config, loaded.model, chosen, loaded.name,
               source_tokenizer=getattr(loaded, "source_tokenizer", None),
               target_tokenizer=getattr(loaded, "target_tokenizer", None),
               tokenizer=getattr(loaded, "tokenizer", None),
               labels=tuple(getattr(loaded, "labels", ())))
