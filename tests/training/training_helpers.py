"""Helpers and constants shared by the training tests."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The first pairs of cmn.txt are short, so a few hundred of them train in seconds.
SLICE = dict(max_pairs=400, source_vocab_size=400, target_vocab_size=250)
FAST = dict(token_budget=512, save_freq=4, patience=0, validation_batch_size=64)


def h5_arrays(path):
    """{dataset path: numpy array} of a .weights.h5 file."""
    import h5py

    arrays = {}
    with h5py.File(path, "r") as file:
        file.visititems(
            lambda name, item: arrays.__setitem__(name, item[()])
            if isinstance(item, h5py.Dataset) else None
        )
    return arrays


def python_env(**extra):
    """Environment for a subprocess that imports this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    env.setdefault("KERAS_BACKEND", "tensorflow")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def run_python(args, timeout, **env):
    """Runs `python args...` with a bounded wait; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, *args],
        env=python_env(**env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
