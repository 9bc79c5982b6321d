"""keras-transformer: build, train, export and serve Transformers with Keras 3 on TensorFlow."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_transformer.layers import DecoderBlock  # noqa: E402
from keras_transformer.layers import EncoderBlock  # noqa: E402
from keras_transformer.layers import FeedForward  # noqa: E402
from keras_transformer.layers import MultiHeadSelfAttention  # noqa: E402
from keras_transformer.layers import PositionalEncoding  # noqa: E402
from keras_transformer.models import Seq2SeqTransformer  # noqa: E402
from keras_transformer.models import TransformerConfig  # noqa: E402
from keras_transformer.models import build_transformer  # noqa: E402
from keras_transformer.models import preset  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "DecoderBlock",
    "EncoderBlock",
    "FeedForward",
    "MultiHeadSelfAttention",
    "PositionalEncoding",
    "Seq2SeqTransformer",
    "TransformerConfig",
    "build_transformer",
    "preset",
]
