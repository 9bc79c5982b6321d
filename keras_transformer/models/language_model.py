"""A decoder-only (GPT-style) language model from the translator's layers and presets.

Shape notation: B batch, T length, V vocabulary, M model width, N decoder layers,
H heads, D head size, L cache length.
"""

import keras

from keras_transformer.layers.decoder import DecoderBlock
from keras_transformer.layers.padding_mask import PaddingMask
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.models.assembly import block_options
from keras_transformer.models.assembly import float32_logits
from keras_transformer.models.assembly import output_norm
from keras_transformer.models.assembly import resolve_config
from keras_transformer.models.assembly import token_embedding
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.incremental import DecoderStack
from keras_transformer.models.incremental import decode_token
from keras_transformer.models.incremental import start_decoder
from keras_transformer.ops import checks


@keras.saving.register_keras_serializable(package="keras_transformer")
class LanguageModel(keras.Model):
    """A causal language model: token embedding + positions → N decoder blocks
    without cross-attention → (final LayerNorm in pre-LN) → output projection.

    Input: `tokens` (B, T) int32, 0 = padding (right-padded rows). Output: logits
    (B, T, V) in float32 (also under a mixed-precision policy): position t's logits
    predict token t + 1 and depend only on tokens 0 .. t.

    Reads from the config: num_decoder_layers, d_model, num_heads, d_ff, dropout,
    attention_dropout, activation_dropout, activation, norm_first,
    layer_norm_epsilon, max_length (longest sequence, prompt and generated tokens
    together), positional_encoding, tie_output_embedding (the embedding is then the
    output projection), window (an int, or the translator's per-layer list, whose
    decoder part is used) and normalize. The vocabulary size is `vocab_size`; the
    config's source/target vocabulary sizes and encoder layers are not used.

    Besides the full pass, `start_decoding` and `decode_token` run the same layers
    one token at a time with a key/value cache (`keras_transformer.decoding.generation`).

    Args:
        config: a `TransformerConfig` (or its dict).
        vocab_size: V, token ids 0 .. V-1.
        **kwargs: `keras.Model` arguments such as `name`.
    """

    def __init__(self, config, vocab_size, **kwargs):
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        vocab_size = checks.check_positive_int("vocab_size", vocab_size)
        embedding = token_embedding(
            config, vocab_size, tie_weights=config.tie_output_embedding, name="token_embedding"
        )
        positions = PositionalEncoding(
            max_length=config.max_length, kind=config.positional_encoding, name="positions"
        )
        blocks = [
            DecoderBlock(
                **block_options(config, window), cross_attention=False, name=f"decoder_block_{i}"
            )
            for i, window in enumerate(config.decoder_windows())
        ]
        final_norm = output_norm(config, "output_norm")

        tokens = keras.Input(shape=(None,), dtype="int32", name="tokens")
        padding_mask = PaddingMask(name="padding_mask")(tokens)
        x = positions(embedding(tokens))
        x = keras.layers.Dropout(config.dropout, name="embedding_dropout")(x)
        for block in blocks:
            x = block(x, decoder_padding_mask=padding_mask)
        if final_norm is not None:
            x = final_norm(x)
        logits = float32_logits()(embedding(x, reverse=True))
        super().__init__(inputs=tokens, outputs=logits, **{"name": "language_model", **kwargs})
        self.config = config
        self.vocab_size = vocab_size
        self.decoder_stack = DecoderStack(
            embedding=embedding,
            positions=positions,
            blocks=blocks,
            output_norm=final_norm,
            num_heads=config.num_heads,
            d_model=config.d_model,
        )

    def start_decoding(self, batch_size, max_length, grow=False):
        """Key/value caches for up to `max_length` positions and the tensors a step
        reads (fused kernels, position table, output projection), made once.

        Args:
            batch_size: B.
            max_length: L, the most positions decoded.
            grow: start the caches empty and let each step append (graph mode);
                see `start_decoder`.

        Returns:
            `(cache, state)`: N (2, B, H, L, D) caches (L = 0 if `grow`) and a dict
            for `decode_token`.
        """
        return start_decoder(self.decoder_stack, batch_size, max_length, grow)

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
        return {
            "config": self.config.to_dict(),
            "vocab_size": self.vocab_size,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def build_language_model(config="tiny", vocab_size=None, **overrides):
    """Builds a decoder-only `LanguageModel` (functional Keras model).

    Args:
        config: a `TransformerConfig`, a dict of its fields, or a preset name
            ("tiny", "small", "base", "big"): the translator's presets.
        vocab_size: V, the vocabulary size (required).
        **overrides: config fields to change, e.g. `num_decoder_layers=4`.

    Returns:
        A `LanguageModel`: `tokens` (B, T) int32, 0 = padding → logits (B, T, V)
        float32, causal.

    Example:
        >>> model = build_language_model("tiny", vocab_size=100)
        >>> model(keras.ops.ones((2, 7), "int32")).shape
        (2, 7, 100)
    """
    if vocab_size is None:
        raise ValueError("build_language_model needs `vocab_size`, a positive int.")
    return LanguageModel(resolve_config(config, overrides), vocab_size)
