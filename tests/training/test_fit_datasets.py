"""The datasets every task gives `fit` carry the options `for_fit` sets.

Without them a multi-worker run would read whole batches on every worker, and an
epoch would sit idle while Keras drops the previous epoch's autotuned iterator
(`keras_transformer.data.fitting.for_fit` says why and what was measured).
"""

import pytest
import tensorflow as tf

from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.tasks.loading import task_for


@pytest.mark.parametrize("run_fixture", ["prepared_run", "lm_run", "classify_run"])
@pytest.mark.parametrize("static_shapes", [False, True])
def test_every_task_gives_fit_datasets_without_autotuning(run_fixture, static_shapes, request):
    run_dir = RunFolder(str(request.getfixturevalue(run_fixture)))
    run_config = run_dir.config
    datasets = task_for(run_config).make_datasets(
        run_dir, run_config, TrainingConfig(), seed=0, static_shapes=static_shapes
    )
    for name, dataset in zip(("training", "validation"), datasets):
        options = dataset.options()
        assert options.autotune.enabled is False, f"the {name} dataset is autotuned"
        assert (options.experimental_distribute.auto_shard_policy
                == tf.data.experimental.AutoShardPolicy.DATA), name
