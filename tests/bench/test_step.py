"""`bench step`'s stock design really runs Keras' norm and arg-max, and ours does not."""

from graph_ops import gradient_op_types
from graph_ops import logit_readers

from bench import step
from keras_transformer.layers.normalization import LayerNormalization
from keras_transformer.training.losses import MaskedTokenAccuracy


def _norm_gradient_ops():
    norm = LayerNormalization()
    norm.build((2, 3, 8))
    return gradient_op_types(norm, (2, 3, 8))


def test_the_stock_design_swaps_in_keras_norm_and_arg_max_and_only_while_patched():
    with step._stock_norm(), step._stock_arg_max():
        assert _norm_gradient_ops()["RsqrtGrad"] == 1  # TensorFlow differentiates the formula
        assert logit_readers(MaskedTokenAccuracy()) != ["ArgMax"]  # keras.ops.argmax's passes
    assert _norm_gradient_ops()["RsqrtGrad"] == 0
    assert logit_readers(MaskedTokenAccuracy()) == ["ArgMax"]
