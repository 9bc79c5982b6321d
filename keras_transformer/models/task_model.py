"""The model of a task, built from a run's (or a preset folder's) parsed config.

"translate": `Seq2SeqTransformer(model)`; "lm": `build_language_model(model,
vocab_size=data.vocab_size)`; "classify": `build_classifier(model,
vocab_size=data.vocab_size, num_classes=data.num_classes)`, where `model` is the
stored `TransformerConfig`. The run folder's layout: `keras_transformer.runs.folder`.
"""

from keras_transformer.constants import TASKS


def build_task_model(config):
    """The model of a parsed run config, freshly initialised (not compiled).

    Args:
        config: a run's config.json as a dict: its "task", "model" (the
            `TransformerConfig` fields) and "data" (for "lm" and "classify": the
            vocabulary size and the number of classes).

    Returns:
        A Keras model.
    """
    from keras_transformer.models.config import TransformerConfig

    task = config.get("task")
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r} in a run's config; accepted: {list(TASKS)}.")
    model_config = TransformerConfig.from_dict(config["model"])
    if task == "translate":
        from keras_transformer.models.transformer import Seq2SeqTransformer

        return Seq2SeqTransformer(model_config)
    data = config["data"]
    if task == "lm":
        from keras_transformer.models.language_model import build_language_model

        return build_language_model(model_config, vocab_size=data["vocab_size"])
    from keras_transformer.models.classifier import build_classifier

    return build_classifier(model_config, vocab_size=data["vocab_size"], num_classes=data["num_classes"])
