"""The encoder–decoder Transformer, assembled from the layers with the functional API.

Shape notation: B batch, S source length, T target length, V target vocabulary,
M model width, N decoder layers, H heads, D head size, L cache length.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.models.assembly import float32_logits
from keras_transformer.models.assembly import resolve_config
from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.models.config import ENCODER_DECODER
from keras_transformer.models.incremental import decode_token
from keras_transformer.models.incremental import reorder_cache
from keras_transformer.models.incremental import row_inputs
from keras_transformer.models.incremental import start_decoder


@keras.saving.register_keras_serializable(package="keras_transformer")
class Seq2SeqTransformer(keras.Model):
    """An encoder–decoder Transformer: an encoder–decoder `TransformerBackbone`
    and the tied output projection (the target embedding's reverse pass, or its
    own matrix without `tie_output_embedding`), as a functional Keras model.

    Inputs: `{"encoder_tokens": (B, S) int32, "decoder_tokens": (B, T) int32}`, with
    0 as padding. Output: logits (B, T, V) in float32. Besides the full pass, the
    model exposes what the decoding loop (`keras_transformer.decoding`) needs:
    `encode`, `start_decoding` and `decode_token`, which run the very same layers.

    Args:
        config: a `BackboneConfig` with an encoder and a decoder (or its dict), or
            a `TransformerBackbone` of that shape to build on.
        **kwargs: `keras.Model` arguments such as `name`.

    Example:
        >>> model = Seq2SeqTransformer(preset("tiny", source_vocab_size=50, target_vocab_size=60))
        >>> logits = model({"encoder_tokens": keras.ops.ones((2, 7), "int32"),
        ...                 "decoder_tokens": keras.ops.ones((2, 5), "int32")})
        >>> logits.shape
        (2, 5, 60)
    """

    def __init__(self, config, **kwargs):
        backbone = config if isinstance(config, TransformerBackbone) else None
        config = resolve_config(config, ENCODER_DECODER, {})
        self.backbone = backbone or TransformerBackbone(config)
        self.config = config
        self.logits_layer = float32_logits()
        encoder_tokens = keras.Input(shape=(None,), dtype="int32", name="encoder_tokens")
        decoder_tokens = keras.Input(shape=(None,), dtype="int32", name="decoder_tokens")
        outputs = self.backbone(
            {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}
        )
        super().__init__(
            inputs={"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
            outputs=self._project(outputs["decoder_sequence_output"]),
            **{"name": "transformer", **kwargs},
        )

    def _project(self, sequence_output):
        """(B, T, M) decoder outputs (after the final norm) → (B, T, V) float32 logits."""
        return self.logits_layer(self.backbone.target_embedding(sequence_output, reverse=True))

    # Incremental decoding -----------------------------------------------------

    def encode(self, encoder_tokens, training=False):
        """Runs the encoder: (B, S) ids → ((B, S, M) outputs, (B, S) padding mask)."""
        return self.backbone.encode(encoder_tokens, training=training)

    def decode(self, decoder_tokens, encoder_outputs, encoder_padding_mask, training=False):
        """Runs the decoder on whole prefixes, uncached: (B, T) ids → (B, T, V) logits."""
        return self._project(
            self.backbone.decode(
                decoder_tokens, encoder_outputs, encoder_padding_mask, training=training
            )
        )

    # One token per step, for the searches ---------------------------------------

    def start_decoding(self, encoder_outputs, encoder_padding_mask, max_length, repeats=1,
                       grow=False, transpose_output_table=True, group_sizes=None):
        """Prepares, once per search, everything `decode_token` reads at every step.

        The step then runs 2-D matmuls against fused kernels (`fused_kernel`: the
        query, key and value kernels side by side, built from the checkpoint's
        separate variables), reads the sinusoid table by position, and finds the
        source mask, the cross-attention keys and values and the output projection
        already made.

        Args:
            encoder_outputs: (B, S, M) from `encode`.
            encoder_padding_mask: (B, S) booleans from `encode`.
            max_length: L, target positions the self-attention cache holds.
            repeats: K, copies of each row (beam search: row b·K + k).
            grow: start the caches empty and let each step append (graph mode);
                see `start_decoder`.
            transpose_output_table: False under XLA; see `start_decoder`.
            group_sizes: None, or rows (multiples of K) of consecutive row groups
                whose blocks a step runs at once; see `start_decoder`.

        Returns:
            `(cache, state)`: a tuple of N (2, B·K, H, L, D) self-attention caches
            (L = 0 if `grow`), one per decoder layer (with `group_sizes`, each
            group's N in turn), and a dict of tensors fixed for the search.
        """
        layers = self.backbone
        # Each sentence's keys and values are projected once and then copied to its
        # K rows: projecting the K copies of the encoder output costs K times the matmuls.
        repeat = (lambda x: tf.repeat(x, repeats, axis=0)) if repeats > 1 else (lambda x: x)
        encoder_padding_mask = repeat(encoder_padding_mask)
        cross_caches = []
        for block in layers.decoder_blocks:
            keys_values = repeat(block.compute_cross_attention_cache(encoder_outputs))
            cross_caches.append((keys_values[:, 0], keys_values[:, 1]))
        return start_decoder(
            self.decoder_stack, tf.shape(encoder_padding_mask)[0], max_length, grow,
            transpose_output_table, cross_caches=cross_caches,
            # (B, 1, 1, S): the source keys every head's query may see.
            cross_mask=tf.cast(encoder_padding_mask, tf.bool)[:, None, None, :],
            group_sizes=group_sizes,
        )

    @property
    def decoder_stack(self):
        """The decoder's layers as a `DecoderStack` (what `decode_token` runs)."""
        return self.backbone.decoder_stack

    def decode_token(self, tokens, index, cache, state, return_cross_attention=False,
                     inputs=None):
        """Decodes one token per row at position `index`, as the full pass does there.

        Args:
            tokens: (B,) int32 ids at position `index`.
            index: scalar int32.
            cache: the (2, B, H, L, D) caches from `start_decoding` or the last
                step.
            state: from `start_decoding`.
            return_cross_attention: also return the (B, S) cross-attention.
            inputs: None, or `row_inputs(state)` with rows gathered like the
                cache's (see `keras_transformer.models.incremental.decode_token`).

        Returns:
            `(logits, cache)`: (B, V) float32 logits and the updated cache.
        """
        return decode_token(
            self.decoder_stack, tokens, index, cache, state, return_cross_attention, inputs
        )

    def row_inputs(self, state):
        """What a step reads row by row and never changes (the source's cross-attention
        keys, values and mask); see `keras_transformer.models.incremental.row_inputs`."""
        return row_inputs(state)

    def reorder_cache(self, cache, parents, state):
        """The caches with row r taken from row `parents[r]` (beam search's moves),
        group by group; see `keras_transformer.models.incremental.reorder_cache`."""
        return reorder_cache(cache, parents, state)

    def attention_weights(self, encoder_tokens, decoder_tokens):
        """Every attention map of a teacher-forced pass, for plots and the web page.

        Args:
            encoder_tokens: (B, S) int32 source ids.
            decoder_tokens: (B, T) int32 decoder inputs (BOS + target prefix).

        Returns:
            dict of float32 tensors, N = layers: "encoder_self" (B, N, H, S, S),
            "decoder_self" (B, N, H, T, T), "cross" (B, N, H, T, S).
        """
        layers = self.backbone
        encoder_mask = layers.source_mask(encoder_tokens)
        x = layers.source_dropout(layers.source_positions(layers.source_embedding(encoder_tokens)))
        encoder_maps = []
        for block in layers.encoder_blocks:
            x, weights = block(x, padding_mask=encoder_mask, return_attention_scores=True)
            encoder_maps.append(weights)
        if layers.encoder_output_norm is not None:
            x = layers.encoder_output_norm(x)
        decoder_mask = layers.target_mask(decoder_tokens)
        y = layers.target_positions(layers.target_embedding(decoder_tokens))
        self_maps, cross_maps = [], []
        for block in layers.decoder_blocks:
            y, (self_weights, cross_weights) = block(
                y,
                x,
                decoder_padding_mask=decoder_mask,
                encoder_padding_mask=encoder_mask,
                return_attention_scores=True,
            )
            self_maps.append(self_weights)
            cross_maps.append(cross_weights)

        def stack(maps):
            return ops.cast(ops.stack(maps, axis=1), "float32")

        return {
            "encoder_self": stack(encoder_maps),
            "decoder_self": stack(self_maps),
            "cross": stack(cross_maps),
        }

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def build_transformer(config="tiny", **settings):
    """Builds a `Seq2SeqTransformer` from a config, its dict, or a preset name.

    Args:
        config: a `BackboneConfig` with an encoder and a decoder, a dict of its
            fields, or a preset name ("tiny", "small", "base", "big").
        **settings: `BackboneConfig` settings to change, e.g.
            `source_vocab_size=8000` (`BackboneConfig.replace`).

    Returns:
        A `Seq2SeqTransformer` (a functional `keras.Model`).

    Example:
        >>> model = build_transformer("tiny", source_vocab_size=100, target_vocab_size=100)
        >>> model.summary()  # doctest: +SKIP
    """
    return Seq2SeqTransformer(resolve_config(config, ENCODER_DECODER, settings))
