"""Floor 3: the tasks — a model with its tokenizers, the one place that knows which task.

`Translator`, `CausalLM` and `TextClassifier` load from a preset name, a preset
folder, a run or an export (`from_preset`, `keras_transformer.load`), fine-tune
(`fit` on a `tf.data.Dataset` of raw strings), save (`save_to_preset`) and answer
in strings (`translate`, `generate`, `classify`). Names load lazily.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "Task": "base",
    "load": "loading",
    "task_for": "loading",
    "task_names": "loading",
    "describe_path": "base",
    "read_model_config": "base",
    "Translator": "translator",
    "CausalLM": "causal_lm",
    "TextClassifier": "text_classifier",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
