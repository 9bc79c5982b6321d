"""`python -m bench --intra-op-threads N` runs TensorFlow with N threads per op."""

import json
import os
import subprocess
import sys

import pytest

from bench.__main__ import parse_args

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_negative_thread_count_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--intra-op-threads", "-1"])
    assert "--intra-op-threads must be >= 0" in capsys.readouterr().err


def test_the_thread_count_reaches_tensorflow_and_the_results(tmp_path):
    output = tmp_path / "results.json"
    script = (
        "import sys; from bench.__main__ import main; "
        f"main(['ceiling', '--quick', '--intra-op-threads', '1', '--output', {str(output)!r}]); "
        "import tensorflow as tf; "
        "print('threads', tf.config.threading.get_intra_op_parallelism_threads())"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "threads 1" in done.stdout
    assert json.loads(output.read_text())["options"]["intra_op_threads"] == 1
