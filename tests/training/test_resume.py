"""A run killed with SIGKILL resumes from its last checkpoint: same step counter, same weights,
and its data stream at the start of the epoch the checkpoint is in."""

import json
import signal
import subprocess
import sys
import time

import keras
import numpy as np

from training_helpers import FAST
from training_helpers import REPO
from training_helpers import h5_arrays
from training_helpers import python_env
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.callbacks import optimizer_step
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.trainer import train

START_TIMEOUT_S = 120


class _CaptureStart(keras.callbacks.Callback):
    """Saves the state `fit` starts from (after the restore), then ends training."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.step = None

    def on_train_begin(self, logs=None):
        self.step = optimizer_step(self.model)
        self.model.save_weights(self.path)
        self.model.stop_training = True


def _wait_for_backup(process, run_dir):
    metadata = run_dir / "backup" / "state.json"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if metadata.exists():
            return
        if process.poll() is not None:
            raise AssertionError(f"training ended early:\n{process.stderr.read()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"no backup after {START_TIMEOUT_S} s")


def test_sigkilled_run_resumes_with_same_step_and_weights(fresh_run, tmp_path, monkeypatch):
    command = [
        sys.executable, "-m", "keras_transformer", "train", "--run", str(fresh_run),
        "--epochs", "1000", "--minutes", "3", "--verbose", "0",
        "--batch-tokens", str(FAST["token_budget"]), "--save-freq", str(FAST["save_freq"]),
        "--patience", "0",
    ]
    process = subprocess.Popen(
        command, env=python_env(), cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for_backup(process, fresh_run)
        time.sleep(0.5)  # let it train on past the first backup
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, "training ended before it was killed"
    assert not (fresh_run / "model.keras").exists()
    run = RunFolder(fresh_run)
    saved_steps = [checkpoint.number for checkpoint in run.checkpoints.kept("step")]
    assert saved_steps

    from keras_transformer.tasks.translator import Translator

    streams = []
    make_datasets = Translator.make_datasets
    monkeypatch.setattr(Translator, "make_datasets", classmethod(
        lambda cls, *args, **kwargs: streams.append(kwargs) or make_datasets(*args, **kwargs)))
    backup_epoch = json.loads((fresh_run / "backup" / "state.json").read_text())["epoch"]
    probe = _CaptureStart(str(tmp_path / "restored.weights.h5"))
    result = train(str(fresh_run), TrainingConfig(epochs=1000, **FAST), verbose=0, callbacks=[probe])

    # The stream restarts at the epoch of the backup, from that epoch's first batch: the
    # batches the uninterrupted run read from its step epoch * steps on.
    [options] = streams
    assert options["first_epoch"] == backup_epoch
    config = TrainingConfig(epochs=1000, **FAST)
    resumed, _, steps = make_datasets(run, run.config, config, seed=config.seed,
                                      first_epoch=backup_epoch)
    whole, _, _ = make_datasets(run, run.config, config, seed=config.seed)
    expected = list(whole.skip(backup_epoch * steps).take(2))
    for (features, labels), (want_features, want_labels) in zip(resumed.take(2), expected):
        np.testing.assert_array_equal(labels, want_labels)
        np.testing.assert_array_equal(features["encoder_tokens"], want_features["encoder_tokens"])

    assert result.resumed
    # Resumed from the newest complete backup: at or after the first checkpoint seen.
    assert probe.step >= saved_steps[0] > 0
    assert result.initial_step == probe.step
    metadata = json.loads((fresh_run / "backup" / "state.json").read_text())
    assert metadata["step"] >= probe.step
    # The state fit starts from is exactly the checkpoint of that step: every weight
    # and every optimizer variable (moments and the iteration counter).
    checkpoint = h5_arrays(run.checkpoint_path("step", probe.step))
    restored = h5_arrays(probe.path)
    assert checkpoint.keys() == restored.keys()
    assert any(name.startswith("optimizer") for name in restored)
    for name, value in checkpoint.items():
        np.testing.assert_array_equal(restored[name], value, err_msg=name)
