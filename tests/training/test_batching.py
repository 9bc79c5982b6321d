"""`--batching`: every task's training data follows it, and XLA refuses sorted batches."""

import pytest

from keras_transformer.data import pipeline
from keras_transformer.runs import RunDir
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.tasks import task_for
from keras_transformer.training.trainer import train
from training_helpers import FAST


@pytest.mark.parametrize("run_fixture", ["prepared_run", "lm_run", "classify_run"])
def test_every_task_batches_as_its_training_setting_says(run_fixture, request, monkeypatch):
    run_dir = RunDir(str(request.getfixturevalue(run_fixture)))
    run_config = run_dir.read_config()
    calls = []
    sort = pipeline._sorted_batches
    monkeypatch.setattr(pipeline, "_sorted_batches",
                        lambda *args, **kwargs: calls.append(1) or sort(*args, **kwargs))
    for batching, sorted_calls in (("buckets", 0), ("sorted", 1)):
        config = TrainingConfig(batching=batching, token_budget=512)
        train_data, _ = task_for(run_config).make_datasets(run_dir, run_config, config, seed=0)
        assert len(calls) == sorted_calls, batching
        assert next(iter(train_data)) is not None  # and the batches come


def test_train_refuses_sorted_batches_under_xla(fresh_run):
    config = TrainingConfig(batching="sorted", jit_compile=True, max_steps=1, **FAST)
    with pytest.raises(ValueError, match="--batching buckets"):
        train(str(fresh_run), config, verbose=0)
