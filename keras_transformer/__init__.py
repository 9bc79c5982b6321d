"""keras-transformer: build, train, export and serve Transformers with Keras 3 on TensorFlow.

The public names load lazily, so `keras_transformer.serving` (which needs only
TensorFlow and the serving libraries) never imports Keras or the model code.
"""

import importlib
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"

_LAZY = {
    "DecoderBlock": "keras_transformer.layers",
    "EncoderBlock": "keras_transformer.layers",
    "FeedForward": "keras_transformer.layers",
    "MultiHeadSelfAttention": "keras_transformer.layers",
    "PaddingMask": "keras_transformer.layers",
    "PositionalEncoding": "keras_transformer.layers",
    "Seq2SeqTransformer": "keras_transformer.models",
    "TransformerConfig": "keras_transformer.models",
    "build_transformer": "keras_transformer.models",
    "preset": "keras_transformer.models",
    "SequenceSearch": "keras_transformer.decoding",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'keras_transformer' has no attribute {name!r}")
