"""One token per step through a stack of `DecoderBlock`s, with the key/value cache:
what the translator's searches and the language model's generation both run.

Shape notation: B batch, V vocabulary, M model width, N decoder layers, H heads,
D head size, L cache length, S source length.

In graph mode (stock TF Serving) every op of a step costs overhead, so
`start_decoder` prepares once per search what a step reads (fused kernels, the
position table, the output projection, the cache's scatter indices), and
`decode_token` then runs 2-D matmuls against them.
"""

import dataclasses
import math

import tensorflow as tf
from keras import ops

from keras_transformer.layers.quantization import float_embeddings
from keras_transformer.layers.quantization import float_reverse_embeddings
from keras_transformer.ops.cache import append_search_cache
from keras_transformer.ops.cache import position_offset
from keras_transformer.ops.cache import search_cache_indices
from keras_transformer.ops.cache import write_search_cache


@dataclasses.dataclass
class DecoderStack:
    """The layers a step runs: the token embedding (its reverse pass the output
    projection), the positional encoding, the blocks and the final norm (or None)."""

    embedding: object
    positions: object
    blocks: list
    output_norm: object
    num_heads: int
    d_model: int


def start_decoder(stack, batch_size, max_length, grow=False, transpose_output_table=True):
    """Empty caches and the tensors fixed for a search, read once outside its loop.

    Args:
        stack: a `DecoderStack`.
        batch_size: B (a scalar tensor or int).
        max_length: L, the most positions a search decodes.
        grow: start the caches empty and append a position per step (graph mode),
            instead of preallocating L zero positions (XLA's static shapes); the
            layouts are compared in `keras_transformer/ops/cache.py`. A loop then
            needs `growing_shape` as the caches' shape invariant.
        transpose_output_table: lay a tied (V, M) table out as an (M, V) kernel
            once per search (graph mode, where a step's plain matmul beats
            `transpose_b`); False keeps the table as it is and each step multiplies
            with `transpose_b`, which XLA folds into its dot (the copy would be made
            at every call of an XLA search: `docs/experiments.md`).

    Returns:
        `(cache, state)`: a tuple of N (2, B, H, L, D) caches (L = 0 if `grow`), one
        per block, and a dict of tensors for `decode_token` (add "cross_caches" and
        "cross_mask" for blocks with cross-attention).
    """
    embedding = stack.embedding
    head_dim = stack.d_model // stack.num_heads
    cache_length = 0 if grow else max_length
    cache = tuple(
        tf.zeros((2, batch_size, stack.num_heads, cache_length, head_dim),
                 dtype=block.compute_dtype)
        for block in stack.blocks
    )
    # The output projection as one (M, V) matmul kernel, laid out once per search:
    # ReversibleEmbedding's reverse pass would transpose the tied table every step,
    # and a plain matmul beats `transpose_b` on CPU (bench/README.md). Under XLA the
    # table stays as it is (`transpose_output_table`).
    transposed = embedding.tie_weights and not transpose_output_table
    if transposed:
        output_kernel = float_embeddings(embedding)  # (V, M), multiplied with transpose_b
    elif embedding.tie_weights:
        output_kernel = tf.transpose(float_embeddings(embedding))  # (V, M) → (M, V), once
    else:
        output_kernel = tf.identity(float_reverse_embeddings(embedding))  # (M, V), read here
    if embedding.reverse_dtype is not None:
        output_kernel = tf.cast(output_kernel, embedding.reverse_dtype)
    signal = ops.cast(stack.positions.position_signal(max_length), embedding.compute_dtype)
    # The table is scaled by √M row by row as a step gathers it (one multiply of
    # (B, M)), not whole once per search: a search reads a few dozen rows, and
    # scaling all V of them costs as much as several steps at batch 1.
    scale = math.sqrt(stack.d_model) if stack.positions.scale_embeddings else None
    state = {
        "weights": [block.decoding_weights() for block in stack.blocks],
        "cross_caches": [None] * len(stack.blocks),
        "cross_mask": None,
        "positions": signal,
        # None: the caches grow (`append_search_cache`).
        "cache_indices": None if grow else search_cache_indices(batch_size, stack.num_heads),
        "embeddings": ops.cast(float_embeddings(embedding), embedding.compute_dtype),
        "embedding_scale": scale,  # a Python float or None
        "output_kernel": output_kernel,  # (M, V), or (V, M) when "output_transposed"
        "output_transposed": transposed,  # a Python bool
    }
    return cache, state


def decode_token(stack, tokens, index, cache, state, return_cross_attention=False):
    """Decodes one token per row at position `index`, as a full pass would there.

    Args:
        stack: a `DecoderStack`.
        tokens: (B,) int32 ids at position `index`.
        index: scalar int32.
        cache: the N (2, B, H, L, D) caches from `start_decoder` or the last step
            (a growing cache holds L = `index` positions).
        state: from `start_decoder`.
        return_cross_attention: also return where the step looked in the source:
            the last block's cross-attention weights averaged over its heads.

    Returns:
        `(logits, cache)`: (B, V) float32 logits and the updated cache; with
        `return_cross_attention`, `(logits, cache, attention)`, attention (B, S)
        float32 summing to 1 over the source's real tokens.
    """
    embedding = stack.embedding
    # Both tables were read once per search (`start_decoder`): a step gathers rows,
    # scaled as `PositionalEncoding` scales its inputs.
    x = tf.gather(state["embeddings"], tokens)
    if state["embedding_scale"] is not None:
        x = x * ops.cast(state["embedding_scale"], x.dtype)
    x = x + tf.gather(state["positions"], index)
    growing = state["cache_indices"] is None
    if growing:
        # After this step's append the cache holds positions 0 .. index: all of them
        # visible to a global attention, so it needs no mask.
        cache_length = index + 1
    else:
        offset = position_offset(index)
        cache_length = tf.shape(cache[0])[-2]
    cache = list(cache)
    self_masks = {}
    for layer, block in enumerate(stack.blocks):
        attention = block.self_attention
        kind = attention.window  # one mask per distinct window, shared by the layers
        if kind not in self_masks:
            self_masks[kind] = (
                None if growing and kind is None
                else attention.cache_token_mask(index, cache_length)
            )

        def write_cache(new_keys, new_values, layer=layer):
            if growing:
                cache[layer], keys, values = append_search_cache(
                    cache[layer], new_keys, new_values
                )
            else:
                cache[layer], keys, values = write_search_cache(
                    cache[layer], new_keys, new_values, state["cache_indices"] + offset
                )
            return keys, values

        # The last block's cross-attention, head-averaged: as good a coverage signal
        # as all blocks' on the validation split (docs/experiments.md).
        report = return_cross_attention and layer == len(stack.blocks) - 1
        x = block.decode_token(
            x, state["weights"][layer], write_cache, state["cross_caches"][layer],
            self_masks[kind], state["cross_mask"], return_cross_weights=report,
        )
        if report:
            x, cross_weights = x  # (B, H, 1, S)
            attention = tf.reduce_mean(cross_weights[:, :, 0], axis=1)
    if stack.output_norm is not None:
        x = stack.output_norm(x)
    kernel = state["output_kernel"]
    logits = tf.matmul(tf.cast(x, kernel.dtype), kernel, transpose_b=state["output_transposed"])
    if embedding.logit_soft_cap is not None:
        logits = tf.tanh(logits / embedding.logit_soft_cap) * embedding.logit_soft_cap
    if return_cross_attention:
        return tf.cast(logits, tf.float32), tuple(cache), attention
    return tf.cast(logits, tf.float32), tuple(cache)
