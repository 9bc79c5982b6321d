"""Floor 0: the attention formula, the mask helper and argument checks.

Names load lazily, so that the Keras-free modules here (`checks`, `choices`) can
be imported without importing Keras.
"""

import importlib

_LAZY = {
    "compute_attention_mask": "masks",
    "padding_mask": "masks",
    "scaled_dot_product_attention": "attention",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
