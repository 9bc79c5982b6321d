"""Floor 2: models assembled from the layers.

Names load lazily: `config` (presets, `TransformerConfig`) imports neither Keras
nor TensorFlow, and the command line reads it before deciding to load them.
"""

import importlib

_LAZY = {
    "PRESETS": "config",
    "TransformerConfig": "config",
    "preset": "config",
    "Seq2SeqTransformer": "transformer",
    "build_transformer": "transformer",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
