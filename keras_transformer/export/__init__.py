"""Floor 3: the exported modules (`TranslationModule`, `ClassificationModule`, ...) and
the versioned writer.

Names load lazily, so that `keras-transformer export --help` imports no TensorFlow.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "ClassificationModule": "module",
    "ExportModule": "module",
    "LanguageModelModule": "module",
    "TranslationModule": "module",
    "check_model_name": "writer",
    "write_export": "writer",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
