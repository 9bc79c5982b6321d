"""`epochs`: the wall time of `train`'s epochs, our datasets vs autotuned ones.

Keras (3.15) makes a new iterator of each dataset every epoch and drops the one
before, partly read; dropping an autotuned `tf.data` iterator waits for its tuning
thread, which sleeps up to 60 s between rounds. Our pipelines turn autotuning off
(`keras_transformer.data.fitting.for_fit`).

- **ours**: `keras_transformer.training.trainer.train`, the loop of `keras-transformer
  train` (callbacks, checkpoints, validation every epoch), on a prepared run folder.
- **autotuned**: the same, with `tf.data`'s default (autotuning on) set on top of
  every other option our pipelines get.

Both train a copy of one prepared folder (the same split and tokenizers) with the
same seed, so they read the same batches in the same order. An epoch's wall time
comes from the run's history (`train_seconds`); the first epoch (tracing, the
first pass over the corpus) is left out of the mean. The designs run one after
the other, not interleaved: what is measured is the pause between epochs.
"""

import contextlib
import os
import shutil
import tempfile
from unittest import mock

from bench.training import corpus

EPOCHS = 4
QUICK_EPOCHS = 3


def _autotuned(for_fit):
    def datasets(train, validation):
        import tensorflow as tf

        train, validation = for_fit(train, validation)
        options = tf.data.Options()
        options.autotune.enabled = True
        return train.with_options(options), validation.with_options(options)

    return datasets


def _epoch_seconds(run_dir):
    from keras_transformer.runs.folder import RunFolder

    totals = [record["train_seconds"] for record in RunFolder(run_dir).history.read()]
    return [later - earlier for earlier, later in zip([0.0, *totals], totals)]


def run(results, quick=False):
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
    from keras_transformer.data import fitting
    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.trainer import prepare_run
    from keras_transformer.training.trainer import train

    options = results.options
    preset = "tiny" if quick else options.get("preset", "small")
    epochs = QUICK_EPOCHS if quick else EPOCHS
    config = TrainingConfig(epochs=epochs, patience=0,
                            token_budget=options.get("token_budget", 4096))
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="bench-epochs-") as folder:
        prepared = os.path.join(folder, "prepared")
        prepare_run(prepared, corpus() or str(DEFAULT_CMN_ENG_PATH), "zh", "en", preset)
        for design in ("ours", "autotuned"):
            run_dir = os.path.join(folder, design)
            shutil.copytree(prepared, run_dir)
            print(f"  epochs: {design}, {epochs} epochs of the {preset} preset ...", flush=True)
            with (contextlib.nullcontext() if design == "ours"
                  else mock.patch.object(fitting, "for_fit", _autotuned(fitting.for_fit))):
                train(run_dir, config, verbose=0)
            seconds[design] = _epoch_seconds(run_dir)
            print(f"  epochs: {design}: " + ", ".join(f"{s:.1f}" for s in seconds[design]) + " s",
                  flush=True)
    mean = {design: sum(values[1:]) / len(values[1:]) for design, values in seconds.items()}
    for design in ("ours", "autotuned"):
        ratio = mean["autotuned"] / mean[design]
        case = f"{preset}, epochs 2-{epochs}"
        results.add("epochs", case + f", {design}", "mean epoch", round(mean[design], 1), "s",
                    ratio=round(ratio, 2), baseline="autotuned")
        results.add("epochs", case + f", {design}", "slowest epoch",
                    round(max(seconds[design][1:]), 1), "s")
