"""A fresh initializer for every sub-layer.

A Keras initializer object fixes its seed when it is made and draws the same
values on every call with the same shape. One object handed to several kernels
therefore gives the query, key and value projections equal weights (and two
kernels of the same size but transposed shapes the same numbers, reshaped), so
every sub-layer gets its own copy, as `keras.layers.MultiHeadAttention` does.

A copy of an initializer made without a seed draws a new seed from Python's
`random` (which `keras.utils.set_random_seed` seeds): builds are reproducible
after `set_random_seed`, and differ without it. A copy of one made with an
explicit integer seed gets a seed derived from it and the sub-layer's name, so a
seeded build is reproducible and its kernels still differ.
"""

import zlib

import keras

# A prime multiplier spreads consecutive user seeds apart before the name is mixed in.
_SEED_MULTIPLIER = 1_000_003
_SEED_MODULUS = 2**31 - 1


def clone_initializer(initializer, salt):
    """A new initializer with `initializer`'s config, for one sub-layer.

    Args:
        initializer: an initializer object, its name or its serialized config.
        salt: the sub-layer's name ("query", "feed_forward", ...); mixed into an
            explicit integer seed so that siblings differ.

    Returns:
        A `keras.initializers.Initializer` that shares no seed with its siblings.

    Example:
        >>> base = keras.initializers.GlorotUniform()
        >>> query, key = clone_initializer(base, "query"), clone_initializer(base, "key")
        >>> bool((query((4, 4)) == key((4, 4))).numpy().all())
        False
    """
    config = keras.initializers.serialize(keras.initializers.get(initializer))
    inner = config.get("config") if isinstance(config, dict) else None
    seed = inner.get("seed") if isinstance(inner, dict) else None
    if isinstance(seed, int) and not isinstance(seed, bool):
        inner["seed"] = (seed * _SEED_MULTIPLIER + zlib.crc32(salt.encode("utf-8"))) % _SEED_MODULUS
    return keras.initializers.deserialize(config)
