"""An encoder-only (BERT-style) sequence classifier on the `TransformerBackbone`.

Shape notation: B batch, T length, C classes, M model width.
"""

import keras

from keras_transformer.models.assembly import float32_logits
from keras_transformer.models.assembly import resolve_config
from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.models.config import ENCODER_ONLY
from keras_transformer.ops import checks


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderClassifier(keras.Model):
    """An encoder-only `TransformerBackbone` (token embedding + positions →
    encoder blocks → final LayerNorm in pre-LN) and the pooled classifier head:
    the mean over the real tokens → dropout → dense logits.

    Pooling: the mean of the last layer's outputs over the real tokens (ids != 0)
    only, so appending padding to a row never changes its logits (no CLS token).

    Input: `tokens` (B, T) int32, 0 = padding. Output: logits (B, C) in float32
    (also under a mixed-precision policy).

    Args:
        config: an encoder-only `BackboneConfig` (or its dict), or a
            `TransformerBackbone` of that shape to build on.
        num_classes: C.
        **kwargs: `keras.Model` arguments such as `name`.
    """

    def __init__(self, config, num_classes, **kwargs):
        backbone = config if isinstance(config, TransformerBackbone) else None
        config = resolve_config(config, ENCODER_ONLY, {})
        num_classes = checks.check_positive_int("num_classes", num_classes)
        self.backbone = backbone or TransformerBackbone(config)
        self.config = config
        self.num_classes = num_classes
        tokens = keras.Input(shape=(None,), dtype="int32", name="tokens")
        outputs = self.backbone({"encoder_tokens": tokens})
        pooled = keras.layers.GlobalAveragePooling1D(name="mean_pooling")(
            outputs["encoder_sequence_output"], mask=outputs["encoder_padding_mask"]
        )
        pooled = keras.layers.Dropout(config.dropout, name="pooled_dropout")(pooled)
        logits = keras.layers.Dense(num_classes, name="classifier_head")(pooled)
        super().__init__(
            inputs=tokens, outputs=float32_logits()(logits), **{"name": "classifier", **kwargs}
        )

    @property
    def vocab_size(self):
        """V, the encoder's vocabulary."""
        return self.config.encoder.vocab_size

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "num_classes": self.num_classes,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def build_classifier(config="tiny", vocab_size=None, num_classes=None, **settings):
    """Builds an encoder-only `EncoderClassifier` (functional Keras model).

    Args:
        config: an encoder-only `BackboneConfig`, a dict of its fields, or a preset
            name ("tiny", "small", "base", "big"): the translator's presets.
        vocab_size: V, the vocabulary size (required with a preset name; else the
            config's unless given).
        num_classes: C, the number of labels (required).
        **settings: `BackboneConfig` settings to change, e.g. `num_encoder_layers=4`.

    Returns:
        A `EncoderClassifier`: `tokens` (B, T) int32, 0 = padding → logits (B, C)
        float32, from the mean over real tokens.

    Example:
        >>> model = build_classifier("tiny", vocab_size=100, num_classes=3)
        >>> model(keras.ops.ones((2, 7), "int32")).shape
        (2, 3)
    """
    if num_classes is None or (vocab_size is None and isinstance(config, str)):
        raise ValueError(
            "build_classifier needs `vocab_size` and `num_classes`, positive ints; received "
            f"vocab_size={vocab_size!r}, num_classes={num_classes!r}."
        )
    if vocab_size is not None:
        settings = {"source_vocab_size": vocab_size, **settings}
    return EncoderClassifier(resolve_config(config, ENCODER_ONLY, settings), num_classes)
