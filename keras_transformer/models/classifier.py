"""An encoder-only (BERT-style) sequence classifier from the translator's layers.

Shape notation: B batch, T length, C classes, M model width.
"""

import keras

from keras_transformer.layers.encoder import EncoderBlock
from keras_transformer.layers.padding_mask import PaddingMask
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.models.assembly import block_options
from keras_transformer.models.assembly import float32_logits
from keras_transformer.models.assembly import output_norm
from keras_transformer.models.assembly import resolve_config
from keras_transformer.models.assembly import token_embedding
from keras_transformer.models.config import TransformerConfig
from keras_transformer.ops import checks


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderClassifier(keras.Model):
    """Token embedding + positions → encoder blocks → (final LayerNorm in pre-LN)
    → mean over the real tokens → dropout → dense logits.

    Pooling: the mean of the last layer's outputs over the real tokens (ids != 0)
    only, so appending padding to a row never changes its logits (no CLS token).

    Input: `tokens` (B, T) int32, 0 = padding. Output: logits (B, C) in float32
    (also under a mixed-precision policy).

    Reads from the config: num_encoder_layers, d_model, num_heads, d_ff, dropout,
    attention_dropout, activation_dropout, activation, norm_first,
    layer_norm_epsilon, max_length, positional_encoding, window (an int, or the
    translator's per-layer list, whose encoder part is used) and normalize. The
    vocabulary size is `vocab_size`; decoder settings are not used.

    Args:
        config: a `TransformerConfig` (or its dict).
        vocab_size: V, token ids 0 .. V-1.
        num_classes: C.
        **kwargs: `keras.Model` arguments such as `name`.
    """

    def __init__(self, config, vocab_size, num_classes, **kwargs):
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        vocab_size = checks.check_positive_int("vocab_size", vocab_size)
        num_classes = checks.check_positive_int("num_classes", num_classes)
        tokens = keras.Input(shape=(None,), dtype="int32", name="tokens")
        padding_mask = PaddingMask(name="padding_mask")(tokens)
        # Tied: no output projection, the plain (V, M) table.
        embedding = token_embedding(config, vocab_size, tie_weights=True, name="token_embedding")
        x = PositionalEncoding(
            max_length=config.max_length, kind=config.positional_encoding, name="positions"
        )(embedding(tokens))
        x = keras.layers.Dropout(config.dropout, name="embedding_dropout")(x)
        for i, window in enumerate(config.encoder_windows()):
            x = EncoderBlock(**block_options(config, window), name=f"encoder_block_{i}")(
                x, padding_mask=padding_mask
            )
        final_norm = output_norm(config, "output_norm")
        if final_norm is not None:
            x = final_norm(x)
        pooled = keras.layers.GlobalAveragePooling1D(name="mean_pooling")(x, mask=padding_mask)
        pooled = keras.layers.Dropout(config.dropout, name="pooled_dropout")(pooled)
        logits = keras.layers.Dense(num_classes, name="classifier_head")(pooled)
        super().__init__(
            inputs=tokens, outputs=float32_logits()(logits), **{"name": "classifier", **kwargs}
        )
        self.config = config
        self.vocab_size = vocab_size
        self.num_classes = num_classes

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "vocab_size": self.vocab_size,
            "num_classes": self.num_classes,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def build_classifier(config="tiny", vocab_size=None, num_classes=None, **overrides):
    """Builds an encoder-only `EncoderClassifier` (functional Keras model).

    Args:
        config: a `TransformerConfig`, a dict of its fields, or a preset name
            ("tiny", "small", "base", "big"): the translator's presets.
        vocab_size: V, the vocabulary size (required).
        num_classes: C, the number of labels (required).
        **overrides: config fields to change, e.g. `num_encoder_layers=4`.

    Returns:
        A `EncoderClassifier`: `tokens` (B, T) int32, 0 = padding → logits (B, C)
        float32, from the mean over real tokens.

    Example:
        >>> model = build_classifier("tiny", vocab_size=100, num_classes=3)
        >>> model(keras.ops.ones((2, 7), "int32")).shape
        (2, 3)
    """
    if vocab_size is None or num_classes is None:
        raise ValueError(
            "build_classifier needs `vocab_size` and `num_classes`, positive ints; received "
            f"vocab_size={vocab_size!r}, num_classes={num_classes!r}."
        )
    return EncoderClassifier(resolve_config(config, overrides), vocab_size, num_classes)
