"""One token per step through a stack of `DecoderBlock`s, with the key/value cache:
what the translator's searches and the language model's generation both run.

Shape notation: B batch, V vocabulary, M model width, N decoder layers, H heads,
D head size, L cache length, S source length.

In graph mode (stock TF Serving) every op of a step costs overhead, so
`start_decoder` prepares once per search what a step reads (fused kernels, the
position table, the output projection, the cache's scatter indices), and
`decode_token` then runs 2-D matmuls against them.

Row groups: a step may run its decoder blocks on G consecutive groups of rows, each
with its own caches, and join them for the output projection. The groups' ops
depend on each other nowhere, so the graph executor runs them at once, one a core;
each group's ops are small enough to run on the thread that runs them, while the
output projection and the scores over the vocabulary, the ops TensorFlow does spread
over its threads, run once on the joined rows with nothing beside them. G
independent searches instead spread those ops too, and each then waits for
threads busy with the other search; with one thread per op, nothing is spread and
independent searches are the faster way (`SequenceSearch`'s `row_groups`).
"""

import dataclasses
import math

import tensorflow as tf
from keras import ops

from keras_transformer.layers.quantization import float_embeddings
from keras_transformer.layers.quantization import float_reverse_embeddings
from keras_transformer.ops.cache import BATCH_AXIS
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


def start_decoder(stack, batch_size, max_length, grow=False, transpose_output_table=True,
                  cross_caches=None, cross_mask=None, group_sizes=None):
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
        cross_caches: for blocks with cross-attention, one (keys, values) pair per
            block, each (B, H, S, D); None without cross-attention.
        cross_mask: (B, 1, 1, S) booleans, True for real source tokens (with
            `cross_caches`).
        group_sizes: None, or G scalar int32 row counts summing to B: the step
            then runs the blocks on those consecutive row groups at once (see the
            module's docstring).

    Returns:
        `(cache, state)`: a tuple of G·N (2, B_g, H, L, D) caches (L = 0 if `grow`),
        the N layers' of the first group, then of the next (G = 1 without
        `group_sizes`), and a dict of tensors for `decode_token`.
    """
    embedding = stack.embedding
    head_dim = stack.d_model // stack.num_heads
    cache_length = 0 if grow else max_length
    num_blocks = len(stack.blocks)
    if cross_caches is None:
        cross_caches = [None] * num_blocks
    if group_sizes is None:
        bounds = [None]
        sizes = [batch_size]
    else:
        sizes = list(group_sizes)
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        bounds = list(zip(offsets[:-1], offsets[1:]))
    groups, cache = [], []
    for rows, size in zip(bounds, sizes):
        # Slices of consecutive rows share their tensor's buffer: made once here,
        # they cost a step nothing.
        select = (lambda x: x) if rows is None else (lambda x, rows=rows: x[rows[0]:rows[1]])
        groups.append({
            "rows": rows,  # (first, end) rows, or None for the whole batch
            # None: the caches grow (`append_search_cache`).
            "cache_indices": None if grow else search_cache_indices(size, stack.num_heads),
            "cross_caches": [None if pair is None else tuple(select(x) for x in pair)
                             for pair in cross_caches],
            "cross_mask": None if cross_mask is None else select(cross_mask),
        })
        cache.extend(
            tf.zeros((2, size, stack.num_heads, cache_length, head_dim), dtype=block.compute_dtype)
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
        "groups": groups,  # each with its rows' cross-attention keys, values and mask
        "growing": bool(grow),
        "positions": signal,
        "embeddings": ops.cast(float_embeddings(embedding), embedding.compute_dtype),
        "embedding_scale": scale,  # a Python float or None
        "output_kernel": output_kernel,  # (M, V), or (V, M) when "output_transposed"
        "output_transposed": transposed,  # a Python bool
    }
    return tuple(cache), state


def row_inputs(state):
    """What a step reads row by row and never changes: the cross-attention keys and
    values and the source mask, as a dict of (B, ...) tensors that a loop may gather
    (dropping done rows) and give back to `decode_token`. A state of one row group.
    """
    (group,) = state["groups"]
    return {"cross_caches": group["cross_caches"], "cross_mask": group["cross_mask"]}


def reorder_cache(cache, parents, state):
    """The caches with row r taken from row `parents[r]` (beam search's moves).

    Args:
        cache: from `start_decoder` or the last step.
        parents: (B,) int32, the row each row continues; a row's parent lies in
            its own row group (groups hold whole sentences' beams).
        state: from `start_decoder`.

    Returns:
        The reordered caches, in `cache`'s structure.
    """
    num_blocks = len(state["weights"])
    reordered = []
    for number, group in enumerate(state["groups"]):
        rows = group["rows"]
        local = parents if rows is None else parents[rows[0]:rows[1]] - rows[0]
        reordered.extend(
            tf.gather(layer_cache, local, axis=BATCH_AXIS)
            for layer_cache in cache[number * num_blocks:(number + 1) * num_blocks]
        )
    return tuple(reordered)


def decode_token(stack, tokens, index, cache, state, return_cross_attention=False,
                 inputs=None):
    """Decodes one token per row at position `index`, as a full pass would there.

    Args:
        stack: a `DecoderStack`.
        tokens: (B,) int32 ids at position `index`.
        index: scalar int32.
        cache: the G·N (2, B_g, H, L, D) caches from `start_decoder` or the last
            step (a growing cache holds L = `index` positions).
        state: from `start_decoder`.
        return_cross_attention: also return where the step looked in the source:
            the last block's cross-attention weights averaged over its heads.
        inputs: None, or `row_inputs(state)` with rows gathered like the cache's
            (a state of one row group), read instead of the state's.

    Returns:
        `(logits, cache)`: (B, V) float32 logits and the updated cache; with
        `return_cross_attention`, `(logits, cache, attention)`, attention (B, S)
        float32 summing to 1 over the source's real tokens.
    """
    embedding = stack.embedding
    if inputs is not None:
        (group,) = state["groups"]
        state = {**state, "groups": [{**group, **inputs}]}
    # Both tables were read once per search (`start_decoder`): a step gathers rows,
    # scaled as `PositionalEncoding` scales its inputs.
    x = tf.gather(state["embeddings"], tokens)
    if state["embedding_scale"] is not None:
        x = x * ops.cast(state["embedding_scale"], x.dtype)
    x = x + tf.gather(state["positions"], index)
    growing = state["growing"]
    # After this step's append a growing cache holds positions 0 .. index: all of them
    # visible to a global attention, so it needs no mask. Every group's caches hold the
    # same positions: one mask per distinct window serves all groups and layers.
    cache_length = index + 1 if growing else tf.shape(cache[0])[-2]
    self_masks = {}
    for block in stack.blocks:
        window = block.self_attention.window
        if window not in self_masks:
            self_masks[window] = (
                None if growing and window is None
                else block.self_attention.cache_token_mask(index, cache_length)
            )
    offset = None if growing else position_offset(index)
    num_blocks = len(stack.blocks)
    outputs, new_cache, attention = [], [], []
    for number, group in enumerate(state["groups"]):
        rows = group["rows"]
        group_x = x if rows is None else x[rows[0]:rows[1]]
        group_cache = cache[number * num_blocks:(number + 1) * num_blocks]
        group_x, group_cache, group_attention = _run_blocks(
            stack, group_x, group_cache, group, state, self_masks, offset,
            return_cross_attention,
        )
        outputs.append(group_x)
        new_cache.extend(group_cache)
        attention.append(group_attention)
    x = outputs[0] if len(outputs) == 1 else tf.concat(outputs, axis=0)
    if stack.output_norm is not None:
        x = stack.output_norm(x)
    kernel = state["output_kernel"]
    logits = tf.matmul(tf.cast(x, kernel.dtype), kernel, transpose_b=state["output_transposed"])
    if embedding.logit_soft_cap is not None:
        logits = tf.tanh(logits / embedding.logit_soft_cap) * embedding.logit_soft_cap
    if return_cross_attention:
        attention = attention[0] if len(attention) == 1 else tf.concat(attention, axis=0)
        return tf.cast(logits, tf.float32), tuple(new_cache), attention
    return tf.cast(logits, tf.float32), tuple(new_cache)


def _run_blocks(stack, x, cache, group, state, self_masks, offset, return_cross_attention):
    """One row group's pass through the blocks: `(x, cache, attention or None)`.

    `self_masks`: the step's self-attention mask per window; `offset`: its
    `position_offset` (None for growing caches)."""
    growing = state["growing"]
    if not growing:
        indices = group["cache_indices"] + offset
    cache = list(cache)
    attention = None
    for layer, block in enumerate(stack.blocks):

        def write_cache(new_keys, new_values, layer=layer):
            if growing:
                cache[layer], keys, values = append_search_cache(
                    cache[layer], new_keys, new_values
                )
            else:
                cache[layer], keys, values = write_search_cache(
                    cache[layer], new_keys, new_values, indices
                )
            return keys, values

        # The last block's cross-attention, head-averaged: as good a coverage signal
        # as all blocks' on the validation split (docs/experiments.md).
        report = return_cross_attention and layer == len(stack.blocks) - 1
        x = block.decode_token(
            x, state["weights"][layer], write_cache, group["cross_caches"][layer],
            self_masks[block.self_attention.window], group["cross_mask"],
            return_cross_weights=report,
        )
        if report:
            x, cross_weights = x  # (B, H, 1, S)
            attention = tf.reduce_mean(cross_weights[:, :, 0], axis=1)
    return x, cache, attention
