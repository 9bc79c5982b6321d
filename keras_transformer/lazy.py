"""Package names that import their submodule on first use (PEP 562).

A package lists `{name: submodule}` and sets `__getattr__ = lazy_getattr(__name__,
table)`: importing the package then costs nothing, which keeps `keras-transformer
--help` free of TensorFlow, and `keras_transformer.serving` free of the model code.
Standard library only.
"""

import importlib


def lazy_getattr(package, names):
    """A module-level `__getattr__` that loads `names[name]` from `package` when asked.

    Args:
        package: the package's `__name__`.
        names: {attribute: submodule of `package`, e.g. "losses"}.

    Returns:
        The function to assign to the package's `__getattr__`.

    Example:
        >>> __getattr__ = lazy_getattr(__name__, {"TrainingConfig": "config"})  # doctest: +SKIP
    """

    def __getattr__(name):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    return __getattr__
