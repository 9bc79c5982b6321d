"""Floor 1: the Transformer's layers, each registered serializable."""

from keras_transformer.layers.attention import MultiHeadSelfAttention
from keras_transformer.layers.decoder import DecoderBlock
from keras_transformer.layers.encoder import EncoderBlock
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.head_projection import HeadProjection
from keras_transformer.layers.normalization import LayerNormalization
from keras_transformer.layers.padding_mask import PaddingMask
from keras_transformer.layers.positional_encoding import PositionalEncoding

__all__ = [
    "DecoderBlock",
    "EncoderBlock",
    "FeedForward",
    "HeadProjection",
    "LayerNormalization",
    "MultiHeadSelfAttention",
    "PaddingMask",
    "PositionalEncoding",
]
