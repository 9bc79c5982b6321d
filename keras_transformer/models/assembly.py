"""What every model builder shares: reading a config, and making embeddings, block
options and output norms from it, so the translator, the language model and the
classifier are assembled from the same parts.

Imports Keras (the layers); `config` stays free of it.
"""

import keras

from keras_transformer.layers.normalization import LayerNormalization
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.config import preset


def resolve_config(config, overrides):
    """A `TransformerConfig` from a config, its dict or a preset name, with overrides.

    Args:
        config: a `TransformerConfig`, a dict of its fields, or a preset name
            ("tiny", "small", "base", "big").
        overrides: {field: value} to change.

    Returns:
        A `TransformerConfig`.
    """
    if isinstance(config, str):
        return preset(config, **overrides)
    if isinstance(config, dict):
        return TransformerConfig.from_dict({**config, **overrides})
    if isinstance(config, TransformerConfig):
        return config.replace(**overrides) if overrides else config
    raise ValueError(
        "`config` must be a TransformerConfig, a dict of its fields or a preset "
        f"name; received {type(config).__name__}."
    )


def token_embedding(config, vocab_size, tie_weights, name):
    """A `ReversibleEmbedding` (V, M), its reverse pass the output projection when tied."""
    return keras.layers.ReversibleEmbedding(
        vocab_size,
        config.d_model,
        tie_weights=tie_weights,
        # The paper's N(0, M^-1/2) initialisation pairs with the √M input scaling.
        embeddings_initializer=keras.initializers.RandomNormal(stddev=config.d_model**-0.5),
        name=name,
    )


def block_options(config, window):
    """The `EncoderBlock`/`DecoderBlock` arguments a config sets, for one layer's window."""
    return dict(
        num_heads=config.num_heads,
        inner_dim=config.d_ff,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        layer_norm_epsilon=config.layer_norm_epsilon,
        window=window,
        normalize=config.normalize,
    )


def output_norm(config, name):
    """The LayerNormalization after a pre-LN stack; None for post-LN."""
    if not config.norm_first:
        return None
    return LayerNormalization(epsilon=config.layer_norm_epsilon, name=name)


def float32_logits(name="logits"):
    """A float32 identity: logits leave in float32 under a mixed-precision policy."""
    return keras.layers.Activation("linear", dtype="float32", name=name)
