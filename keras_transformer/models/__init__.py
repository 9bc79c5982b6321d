"""Floor 2: models assembled from the layers.

Names load lazily: `config` (presets, `TransformerConfig`) imports neither Keras
nor TensorFlow, and the command line reads it before deciding to load them.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "LanguageModel": "language_model",
    "build_language_model": "language_model",
    "TextClassifier": "classifier",
    "build_classifier": "classifier",
    "PRESETS": "config",
    "TransformerConfig": "config",
    "preset": "config",
    "Seq2SeqTransformer": "transformer",
    "build_transformer": "transformer",
    "build_task_model": "task_model",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
