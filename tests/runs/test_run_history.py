"""A run's history: history.json and history.csv written together, read with clear errors."""

import pytest

from keras_transformer.runs.folder import RunFolder


def test_history_round_trips_and_writes_every_key_as_a_csv_column(tmp_path):
    history = RunFolder(tmp_path / "run").history
    assert history.read() == [] and history.record(epoch=0) == {}
    records = [{"epoch": 0, "step": 9, "loss": 5.0, "val_loss": None},
               {"epoch": 1, "step": 18, "loss": 4.0, "val_loss": 3.5, "extra": 1.0}]
    history.write(records)
    assert history.read() == records
    csv_lines = (tmp_path / "run" / "history.csv").read_text().splitlines()
    assert csv_lines[0] == "epoch,step,loss,val_loss,extra" and len(csv_lines) == 3
    assert history.record(epoch=1) == records[1] and history.record(step=9) == records[0]
    assert history.record(epoch=5) == {}


def test_required_history_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="train a run first"):
        RunFolder(tmp_path / "missing").history.read(required=True)
    with pytest.raises(FileNotFoundError, match="wait for the first epoch"):
        RunFolder(tmp_path).history.read(required=True)
    (tmp_path / "history.json").write_text("[]")
    with pytest.raises(ValueError, match="no epochs yet"):
        RunFolder(tmp_path).history.read(required=True)
    (tmp_path / "history.json").write_text('{"epoch": 0}')
    with pytest.raises(ValueError, match="list of epoch records"):
        RunFolder(tmp_path).history.read()
    (tmp_path / "history.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        RunFolder(tmp_path).history.read()
