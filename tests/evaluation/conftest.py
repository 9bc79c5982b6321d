"""A tiny run folder (and its export) to evaluate and plot.

The run is prepared on a slice of the bundled corpus (split, tokenizers,
config.json) by the training code; its weights are the tiny model's random
initialisation (seeded), saved as final.weights.h5, and its history.json is
written in the format of `keras_transformer.training.callbacks.RunHistory`.
"""

import json
import os

import keras
import pytest

from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH

SLICE = dict(max_pairs=400, source_vocab_size=400, target_vocab_size=250)
MAX_LENGTH = 16  # positions of the tiny model: short outputs keep beam search fast

# Three epochs as RunHistory writes them; the last validation loss was not finite.
HISTORY = [
    {"epoch": 0, "step": 9, "train_seconds": 6.4, "learning_rate": 0.0395,
     "loss": 5.07, "masked_accuracy": 0.144, "val_loss": 4.33, "val_masked_accuracy": 0.245},
    {"epoch": 1, "step": 18, "train_seconds": 7.7, "learning_rate": 0.0751,
     "loss": 4.47, "masked_accuracy": 0.252, "val_loss": 4.34, "val_masked_accuracy": 0.163},
    {"epoch": 2, "step": 27, "train_seconds": 10.4, "learning_rate": 0.0668,
     "loss": 4.52, "masked_accuracy": 0.221, "val_loss": None, "val_masked_accuracy": 0.245},
]


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    from keras_transformer.models.transformer import Seq2SeqTransformer
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.trainer import prepare_run

    run_dir = str(tmp_path_factory.mktemp("evaluation") / "run")
    prepare_run(
        run_dir, str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny",
        model_overrides={"max_length": MAX_LENGTH}, **SLICE,
    )
    keras.utils.set_random_seed(7)
    folder = RunFolder(run_dir)
    model = Seq2SeqTransformer(folder.config["model"])
    model.save_weights(folder.final_weights_path)
    with open(os.path.join(run_dir, "history.json"), "w", encoding="utf-8") as file:
        json.dump(HISTORY, file)
    return run_dir


@pytest.fixture(scope="session")
def loaded_run(run_dir):
    from keras_transformer.runs.loading import load_run

    return load_run(run_dir)


@pytest.fixture(scope="session")
def export_dir(run_dir, tmp_path_factory):
    """The run exported as the `export` command does (beam 4): `<base>/zh_en/1`."""
    from keras_transformer.export.command import export_run

    base = str(tmp_path_factory.mktemp("export"))
    return export_run(run_dir, "zh_en", base=base, beam=4, preset=False)
