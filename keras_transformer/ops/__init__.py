"""Floor 0: the attention formula, the mask helper and argument checks."""

from keras_transformer.ops.attention import scaled_dot_product_attention
from keras_transformer.ops.masks import compute_attention_mask
from keras_transformer.ops.masks import padding_mask

__all__ = ["compute_attention_mask", "padding_mask", "scaled_dot_product_attention"]
