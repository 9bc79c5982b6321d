"""A tiny translation run (seeded random weights) for the task objects' tests; the language
model and the classifier runs are the trained ones of tests/conftest.py."""

import os

import keras
import pytest

from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH


def _untrained(root, task_name, data, **options):
    """A prepared run of `task_name` whose final weights are a seeded initialisation."""
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.loading import task_for

    run_dir = str(root / "run")
    config = task_for(task_name).prepare(run_dir, data, "tiny", **options,
                                         model_overrides={"max_length": 24})
    keras.utils.set_random_seed(3)
    task_for(config).build_model(config).save_weights(RunFolder(run_dir).final_weights_path)
    assert RunFolder(run_dir).weights().kind == "last"
    return run_dir


@pytest.fixture(scope="session")
def translation_run(tmp_path_factory):
    return _untrained(tmp_path_factory.mktemp("translate"), "translate", str(DEFAULT_CMN_ENG_PATH),
                      max_pairs=400, source_vocab_size=400, target_vocab_size=250)
