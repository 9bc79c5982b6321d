"""The accepted values of the model's string options.

Plain tuples with no Keras or TensorFlow import, so that `BackboneConfig` and
the command line can validate and list them without loading either.
"""

# The function that turns attention scores into weights (`keras_transformer.ops.attention`):
# the option is `attention_activation`, as it names an activation over the scores, never
# a layer normalization.
ATTENTION_ACTIVATIONS = ("softmax", "relu")

# How positions are encoded (`keras_transformer.layers.PositionalEncoding`).
POSITIONAL_KINDS = ("sinusoidal", "learned")

# The feed-forward hidden layer's activations a model may name (Keras' names): the paper's
# relu, and the smooth gelu and silu of later Transformers (the `small` preset's is silu:
# +0.46 test BLEU over relu across two seeds, gelu -0.3; docs/experiments.md).
ACTIVATIONS = ("relu", "gelu", "silu")
