"""Writing into a preallocated key/value cache with core TensorFlow ops only.

Shape notation: B batch, L cache length, T new positions, H heads, D head size.

`keras.ops.slice_update` lowers to `XlaDynamicUpdateSlice` on the TensorFlow
backend, an op outside core TensorFlow that stock TF Serving cannot be relied on
to run; `TensorScatterUpdate` is core, takes its index at run time, and XLA
compiles it too (strided-slice updates need a compile-time index under XLA).
"""

import tensorflow as tf


def update_cache(cache, update, index):
    """Writes `update` into `cache` at positions index .. index + T - 1 of axis 3.

    Args:
        cache: (B, 2, H, L, D) keys and values.
        update: (B, 2, H, T, D) the new positions' keys and values.
        index: scalar int, first position written.

    Returns:
        The updated (B, 2, H, L, D) cache (shapes unchanged).
    """
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


# One cache for all decoder layers ------------------------------------------------
#
# A search keeps every layer's keys and values in one (N, 2, B, H, L, D) tensor:
# beam search reorders all of them with one gather per step (axis 2), and a
# layer's keys or values are a contiguous block that TensorFlow slices without a
# copy. Each layer writes its new position with one scatter whose indices were
# built once per search.

BATCH_AXIS = 2  # of the stacked cache


def stacked_cache_indices(batch_size, num_layers, num_heads):
    """Scatter indices of each layer's new keys and values in a stacked cache.

    Args:
        batch_size: B.
        num_layers: N.
        num_heads: H.

    Returns:
        A tuple of N (B, 2, H, 1, 5) int32 tensors [n, kv, b, h, 0]: add
        `position_offset(index)` to address position `index`.
    """
    # Laid out like the update (B, 2, H, 1, D) that `project_token` makes, so that
    # the update needs no transpose: only the indices' values follow the cache.
    layers, batch, pair, head = tf.meshgrid(
        tf.range(num_layers), tf.range(batch_size), tf.range(2), tf.range(num_heads),
        indexing="ij",
    )
    indices = tf.stack([layers, pair, batch, head, tf.zeros_like(batch)], axis=-1)
    return tuple(tf.unstack(indices[:, :, :, :, None, :], num=num_layers))


def position_offset(index):
    """The (5,) offset that moves `stacked_cache_indices` to position `index`."""
    return tf.cast(index, tf.int32) * tf.constant([0, 0, 0, 0, 1], tf.int32)


def write_stacked_cache(cache, update, indices, layer):
    """Writes one layer's new position and returns the layer's keys and values.

    Args:
        cache: (N, 2, B, H, L, D).
        update: (B, 2, H, 1, D) this step's keys and values of layer `layer`.
        indices: that layer's indices plus `position_offset(index)`.
        layer: n, a Python int.

    Returns:
        `(cache, keys, values)`: the updated cache, and layer n's (B, H, L, D) keys
        and values.
    """
    cache = tf.tensor_scatter_nd_update(cache, indices, tf.cast(update, cache.dtype))
    return cache, cache[layer, 0], cache[layer, 1]
