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
