"""`python -m bench --intra-op-threads N --inter-op-threads M` runs TensorFlow with N
threads per op and M ops at once."""

import json
import os
import subprocess
import sys

import pytest

from bench.__main__ import parse_args

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("flag", ["--intra-op-threads", "--inter-op-threads"])
def test_a_negative_thread_count_is_refused_in_one_line(capsys, flag):
    with pytest.raises(SystemExit):
        parse_args([flag, "-1"])
    assert f"{flag} must be >= 0" in capsys.readouterr().err


def test_the_thread_counts_reach_tensorflow_and_the_results(tmp_path):
    output = tmp_path / "results.json"
    script = (
        "import sys; from bench.__main__ import main; "
        "main(['ceiling', '--quick', '--intra-op-threads', '1', '--inter-op-threads', '3', "
        f"'--output', {str(output)!r}]); "
        "import tensorflow as tf; threading = tf.config.threading; "
        "print('threads', threading.get_intra_op_parallelism_threads(), "
        "threading.get_inter_op_parallelism_threads())"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "threads 1 3" in done.stdout
    options = json.loads(output.read_text())["options"]
    assert (options["intra_op_threads"], options["inter_op_threads"]) == (1, 3)
