"""Data-parallel training follows single-device training for the same global batch.

Both tests run `distributed_job.py` in subprocesses: logical CPU devices and
multi-worker collectives must be configured before TensorFlow initialises.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from training_helpers import REPO
from training_helpers import python_env
from training_helpers import run_python

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_job.py")
TIMEOUT_S = 180


def _check_same_training(reference, other):
    # Same loss at every step (the first one is before any update) ...
    np.testing.assert_allclose(other["losses"], reference["losses"], rtol=1e-4)
    # ... and the same weights after the updates. (The attention key biases get
    # gradients that are zero up to rounding, which Adam turns into steps of
    # arbitrary sign: hence an absolute tolerance of a few learning-rate steps.)
    np.testing.assert_allclose(
        other["weight_sums"], reference["weight_sums"], rtol=1e-4, atol=0.05
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(initial weights path, result) of the single-device run all others must match."""
    folder = tmp_path_factory.mktemp("reference")
    init = str(folder / "init.weights.h5")  # written by this run, loaded by the others
    process = run_python(
        [JOB, "--strategies", "default", "--init", init, "--out", str(folder / "ref.json")],
        timeout=TIMEOUT_S,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads((folder / "ref.json").read_text())["default"]
    assert result["replicas"] == 1
    return init, result


def test_mirrored_over_two_logical_cpus_matches_one_device(reference, tmp_path):
    init, expected = reference
    out = tmp_path / "result.json"
    process = run_python(
        [JOB, "--strategies", "mirrored", "--logical-cpus", "2", "--init", init, "--out", str(out)],
        timeout=TIMEOUT_S,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(out.read_text())["mirrored"]
    assert result["replicas"] == 2
    _check_same_training(expected, result)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _run_two_workers(arguments):
    """Runs `python arguments(index)` as the two workers of a loopback cluster; both must succeed."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(
            subprocess.Popen(
                [sys.executable, *arguments(index)],
                env=python_env(TF_CONFIG=json.dumps(tf_config)),
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        errors = [process.communicate(timeout=TIMEOUT_S)[1] for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    for process, error in zip(processes, errors):
        assert process.returncode == 0, error[-3000:]


def test_two_workers_under_multi_worker_mirrored_match_one_process(reference, tmp_path):
    init, expected = reference
    _run_two_workers(lambda index: [JOB, "--strategies", "multi-worker", "--init", init,
                                    "--out", str(tmp_path / f"worker{index}.json")])

    for index in range(2):
        result = json.loads((tmp_path / f"worker{index}.json").read_text())["multi-worker"]
        assert result["replicas"] == 2
        _check_same_training(expected, result)


def test_two_workers_train_a_streamed_run_each_on_its_own_share(tmp_path):
    # Two files: worker i reads file i (`streaming.pass_strings`); each trains on its own
    # batches of half the budget, in step with the other.
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH

    lines = DEFAULT_CMN_ENG_PATH.read_text(encoding="utf-8").splitlines(keepends=True)[:600]
    (tmp_path / "corpus").mkdir()
    for index in range(2):
        (tmp_path / "corpus" / f"part-{index}.tsv").write_text("".join(lines[index::2]), encoding="utf-8")
    run_dir = tmp_path / "run"
    _run_two_workers(lambda index: [
        "-m", "keras_transformer", "train", "--run", str(run_dir), "--preset", "tiny",
        "--data", str(tmp_path / "corpus" / "part-*.tsv"), "--source-vocab-size", "600",
        "--target-vocab-size", "200", "--dictionary", "none", "--batch-tokens", "512",
        "--max-steps", "2", "--strategy", "multi-worker", "--verbose", "0"])
    from keras_transformer.runs.folder import RunFolder

    run = RunFolder(run_dir)
    assert run.config["device"]["replicas"] == 2
    assert run.history.read()[-1]["step"] == 2
    assert len(run.config["data"]["files"]) == 2
