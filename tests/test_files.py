"""Writing files atomically: a failed write leaves the old file and no temporary one."""

import json
import os

import pytest

from keras_transformer import files


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
