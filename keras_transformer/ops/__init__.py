"""Floor 0: the attention formula, the mask helper and argument checks.

Names load lazily, so that the Keras-free modules here (`checks`, `choices`) can
be imported without importing Keras.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "compute_attention_mask": "masks",
    "padding_mask": "masks",
    "resolve_padding_mask": "masks",
    "scaled_dot_product_attention": "attention",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
