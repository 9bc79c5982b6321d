"""What the task heads share: reading a config of their backbone's shape, and the
float32 logits layer.

Imports Keras (the layers); `config` stays free of it.
"""

import keras

from keras_transformer.models.config import BackboneConfig
from keras_transformer.models.config import preset


def resolve_config(config, shape, settings):
    """A `BackboneConfig` of `shape` from a config, its dict, a preset name or a backbone.

    Args:
        config: a `BackboneConfig`, a dict of its fields, a preset name ("tiny",
            "small", "base", "big") or a `TransformerBackbone` (its config).
        shape: the shape the head needs (`config.ENCODER_DECODER`, ...).
        settings: {setting: value} to change (`BackboneConfig.replace`).

    Returns:
        A `BackboneConfig` of that shape.
    """
    if isinstance(config, str):
        return preset(config, shape, **settings)
    if isinstance(config, dict):
        config = BackboneConfig.from_dict(config)
    config = getattr(config, "config", config)  # a TransformerBackbone's
    if not isinstance(config, BackboneConfig):
        raise ValueError(
            "`config` must be a BackboneConfig, a dict of its fields or a preset "
            f"name; received {type(config).__name__}."
        )
    config = config.replace(**settings) if settings else config
    check_shape(config, shape)
    return config


def check_shape(config, shape):
    """Raises `ValueError` unless the config's backbone has `shape`."""
    if config.shape != shape:
        raise ValueError(
            f"This model needs a backbone of shape {shape}; received a config of shape "
            f"{config.shape}."
        )


def float32_logits(name="logits"):
    """A float32 identity: logits leave in float32 under a mixed-precision policy."""
    return keras.layers.Activation("linear", dtype="float32", name=name)
