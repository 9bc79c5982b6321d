"""The decoder block: causal self-attention → add & norm → cross-attention → add &
norm → feed-forward → add & norm.

Shape notation: B batch, T target length, S source length, M model width, H heads,
D head size, L cache length.
"""

import keras

from keras_transformer.layers.block import TransformerBlock
from keras_transformer.ops import checks


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderBlock(TransformerBlock):
    """One decoder layer of "Attention Is All You Need" (section 3.1).

    The self-attention is causal: position i sees only positions <= i. The
    cross-attention attends to the encoder's output. Takes the arguments of
    `TransformerBlock`.

    Call arguments:
        inputs: (B, T, M) target-side stream.
        encoder_outputs: (B, S, M) encoder output; may be None when
            `cross_attention_cache` holds its projected keys and values.
        decoder_padding_mask: optional (B, T) booleans, True for real tokens.
        encoder_padding_mask: optional (B, S) booleans, True for real tokens.
        self_attention_cache: optional (B, 2, H, L, D) cache, written at `cache_index`.
        cross_attention_cache: optional (B, 2, H, S, D) keys and values of the
            encoder output, from `compute_cross_attention_cache`.
        cache_index: position of `inputs[:, 0]` when decoding with a cache.
        return_attention_scores: also return the self-attention (B, H, T, L or T)
            and cross-attention (B, H, T, S) weights.
        training: whether dropout is active.

    Returns:
        outputs (B, T, M); then `(self_weights, cross_weights)` if asked; then the
        updated self-attention cache if one was given.
    """

    def build(self, inputs_shape, encoder_outputs_shape=None):
        checks.check_rank("inputs", inputs_shape, 3)
        if encoder_outputs_shape is None:
            encoder_outputs_shape = inputs_shape
        checks.check_rank("encoder_outputs", encoder_outputs_shape, 3)
        self.self_attention = self._make_attention("self_attention", inputs_shape, causal=True)
        self.self_attention_norm = self._make_norm("self_attention_norm", inputs_shape)
        self.cross_attention = self._make_attention(
            "cross_attention", inputs_shape, context_shape=encoder_outputs_shape
        )
        self.cross_attention_norm = self._make_norm("cross_attention_norm", inputs_shape)
        self.feed_forward = self._make_feed_forward(inputs_shape)
        self.feed_forward_norm = self._make_norm("feed_forward_norm", inputs_shape)
        self.dropout_layer = self._make_dropout()
        self.built = True

    def compute_cross_attention_cache(self, encoder_outputs):
        """Projects the encoder output once: (B, S, M) → (B, 2, H, S, D)."""
        return self.cross_attention.compute_key_value(encoder_outputs)

    def decoding_weights(self):
        """Both attentions' `decoding_weights`, read once per search."""
        return {
            "self_attention": self.self_attention.decoding_weights(),
            "cross_attention": self.cross_attention.decoding_weights(),
        }

    def decode_token(self, x, weights, write_cache, cross_cache, self_mask, cross_mask):
        """Runs the block on one token per row, as `call` does with a cache.

        Args:
            x: (B, M) the stream at the current position.
            weights: from `decoding_weights`.
            write_cache: function that takes this step's keys and values
                (B, 2, H, 1, D), writes them into this block's self-attention cache
                and returns the cache's keys and values, each (B, H, L, D).
            cross_cache: (keys, values) of the encoder output, each (B, H, S, D).
            self_mask: `token_mask` of the self-attention keys, broadcastable to
                (B, H, 1, L).
            cross_mask: `token_mask` of the source, broadcastable to (B, H, 1, S).

        Returns:
            (B, M) outputs.
        """
        attention = self.self_attention
        query, key_value = attention.project_token(
            self._sublayer_input(x, self.self_attention_norm), weights["self_attention"]
        )
        keys, values = write_cache(key_value)
        attended = attention.attend_token(query, keys, values, self_mask, weights["self_attention"])
        x = self._add_and_norm(x, attended, self.self_attention_norm, training=False)

        attention = self.cross_attention
        query, _ = attention.project_token(
            self._sublayer_input(x, self.cross_attention_norm), weights["cross_attention"]
        )
        attended = attention.attend_token(query, *cross_cache, cross_mask, weights["cross_attention"])
        x = self._add_and_norm(x, attended, self.cross_attention_norm, training=False)

        transformed = self.feed_forward(
            self._sublayer_input(x, self.feed_forward_norm), training=False
        )
        return self._add_and_norm(x, transformed, self.feed_forward_norm, training=False)

    def call(
        self,
        inputs,
        encoder_outputs=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_index=None,
        return_attention_scores=False,
        training=None,
    ):
        self_results = self.self_attention(
            self._sublayer_input(inputs, self.self_attention_norm),
            query_padding_mask=decoder_padding_mask,
            cache=self_attention_cache,
            cache_index=cache_index,
            return_attention_scores=True,
            training=training,
        )
        attended, self_weights = self_results[0], self_results[1]
        x = self._add_and_norm(inputs, attended, self.self_attention_norm, training)

        attended, cross_weights = self.cross_attention(
            self._sublayer_input(x, self.cross_attention_norm),
            context=encoder_outputs if cross_attention_cache is None else None,
            query_padding_mask=decoder_padding_mask,
            context_padding_mask=encoder_padding_mask,
            cache=cross_attention_cache,
            return_attention_scores=True,
            training=training,
        )[:2]
        x = self._add_and_norm(x, attended, self.cross_attention_norm, training)

        transformed = self.feed_forward(
            self._sublayer_input(x, self.feed_forward_norm), training=training
        )
        outputs = self._add_and_norm(x, transformed, self.feed_forward_norm, training)
        results = [outputs]
        if return_attention_scores:
            results.append((self_weights, cross_weights))
        if self_attention_cache is not None:
            results.append(self_results[2])
        return results[0] if len(results) == 1 else tuple(results)
