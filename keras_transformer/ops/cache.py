"""Writing into a preallocated key/value cache with core TensorFlow ops only.

Shape notation: B batch, L cache length, T new positions, H heads, D head size.

`keras.ops.slice_update` lowers to `XlaDynamicUpdateSlice` on the TensorFlow
backend, an op outside core TensorFlow that stock TF Serving cannot be relied on
to run; `TensorScatterUpdate` is core, takes its index at run time, and XLA
compiles it too (strided-slice updates need a compile-time index under XLA).
"""

import tensorflow as tf


def update_cache(cache, update, index):
    """Writes `update` into `cache` at positions index .. index + T - 1 of axis 2.

    Args:
        cache: (B, 2, L, H, D) keys and values.
        update: (B, 2, T, H, D) the new positions' keys and values.
        index: scalar int, first position written.

    Returns:
        The updated (B, 2, L, H, D) cache (shapes unchanged).
    """
    shape = tf.shape(update)
    batch, pair, positions = tf.meshgrid(
        tf.range(shape[0]),
        tf.range(shape[1]),
        tf.cast(index, tf.int32) + tf.range(shape[2]),
        indexing="ij",
    )
    indices = tf.stack([batch, pair, positions], axis=-1)  # (B, 2, T, 3)
    return tf.tensor_scatter_nd_update(cache, indices, tf.cast(update, cache.dtype))
