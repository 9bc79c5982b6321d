"""The checkpoint store: rotated checkpoints, a backup that always names a complete file,
best and final weights."""

import os

import keras
import numpy as np

from keras_transformer.runs.folder import RunFolder


def _model(value):
    """A small compiled model whose every weight is `value`."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.set_weights([np.full_like(w, value) for w in model.get_weights()])
    return model


def _values(path):
    model = _model(0.0)
    model.load_weights(path)
    return {float(value) for weights in model.get_weights() for value in np.ravel(weights)}


def test_backup_names_a_complete_file_and_replaces_the_previous_one(tmp_path):
    store = RunFolder(tmp_path).checkpoints
    assert store.read_backup() is None
    store.write_backup(_model(1.0), epoch=2, step=20)
    store.write_backup(_model(2.0), epoch=3, step=30)
    state = store.read_backup()
    assert (state["epoch"], state["step"]) == (3, 30)
    assert sorted(os.listdir(tmp_path / "backup")) == ["state-00000030.weights.h5", "state.json"]
    assert _values(state["weights"]) == {2.0}


def test_checkpoints_keep_the_newest_of_each_kind(tmp_path):
    run = RunFolder(tmp_path)
    model = _model(1.0)
    for step in (4, 8, 12, 16):
        assert run.checkpoints.save(model, "step", step, keep=2) == run.checkpoint_path("step", step)
    for epoch in range(4):
        run.checkpoints.save(model, "epoch", epoch, keep=3, same_as=run.checkpoint_path("step", 16))
    assert [c.number for c in run.checkpoints.kept("step")] == [12, 16]
    assert [c.number for c in run.checkpoints.kept("epoch")] == [1, 2, 3]
    # An epoch checkpoint of the same state is a link to the step checkpoint, not a copy.
    assert os.path.samefile(run.checkpoint_path("epoch", 3), run.checkpoint_path("step", 16))
    assert not [name for name in os.listdir(run.checkpoint_dir) if name.startswith(".tmp")]


def test_best_and_final_weights_round_trip(tmp_path):
    run = RunFolder(tmp_path)
    assert run.checkpoints.read_best() is None
    run.checkpoints.write_best(_model(0.5), epoch=4, step=40, val_loss=2.5)
    assert run.checkpoints.read_best() == {"epoch": 4, "step": 40, "val_loss": 2.5}
    assert _values(run.best_weights_path) == {0.5}
    os.remove(run.best_weights_path)  # a record without its weights is no best
    assert run.checkpoints.read_best() is None

    run.checkpoints.save_final(_model(1.5))
    assert _values(run.final_weights_path) == {1.5}
    assert np.all(keras.saving.load_model(run.model_path, compile=False).get_weights()[0] == 1.5)
