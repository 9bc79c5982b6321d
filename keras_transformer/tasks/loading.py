"""Which task a folder holds, and loading it: `keras_transformer.load`.

The registry of the task classes lives here, above them: `task_for` answers with the
class of a task name or of a parsed config.json, so that the training loop and the
commands ask the task object instead of comparing task names.
"""

import os

from keras_transformer.tasks.base import describe_path
from keras_transformer.tasks.base import read_model_config
from keras_transformer.tasks.causal_lm import CausalLM
from keras_transformer.tasks.text_classifier import TextClassifier
from keras_transformer.tasks.translator import Translator

TASK_CLASSES = (Translator, CausalLM, TextClassifier)


def task_names():
    """The task names a run or a preset may record: translate, lm, classify."""
    return tuple(task.name for task in TASK_CLASSES)


def task_for(config_or_name):
    """The `Task` subclass of a task name, or of a parsed run or preset config.json."""
    name = config_or_name.get("task") if isinstance(config_or_name, dict) else config_or_name
    for task in TASK_CLASSES:
        if task.name == name:
            return task
    raise ValueError(f"Unknown task {name!r}; accepted: {list(task_names())}.")


def load(path, weights=None, **options):
    """The task object of a model folder: its task is read from what is at `path`.

    Args:
        path: a preset folder, a run folder, or an export version folder (or model
            base); see `keras_transformer.tasks.base`. A built-in preset name needs
            its task: `Translator.from_preset("tiny", ...)`.
        weights: a run's weights: None (its default), "best", "last", "average" or
            a weights file (`RunFolder.weights`); not for presets and exports.
        **options: the task's own loading options.

    Returns:
        A `Translator`, `CausalLM` or `TextClassifier`.

    Example:
        >>> translator = keras_transformer.load("runs/zh-en")  # doctest: +SKIP
        >>> translator.translate(["我们来试试。"])  # doctest: +SKIP
        ["Let's try."]
    """
    path = os.fspath(path)
    kind = describe_path(path)
    if kind == "preset name":
        raise ValueError(
            f"{path} is a built-in preset name: it says the model's shape, not its task; use "
            f"Translator.from_preset({path!r}, ...), CausalLM.from_preset or "
            "TextClassifier.from_preset."
        )
    if kind == "export":
        from keras_transformer.evaluation.translators import read_manifest
        from keras_transformer.evaluation.translators import resolve_saved_model

        task = read_manifest(resolve_saved_model(path)).get("task")
    elif kind == "run":
        from keras_transformer.runs.folder import RunFolder

        task = RunFolder(path).config.get("task")
    else:
        task = read_model_config(path)[0].get("task")
    return task_for(task).open(path, weights=weights, **options)
