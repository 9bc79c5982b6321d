"""A decoder-only (GPT-style) language model on the `TransformerBackbone`.

Shape notation: B batch, T length, V vocabulary, M model width, N decoder layers,
H heads, D head size, L cache length.
"""

import keras

from keras_transformer.models.assembly import float32_logits
from keras_transformer.models.assembly import resolve_config
from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.models.config import DECODER_ONLY
from keras_transformer.models.incremental import decode_token
from keras_transformer.models.incremental import start_decoder


@keras.saving.register_keras_serializable(package="keras_transformer")
class LanguageModel(keras.Model):
    """A causal language model: a decoder-only `TransformerBackbone` (token
    embedding + positions → N decoder blocks without cross-attention → final
    LayerNorm in pre-LN) and the LM head, the output projection (the embedding's
    reverse pass with `tie_output_embedding`).

    Input: `tokens` (B, T) int32, 0 = padding (right-padded rows). Output: logits
    (B, T, V) in float32 (also under a mixed-precision policy): position t's logits
    predict token t + 1 and depend only on tokens 0 .. t. V is the decoder's
    `vocab_size`; `max_length` bounds prompt and generated tokens together.

    Besides the full pass, `start_decoding` and `decode_token` run the same layers
    one token at a time with a key/value cache (`keras_transformer.decoding.generation`).

    Args:
        config: a decoder-only `BackboneConfig` (or its dict), or a
            `TransformerBackbone` of that shape to build on.
        **kwargs: `keras.Model` arguments such as `name`.
    """

    def __init__(self, config, **kwargs):
        backbone = config if isinstance(config, TransformerBackbone) else None
        config = resolve_config(config, DECODER_ONLY, {})
        self.backbone = backbone or TransformerBackbone(config)
        self.config = config
        tokens = keras.Input(shape=(None,), dtype="int32", name="tokens")
        sequence = self.backbone({"decoder_tokens": tokens})["decoder_sequence_output"]
        logits = float32_logits()(self.backbone.target_embedding(sequence, reverse=True))
        super().__init__(inputs=tokens, outputs=logits, **{"name": "language_model", **kwargs})

    @property
    def vocab_size(self):
        """V, the decoder's vocabulary."""
        return self.config.decoder.vocab_size

    @property
    def decoder_stack(self):
        """The decoder's layers as a `DecoderStack` (what `decode_token` runs)."""
        return self.backbone.decoder_stack

    def start_decoding(self, batch_size, max_length, grow=False, transpose_output_table=True):
        """Key/value caches for up to `max_length` positions and the tensors a step
        reads (fused kernels, position table, output projection), made once.

        Args:
            batch_size: B.
            max_length: L, the most positions decoded.
            grow: start the caches empty and let each step append (graph mode);
                see `start_decoder`.
            transpose_output_table: False under XLA; see `start_decoder`.

        Returns:
            `(cache, state)`: N (2, B, H, L, D) caches (L = 0 if `grow`) and a dict
            for `decode_token`.
        """
        return start_decoder(self.decoder_stack, batch_size, max_length, grow,
                             transpose_output_table)

    def decode_token(self, tokens, index, cache, state):
        """Runs the model on one token per row at position `index` with the cache.

        Args:
            tokens: (B,) int32 ids at position `index`.
            index: scalar int32.
            cache: from `start_decoding` or the last step.
            state: from `start_decoding`.

        Returns:
            `(logits, cache)`: (B, V) float32 logits of the next token, as the full
            pass gives at position `index`, and the updated cache.
        """
        return decode_token(self.decoder_stack, tokens, index, cache, state)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def build_language_model(config="tiny", vocab_size=None, **settings):
    """Builds a decoder-only `LanguageModel` (functional Keras model).

    Args:
        config: a decoder-only `BackboneConfig`, a dict of its fields, or a preset
            name ("tiny", "small", "base", "big"): the translator's presets.
        vocab_size: V, the vocabulary size (required with a preset name; else the
            config's unless given).
        **settings: `BackboneConfig` settings to change, e.g. `num_decoder_layers=4`.

    Returns:
        A `LanguageModel`: `tokens` (B, T) int32, 0 = padding → logits (B, T, V)
        float32, causal.

    Example:
        >>> model = build_language_model("tiny", vocab_size=100)
        >>> model(keras.ops.ones((2, 7), "int32")).shape
        (2, 7, 100)
    """
    if vocab_size is None and isinstance(config, str):
        raise ValueError("build_language_model needs `vocab_size`, a positive int.")
    if vocab_size is not None:
        settings = {"target_vocab_size": vocab_size, **settings}
    return LanguageModel(resolve_config(config, DECODER_ONLY, settings))
