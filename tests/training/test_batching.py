"""`--batching`: every task's training data follows it, under XLA too."""

import pytest

from keras_transformer.data import pipeline
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.tasks.loading import task_for
from keras_transformer.training.trainer import train
from training_helpers import FAST


@pytest.mark.parametrize("run_fixture", ["prepared_run", "lm_run", "classify_run"])
def test_every_task_batches_as_its_training_setting_says(run_fixture, request, monkeypatch):
    run_dir = RunFolder(str(request.getfixturevalue(run_fixture)))
    run_config = run_dir.config
    calls = []
    sort = pipeline._sorted_batches
    monkeypatch.setattr(pipeline, "_sorted_batches",
                        lambda *args, **kwargs: calls.append(1) or sort(*args, **kwargs))
    for batching, sorted_calls in (("buckets", 0), ("sorted", 1)):
        config = TrainingConfig(batching=batching, token_budget=512)
        train_data, _, _ = task_for(run_config).make_datasets(run_dir, run_config, config, seed=0)
        assert len(calls) == sorted_calls, batching
        assert next(iter(train_data)) is not None  # and the batches come


@pytest.mark.parametrize("run_fixture", ["prepared_run", "lm_run", "classify_run"])
def test_sorted_batches_under_xla_fit_the_few_fixed_shapes(run_fixture, request):
    # Under XLA every batch is padded to a width L, a multiple of 8, and (for the
    # translator and the language model) to budget // L rows: a sorted batch must
    # hold no more real rows than that, or its shape would be new to XLA.
    run_dir = RunFolder(str(request.getfixturevalue(run_fixture)))
    run_config = run_dir.config
    budget = 512
    config = TrainingConfig(batching="sorted", token_budget=budget)
    train_data, _, steps = task_for(run_config).make_datasets(
        run_dir, run_config, config, seed=0, static_shapes=True
    )
    shapes = set()
    for inputs, labels in train_data.take(steps):
        tensors = [*(inputs.values() if isinstance(inputs, dict) else [inputs]), labels]
        tokens = [t.numpy() for t in tensors if t.shape.rank == 2]
        rows, width = tokens[0].shape
        assert width % 8 == 0
        real_rows = max(int((t != 0).any(axis=1).sum()) for t in tokens)
        assert real_rows <= budget // width
        if run_fixture != "classify_run":  # a classifier's rows are not padded
            assert rows == budget // width
        shapes.add((rows, width))
    widths = {width for _, width in shapes}
    assert len(shapes) == len(widths) or run_fixture == "classify_run"


def test_train_runs_sorted_batches_under_xla(fresh_run):
    config = TrainingConfig(batching="sorted", jit_compile=True, max_steps=2, **FAST)
    train(str(fresh_run), config, verbose=0)
    run_config = RunFolder(str(fresh_run)).config
    assert run_config["device"]["jit_compile"] is True
    assert RunFolder(str(fresh_run)).history.read()[-1]["step"] == 2
