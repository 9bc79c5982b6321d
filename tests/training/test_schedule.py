"""The learning rate warms up linearly, peaks at `warmup_steps`, then decays as step^-0.5
(or linearly to 0 at `total_steps`)."""

import keras
import numpy as np
import pytest

from keras_transformer.training.schedule import TransformerSchedule


def _rate(schedule, iteration):
    return float(schedule(np.int64(iteration)))


def test_values_at_known_steps_match_the_paper_formula():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000, scale=1.0)
    for iteration in (0, 1, 99, 3999, 4000, 9999, 99999):
        step = iteration + 1
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert _rate(schedule, iteration) == pytest.approx(expected, rel=1e-5)


def test_rate_peaks_at_warmup():
    schedule = TransformerSchedule(d_model=256, warmup_steps=100, scale=0.5)
    rates = [_rate(schedule, i) for i in range(300)]
    assert int(np.argmax(rates)) == 99  # iteration 99 is step 100
    assert max(rates) == pytest.approx(schedule.peak(), rel=1e-5)
    assert all(a < b for a, b in zip(rates[:99], rates[1:100]))
    assert all(a > b for a, b in zip(rates[99:], rates[100:]))


def test_scale_multiplies_the_whole_schedule():
    base = TransformerSchedule(d_model=128, warmup_steps=50, scale=1.0)
    scaled = TransformerSchedule(d_model=128, warmup_steps=50, scale=0.25)
    for iteration in (0, 49, 500):
        assert _rate(scaled, iteration) == pytest.approx(0.25 * _rate(base, iteration), rel=1e-6)


def test_schedule_serializes_inside_an_optimizer():
    schedule = TransformerSchedule(d_model=64, warmup_steps=10, scale=2.0)
    optimizer = keras.optimizers.Adam(learning_rate=schedule)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    restored_schedule = restored._learning_rate  # `learning_rate` is its current value
    assert isinstance(restored_schedule, TransformerSchedule)
    assert restored_schedule.get_config() == schedule.get_config()


def test_rejects_non_positive_arguments():
    with pytest.raises(ValueError):
        TransformerSchedule(d_model=64, warmup_steps=0)
    with pytest.raises(ValueError, match="total_steps"):
        TransformerSchedule(d_model=64, warmup_steps=10, decay="linear")
    with pytest.raises(ValueError, match="total_steps"):
        TransformerSchedule(d_model=64, warmup_steps=10, decay="linear", total_steps=10)
    with pytest.raises(ValueError, match="decay"):
        TransformerSchedule(d_model=64, warmup_steps=10, decay="cosine")


def test_linear_decay_peaks_as_rsqrt_then_falls_in_a_straight_line_to_zero():
    rsqrt = TransformerSchedule(d_model=256, warmup_steps=10, scale=0.5)
    linear = TransformerSchedule(d_model=256, warmup_steps=10, scale=0.5, decay="linear",
                                 total_steps=30)
    rates = np.array([_rate(linear, i) for i in range(40)])
    # The same warmup to the same peak, at the same step.
    for iteration in range(10):
        assert rates[iteration] == pytest.approx(_rate(rsqrt, iteration), rel=1e-5)
    assert rates.max() == pytest.approx(linear.peak(), rel=1e-5) and int(np.argmax(rates)) == 9
    # Then equal steps down: the last update (iteration 29) still learns, 30 on is 0.
    np.testing.assert_allclose(np.diff(rates[9:31]), -linear.peak() / 21, rtol=1e-4)
    assert rates[29] > 0 and np.all(rates[30:] == 0)


def test_compile_model_gives_the_optimizer_the_configured_decay():
    from keras_transformer.models import build_transformer
    from keras_transformer.training.trainer import compile_model

    rates = {}
    for decay in ("rsqrt", "linear"):
        model = build_transformer("tiny", source_vocab_size=20, target_vocab_size=20)
        compile_model(model, warmup_steps=5, lr_decay=decay, total_steps=25)
        model.optimizer.iterations.assign(25)
        rates[decay] = float(model.optimizer.learning_rate)
    assert rates["linear"] == 0.0 and rates["rsqrt"] > 0
