"""keras-transformer: build, train, export and serve Transformers with Keras 3 on TensorFlow.

The public names load lazily, so `keras_transformer.serving` (which needs only
TensorFlow and the serving libraries) never imports Keras or the model code.
"""

import os

from keras_transformer.lazy import lazy_getattr

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.2.0"

_LAZY = {
    # The tasks: what a user loads, fine-tunes, saves and calls in strings.
    "Task": "tasks",
    "Translator": "tasks",
    "CausalLM": "tasks",
    "TextClassifier": "tasks",
    "load": "tasks",
    # The models and layers they are built from.
    "LanguageModel": "models",
    "EncoderClassifier": "models",
    "build_language_model": "models",
    "build_classifier": "models",
    "DecoderBlock": "layers",
    "EncoderBlock": "layers",
    "FeedForward": "layers",
    "MultiHeadSelfAttention": "layers",
    "PaddingMask": "layers",
    "PositionalEncoding": "layers",
    "Seq2SeqTransformer": "models",
    "BackboneConfig": "models",
    "StackConfig": "models",
    "TransformerBackbone": "models",
    "build_transformer": "models",
    "preset": "models",
    "Generator": "decoding",
    "SequenceSearch": "decoding",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
