"""Which weights a command reads: best, last, the current average, a file; clear errors."""

import keras
import numpy as np
import pytest

from keras_transformer import files
from keras_transformer.runs.folder import RunFolder
from keras_transformer.runs.weights import epochs_to_average
from keras_transformer.runs.weights import select_checkpoints


def _model(value):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.set_weights([np.full_like(w, value) for w in model.get_weights()])
    return model


def test_weights_choice_best_last_file_and_errors(tmp_path):
    run = RunFolder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no weights yet"):
        run.weights("last")
    run.history.write([{"epoch": 0, "step": 10, "val_loss": 3.0}, {"epoch": 1, "step": 20, "val_loss": 3.2}])
    run.checkpoints.save(_model(1.0), "step", 20, keep=3)
    last = run.weights("last")
    assert (last.kind, last.step, last.epoch, last.val_loss) == ("checkpoint", 20, 1, 3.2)
    # No best weights recorded: "best" falls back to the last ones, and says so.
    assert run.weights("best").kind == "checkpoint"

    run.checkpoints.write_best(_model(0.5), epoch=0, step=10, val_loss=3.0)
    best = run.weights("best")
    assert (best.kind, best.epoch, best.step, best.val_loss) == ("best", 0, 10, 3.0)
    assert best.record(relative_to=str(tmp_path))["path"] == "best.weights.h5"
    run.checkpoints.save_weights(_model(1.5), run.final_weights_path)
    assert run.weights("last").kind == "last" and run.weights("last").path == run.final_weights_path

    other = tmp_path / "other.weights.h5"
    run.checkpoints.save_weights(_model(3.0), str(other))
    assert run.weights(str(other)).kind == "file"
    with pytest.raises(FileNotFoundError, match="accepted: best, last, average"):
        run.weights(str(tmp_path / "nowhere.weights.h5"))


def test_the_newest_epoch_checkpoint_beats_an_older_step_checkpoint_as_last(tmp_path):
    run = RunFolder(tmp_path)
    run.history.write([{"epoch": 0, "step": 10}, {"epoch": 1, "step": 30}])
    run.checkpoints.save(_model(1.0), "step", 20, keep=3)
    run.checkpoints.save(_model(2.0), "epoch", 1, keep=3)
    last = run.weights("last")
    assert (last.path, last.step, last.epoch) == (run.checkpoint_path("epoch", 1), 30, 1)


def test_the_default_is_the_current_average_else_the_best(tmp_path):
    run = RunFolder(tmp_path)
    run.history.write([{"epoch": epoch, "step": 10 * epoch} for epoch in range(3)])
    for epoch in range(2):
        run.checkpoints.save(_model(float(epoch)), "epoch", epoch, keep=5)
    run.checkpoints.write_best(_model(0.0), epoch=0, step=0, val_loss=1.0)
    assert run.weights().kind == "best"
    run.checkpoints.save_weights(_model(0.5), run.average_weights_path)
    files.write_json(run.average_record_path, {"epoch": 1, "step": 10, "sources": ["a", "b"]})
    default = run.weights()
    assert (default.kind, default.epoch, default.sources) == ("average", 1, ("a", "b"))
    # A newer epoch checkpoint makes that average stale: the best serves again.
    run.checkpoints.save(_model(2.0), "epoch", 2, keep=5)
    assert run.weights().kind == "best"
    assert run.weights("average").path == run.average_weights_path  # asked for, it still serves


def test_the_end_of_training_averages_at_most_half_the_epochs():
    assert epochs_to_average(epochs_trained=20, kept=5) == 5
    assert epochs_to_average(epochs_trained=6, kept=5) == 3
    assert epochs_to_average(epochs_trained=3, kept=3) == 1
    assert epochs_to_average(epochs_trained=20, kept=2) == 2


def test_checkpoint_selection_is_checked_before_anything_loads(tmp_path):
    run = RunFolder(tmp_path)
    with pytest.raises(ValueError, match="--last N or --best N"):
        select_checkpoints(run)
    with pytest.raises(ValueError, match="positive integer"):
        select_checkpoints(run, last=0)
    with pytest.raises(FileNotFoundError, match="no epoch checkpoints"):
        select_checkpoints(run, last=1)
    run.history.write([{"epoch": 0, "step": 5, "val_loss": 4.0}, {"epoch": 1, "step": 10, "val_loss": None},
                       {"epoch": 2, "step": 15, "val_loss": 3.0}])
    for epoch in range(3):
        run.checkpoints.save(_model(float(epoch)), "epoch", epoch, keep=5)
    assert [c.number for c, _ in select_checkpoints(run, last=2)] == [1, 2]
    assert [c.number for c, _ in select_checkpoints(run, best=2)] == [2, 0]
    with pytest.raises(ValueError, match="keeps 3 epoch checkpoints"):
        select_checkpoints(run, last=4)
    with pytest.raises(ValueError, match="Only 2 epoch checkpoints have a recorded validation loss"):
        select_checkpoints(run, best=3)
