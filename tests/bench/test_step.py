"""`bench step`'s stock design really runs Keras' norm and arg-max, and ours does not; the
other activations are timed against ours."""

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


def test_every_other_activation_is_timed_on_the_same_batches_against_ours(monkeypatch):
    from bench import training
    from bench.common import Results
    from keras_transformer.ops.choices import ACTIVATIONS

    built = []

    class FakeDesign:  # records what `run` builds; times nothing
        def __init__(self, design, config, jit, precision="none", token_budget=4096,
                     baseline_batch=64, steps=20, batches=None):
            self.activation = config.activation
            self.batches = batches if batches is not None else ["batch 0", "batch 1"]
            built.append(self)

        def step(self, index):
            pass

        def summary(self):
            return {"seconds": {"relu": 1.0, "gelu": 2.0, "silu": 1.25}[self.activation]}

    monkeypatch.setattr(training, "Design", FakeDesign)
    results = Results({"preset": "tiny"})
    step.run(results, quick=True)
    assert sorted(design.activation for design in built) == sorted(
        ["relu"] * 3 + [name for name in ACTIVATIONS if name != "relu"])
    assert all(design.batches is built[0].batches for design in built)
    rows = {row["case"].rsplit(", the same 2 batches, ", 1)[1]: row for row in results.rows
            if row["metric"] == "step time"}
    for name in ACTIVATIONS[1:]:
        row = rows[f"ours, {name}"]
        assert row["baseline"] == "ours"
        assert row["ratio_vs_baseline"] == rows["ours"]["value"] / row["value"]
    assert rows["ours"]["baseline"] == "stock"
    assert rows["ours, gelu"]["ratio_vs_baseline"] == 0.5  # twice relu's step time
