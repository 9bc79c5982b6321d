"""Floor 2: models assembled from the layers."""

from keras_transformer.models.config import PRESETS
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.config import preset
from keras_transformer.models.transformer import Seq2SeqTransformer
from keras_transformer.models.transformer import build_transformer

__all__ = ["PRESETS", "Seq2SeqTransformer", "TransformerConfig", "build_transformer", "preset"]
