"""Test set-up: TensorFlow backend, quiet logs, a clean dtype policy per test."""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for graph_ops


@pytest.fixture(autouse=True)
def _reset_keras_state():
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture
def cli(capsys):
    """Runs `keras-transformer ARGS...` in process; returns (exit code, stdout, stderr)."""
    from keras_transformer.cli import main

    def call(*args):
        code = main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return call


# -- Trained runs of the language-model and classifier tasks, shared by tests/training and
# tests/evaluation (each trained once per session, in seconds: tiny preset, a slice of the data).
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CMN_ENG = os.path.join(REPO, "data", "cmn-eng", "cmn.txt")
SENTENCE_TYPE_EN = os.path.join(REPO, "data", "sentence-type", "en.tsv")
FAST_TASK_FLAGS = ["--preset", "tiny", "--batch-tokens", "512", "--save-freq", "4", "--patience", "0",
                   "--mixed-precision", "none",  # evaluation runs in float32: the same numbers
                   "--verbose", "0", "--epochs", "2"]
LM_TRAIN_ARGS = ["train", "--task", "lm", "--data", CMN_ENG, "--column", "en", "--max-pairs", "400",
                 "--vocab-size", "250", *FAST_TASK_FLAGS]
CLASSIFY_TRAIN_ARGS = ["train", "--task", "classify", "--data", SENTENCE_TYPE_EN, "--language", "en",
                       "--max-pairs", "600", "--vocab-size", "300", *FAST_TASK_FLAGS]


def _trained(tmp_path_factory, name, args):
    from keras_transformer import cli

    run_dir = tmp_path_factory.mktemp(name) / "run"
    assert cli.main([*args, "--run", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory):
    """A language-model run trained for 2 epochs with `keras-transformer train --task lm` (read only)."""
    return _trained(tmp_path_factory, "lm", LM_TRAIN_ARGS)


@pytest.fixture(scope="session")
def classify_run(tmp_path_factory):
    """A sentence-type classifier run trained for 2 epochs with `train --task classify` (read only)."""
    return _trained(tmp_path_factory, "classify", CLASSIFY_TRAIN_ARGS)
