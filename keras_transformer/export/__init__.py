"""Floor 3: the exported translator (`TranslationModule`) and the versioned writer.

Names load lazily, so that `keras-transformer export --help` imports no TensorFlow.
"""

import importlib

_LAZY = {
    "TranslationModule": "module",
    "check_model_name": "writer",
    "write_export": "writer",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
