"""The learning rate warms up linearly, peaks at `warmup_steps`, then decays as step^-0.5."""

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
