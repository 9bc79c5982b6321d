"""`RunDir`: every file of a run folder round-trips through one reader and one writer."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer import files
from keras_transformer.data.corpus import SentencePair
from keras_transformer.runs import RunDir


def _model(value):
    """A small compiled model whose every weight is `value`."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.set_weights([np.full_like(w, value) for w in model.get_weights()])
    return model


def test_config_history_splits_and_evaluation_round_trip(tmp_path):
    run = RunDir(tmp_path / "run")
    assert not run.exists() and run.read_history() == [] and run.read_evaluation() is None
    config = {"preset": "tiny", "data": {"source_tokenizer": "source.model"}, "training": {"epochs": 3}}
    run.write_config(config)
    assert run.exists() and run.read_config() == config
    assert run.read_training_config().epochs == 3

    records = [{"epoch": 0, "step": 9, "loss": 5.0, "val_loss": None},
               {"epoch": 1, "step": 18, "loss": 4.0, "val_loss": 3.5, "extra": 1.0}]
    run.write_history(records)
    assert run.read_history() == records
    csv_lines = (tmp_path / "run" / "history.csv").read_text().splitlines()
    assert csv_lines[0] == "epoch,step,loss,val_loss,extra" and len(csv_lines) == 3

    pairs = [SentencePair("你好。", "Hello."), SentencePair("谢谢。", "Thanks.")]
    run.write_split("test", pairs)
    assert run.read_split("test") == (["你好。", "谢谢。"], ["Hello.", "Thanks."])
    with pytest.raises(ValueError, match="accepted"):
        run.split_path("dev")

    run.write_evaluation({"bleu": 12.5, "source": "中文"})
    assert run.read_evaluation() == {"bleu": 12.5, "source": "中文"}


def test_required_history_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="train a run first"):
        RunDir(tmp_path / "missing").read_history(required=True)
    with pytest.raises(FileNotFoundError, match="wait for the first epoch"):
        RunDir(tmp_path).read_history(required=True)
    (tmp_path / "history.json").write_text("[]")
    with pytest.raises(ValueError, match="no epochs yet"):
        RunDir(tmp_path).read_history(required=True)
    (tmp_path / "history.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        RunDir(tmp_path).read_history()


def test_backup_names_a_complete_file_and_replaces_the_previous_one(tmp_path):
    run = RunDir(tmp_path)
    assert run.read_backup() is None
    run.write_backup(_model(1.0), epoch=2, step=20)
    run.write_backup(_model(2.0), epoch=3, step=30)
    state = run.read_backup()
    assert (state["epoch"], state["step"]) == (3, 30)
    assert sorted(os.listdir(tmp_path / "backup")) == ["state-00000030.weights.h5", "state.json"]
    restored = _model(0.0)
    restored.load_weights(state["weights"])
    assert all(np.all(w == 2.0) for w in restored.get_weights())


def test_checkpoints_keep_the_newest_of_each_kind(tmp_path):
    run = RunDir(tmp_path)
    model = _model(1.0)
    for step in (4, 8, 12, 16):
        run.save_checkpoint(model, "step", step, keep=2)
    for epoch in range(4):
        run.save_checkpoint(model, "epoch", epoch, keep=3, same_as=run.step_checkpoint_path(16))
    assert [c.number for c in run.checkpoints("step")] == [12, 16]
    assert [c.number for c in run.checkpoints("epoch")] == [1, 2, 3]
    assert not [name for name in os.listdir(run.checkpoint_dir) if name.startswith(".tmp")]


def test_weights_choice_best_last_file_and_errors(tmp_path):
    run = RunDir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no weights yet"):
        run.weights("last")
    run.write_history([{"epoch": 0, "step": 10, "val_loss": 3.0}, {"epoch": 1, "step": 20, "val_loss": 3.2}])
    run.save_checkpoint(_model(1.0), "step", 20, keep=3)
    last = run.weights("last")
    assert (last.kind, last.step, last.epoch, last.val_loss) == ("checkpoint", 20, 1, 3.2)
    # No best weights recorded: "best" falls back to the last ones, and says so.
    assert run.weights("best").kind == "checkpoint"

    run.write_best(_model(0.5), epoch=0, step=10, val_loss=3.0)
    best = run.weights("best")
    assert (best.kind, best.epoch, best.step, best.val_loss) == ("best", 0, 10, 3.0)
    assert best.record(relative_to=str(tmp_path))["path"] == "best.weights.h5"
    run.save_weights(_model(1.5), run.final_weights_path)
    assert run.weights("last").kind == "last" and run.weights("last").path == run.final_weights_path

    other = tmp_path / "other.weights.h5"
    run.save_weights(_model(3.0), str(other))
    assert run.weights(str(other)).kind == "file"
    with pytest.raises(FileNotFoundError, match="accepted: best, last, average"):
        run.weights(str(tmp_path / "nowhere.weights.h5"))


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "state.json"
    files.write_json(path, {"step": 1})
    with pytest.raises(RuntimeError):
        with files.atomic_path(path) as temporary:
            with open(temporary, "w") as file:
                file.write('{"step": 2')
            raise RuntimeError("killed while writing")
    assert json.loads(path.read_text()) == {"step": 1}
    assert os.listdir(tmp_path) == ["state.json"]
