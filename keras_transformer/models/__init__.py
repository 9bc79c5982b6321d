"""Floor 2: models assembled from the layers.

Names load lazily: `config` (presets, `BackboneConfig`) imports neither Keras
nor TensorFlow, and the command line reads it before deciding to load them.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "LanguageModel": "language_model",
    "build_language_model": "language_model",
    "EncoderClassifier": "classifier",
    "build_classifier": "classifier",
    "BackboneConfig": "config",
    "DECODER_ONLY": "config",
    "ENCODER_DECODER": "config",
    "ENCODER_ONLY": "config",
    "PRESETS": "config",
    "StackConfig": "config",
    "TransformerBackbone": "backbone",
    "preset": "config",
    "Seq2SeqTransformer": "transformer",
    "build_transformer": "transformer",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
