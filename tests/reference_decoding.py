"""The layers' own cached decoding, kept as the reference the fused step is checked against.

Shape notation: B batch, T positions, S source length, M model width, H heads,
D head size, L cache length, N decoder layers.

These run the layers' sub-layers as their `call` does (separate query, key and
value projections, `compute_attention_mask`, `scaled_dot_product_attention`) over
(B, 2, H, L, D) caches written at a position: slower than the package's one-token
step (`start_decoding` / `decode_token`), and independent of it.
"""

import tensorflow as tf
from keras import ops

from keras_transformer.ops.attention import scaled_dot_product_attention
from keras_transformer.ops.masks import compute_attention_mask


def update_cache(cache, update, index):
    """Writes `update` (B, 2, H, T, D) into `cache` (B, 2, H, L, D) at positions
    index .. index + T - 1 of axis 3."""
    shape = tf.shape(update)
    batch, pair, head, positions = tf.meshgrid(
        tf.range(shape[0]),
        tf.range(shape[1]),
        tf.range(shape[2]),
        tf.cast(index, tf.int32) + tf.range(shape[3]),
        indexing="ij",
    )
    indices = tf.stack([batch, pair, head, positions], axis=-1)  # (B, 2, H, T, 4)
    return tf.tensor_scatter_nd_update(cache, indices, tf.cast(update, cache.dtype))


def attend_with_cache(layer, query, cache, cache_index=None, context_padding_mask=None):
    """A `MultiHeadSelfAttention` over a cache.

    Args:
        layer: the attention layer.
        query: (B, T, M).
        cache: (B, 2, H, L, D). With `cache_index` (self-attention), the keys and
            values of `query` are written there and attention runs causally over
            the whole cache; without it the cache is read-only: a context's keys
            and values from `compute_key_value` (cross-attention).
        cache_index: position of `query[:, 0]`.
        context_padding_mask: (B, S) booleans for a read-only cache.

    Returns:
        `(outputs, weights, cache)`: (B, T, M), (B, H, T, L), the updated cache.
    """
    query_heads = layer._split_heads(layer.query_dense(query))
    cross = cache_index is None
    if cross:
        key_heads, value_heads = cache[:, 0], cache[:, 1]
        query_offset = 0
    else:
        key_heads = layer._split_heads(layer.key_dense(query))
        value_heads = layer._split_heads(layer.value_dense(query))
        cache = update_cache(cache, ops.stack([key_heads, value_heads], axis=1), cache_index)
        key_heads, value_heads = cache[:, 0], cache[:, 1]
        query_offset = cache_index
    mask = compute_attention_mask(
        query_length=ops.shape(query_heads)[2],
        key_length=ops.shape(key_heads)[2],
        key_padding_mask=context_padding_mask if cross else None,
        causal=not cross,
        window=None if cross else layer.window,
        query_offset=query_offset,
    )
    attended, weights = scaled_dot_product_attention(
        query_heads, key_heads, value_heads, mask=mask, attention_activation=layer.attention_activation
    )
    return layer.output_dense(layer._merge_heads(attended)), weights, cache


def block_with_cache(block, inputs, self_cache, cache_index, cross_cache=None,
                     encoder_padding_mask=None):
    """A `DecoderBlock` on positions `cache_index ..` with its caches.

    Args:
        block: the decoder block.
        inputs: (B, T, M).
        self_cache: (B, 2, H, L, D), written at `cache_index`.
        cache_index: position of `inputs[:, 0]`.
        cross_cache: (B, 2, H, S, D) keys and values of the encoder output.
        encoder_padding_mask: (B, S) booleans.

    Returns:
        `(outputs, self_cache)`: (B, T, M) and the updated cache.
    """
    attended, _, self_cache = attend_with_cache(
        block.self_attention, block._sublayer_input(inputs, block.self_attention_norm),
        self_cache, cache_index,
    )
    x = block._add_and_norm(inputs, attended, block.self_attention_norm, False)
    if block.has_cross_attention:
        attended, _, _ = attend_with_cache(
            block.cross_attention, block._sublayer_input(x, block.cross_attention_norm),
            cross_cache, context_padding_mask=encoder_padding_mask,
        )
        x = block._add_and_norm(x, attended, block.cross_attention_norm, False)
    transformed = block.feed_forward(block._sublayer_input(x, block.feed_forward_norm))
    return block._add_and_norm(x, transformed, block.feed_forward_norm, False), self_cache


def init_cache(model, encoder_outputs, max_length):
    """A `Seq2SeqTransformer`'s caches for `max_length` target positions.

    Returns:
        `(self_caches, cross_caches)`: one entry per decoder layer, (B, 2, H, L, D)
        zeros and the (B, 2, H, S, D) keys and values of `encoder_outputs`.
    """
    batch_size = ops.shape(encoder_outputs)[0]
    head_dim = model.config.d_model // model.config.num_heads
    blocks = model.backbone.decoder_blocks
    shape = (batch_size, 2, model.config.num_heads, max_length, head_dim)
    self_caches = tuple(ops.zeros(shape, dtype=block.compute_dtype) for block in blocks)
    cross_caches = tuple(block.compute_cross_attention_cache(encoder_outputs) for block in blocks)
    return self_caches, cross_caches


def decode_step(model, decoder_tokens, cache_index, self_caches, cross_caches,
                encoder_padding_mask):
    """Decodes (B, T) `decoder_tokens` at positions `cache_index ..` with the caches.

    Returns:
        `(logits, self_caches)`: (B, T, V) float32 logits and the updated caches.
    """
    layers = model.backbone
    x = layers.target_embedding(decoder_tokens)
    x = layers.target_positions(x, start_index=cache_index)
    updated = []
    for block, self_cache, cross_cache in zip(layers.decoder_blocks, self_caches, cross_caches):
        x, self_cache = block_with_cache(
            block, x, self_cache, cache_index, cross_cache, encoder_padding_mask
        )
        updated.append(self_cache)
    if layers.decoder_output_norm is not None:
        x = layers.decoder_output_norm(x)
    return model._project(x), tuple(updated)
