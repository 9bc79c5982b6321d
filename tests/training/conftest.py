"""Shared fixtures for the training tests: a prepared tiny run folder on a corpus slice."""

import os
import shutil
import sys

import pytest

from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for training_helpers
from training_helpers import SLICE  # noqa: E402


@pytest.fixture(scope="session")
def prepared_run(tmp_path_factory):
    """A run folder with split, tokenizers and config of the tiny preset (not trained)."""
    from keras_transformer.training.trainer import prepare_run

    run_dir = tmp_path_factory.mktemp("prepared") / "run"
    prepare_run(str(run_dir), str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny", **SLICE)
    return run_dir


@pytest.fixture
def fresh_run(prepared_run, tmp_path):
    """A copy of `prepared_run` for one test."""
    run_dir = tmp_path / "run"
    shutil.copytree(prepared_run, run_dir)
    return run_dir
