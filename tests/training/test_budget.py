"""A step budget ends a run at the same optimizer step whatever the machine's speed."""

import pytest

from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.trainer import train
from training_helpers import FAST


def test_max_steps_stops_the_run_at_that_optimizer_step_also_after_a_resume(fresh_run):
    first = train(str(fresh_run), TrainingConfig(epochs=50, max_steps=3, **FAST), verbose=0)
    assert (first.step, first.stopped_by) == (3, "steps")
    resumed = train(str(fresh_run), TrainingConfig(epochs=50, max_steps=5, **FAST), verbose=0)
    assert (resumed.initial_step, resumed.step, resumed.stopped_by) == (3, 5, "steps")
    assert RunFolder(fresh_run).history.read()[-1]["step"] == 5


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_max_steps_must_be_a_positive_integer(bad):
    assert TrainingConfig().max_steps is None
    with pytest.raises(ValueError, match="--max-steps"):
        TrainingConfig(max_steps=bad)
