"""Writing into a search's key/value caches (preallocated or growing) with core
TensorFlow ops only.

Shape notation: B batch, L cache length, T new positions, H heads, D head size.

`keras.ops.slice_update` lowers to `XlaDynamicUpdateSlice` on the TensorFlow
backend, an op outside core TensorFlow that stock TF Serving cannot be relied on
to run; `TensorScatterUpdate` is core, takes its index at run time, and XLA
compiles it too (strided-slice updates need a compile-time index under XLA).
"""

import tensorflow as tf


# The caches of a search -----------------------------------------------------------
#
# A search keeps each decoder layer's keys and values in its own (2, B, H, L, D)
# tensor: a layer's write then touches only its own cache (one stacked tensor for
# all layers was measured slower at batch 32: `bench/README.md`, issue 18), and
# its keys or values are a contiguous block that TensorFlow slices without a
# copy. Two layouts along L:
# - preallocated (XLA, whose shapes must be static): L = the longest output
#   allowed, written at each step by one scatter whose indices were built once
#   per search; a step attends over all L positions, the unwritten ones masked.
# - growing (graph mode, what stock TF Serving runs): the cache starts empty and
#   each step appends its position, so step t copies and attends over t + 1
#   positions instead of L (a row's limit is its source length + 50, far more
#   than it usually produces).

BATCH_AXIS = 1  # of a layer's search cache


def search_cache_indices(batch_size, num_heads):
    """Scatter indices of a layer's new keys and values in its (2, B, H, L, D) cache.

    Args:
        batch_size: B.
        num_heads: H.

    Returns:
        A (B, 2, H, 1, 4) int32 tensor [kv, b, h, 0]: add `position_offset(index)`
        to address position `index`.
    """
    # Laid out like the update (B, 2, H, 1, D) that `write_search_cache` stacks, so
    # that the update needs no transpose: only the indices' values follow the cache.
    batch, pair, head = tf.meshgrid(
        tf.range(batch_size), tf.range(2), tf.range(num_heads), indexing="ij"
    )
    indices = tf.stack([pair, batch, head, tf.zeros_like(batch)], axis=-1)
    return indices[:, :, :, None, :]


def position_offset(index):
    """The (4,) offset that moves `search_cache_indices` to position `index`."""
    return tf.cast(index, tf.int32) * tf.constant([0, 0, 0, 1], tf.int32)


def write_search_cache(cache, new_keys, new_values, indices):
    """Writes one layer's new position and returns its keys and values.

    Args:
        cache: the layer's (2, B, H, L, D) cache.
        new_keys: (B, H, 1, D) this step's keys.
        new_values: (B, H, 1, D) this step's values.
        indices: `search_cache_indices` plus `position_offset(index)`.

    Returns:
        `(cache, keys, values)`: the updated cache and its (B, H, L, D) keys and values.
    """
    update = tf.cast(tf.stack([new_keys, new_values], axis=1), cache.dtype)  # (B, 2, H, 1, D)
    cache = tf.tensor_scatter_nd_update(cache, indices, update)
    return cache, cache[0], cache[1]


def append_search_cache(cache, new_keys, new_values):
    """Appends one layer's new position to its growing cache.

    Args:
        cache: the layer's (2, B, H, T, D) cache of positions 0 .. T - 1.
        new_keys: (B, H, 1, D) this step's keys.
        new_values: (B, H, 1, D) this step's values.

    Returns:
        `(cache, keys, values)`: the (2, B, H, T + 1, D) cache and its
        (B, H, T + 1, D) keys and values.
    """
    # Stacked in the cache's layout: a copy of one position, where a transpose of the
    # projection's (B, 2, H, 1, D) runs through oneDNN and costs tens of microseconds.
    update = tf.cast(tf.stack([new_keys, new_values]), cache.dtype)  # (2, B, H, 1, D)
    cache = tf.concat([cache, update], axis=3)
    return cache, cache[0], cache[1]


def growing_shape(cache):
    """The `tf.while_loop` shape invariant of a growing (2, B, H, T, D) cache."""
    shape = cache.shape.as_list()
    return tf.TensorShape(shape[:1] + [None] + shape[2:3] + [None] + shape[4:])
