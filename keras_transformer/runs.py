"""The run folder: the contract between `train` and the steps that read a model.

A run folder (written by `keras_transformer.training`) holds:
    config.json            {"model": TransformerConfig fields, "preset", "training": settings,
                            "data": {languages, splits, tokenizer files, max lengths}}
    source.model, target.model   the SentencePiece models
    splits/{train,validation,test}.tsv   source<TAB>target pairs
    checkpoints/step-NNNNNNNN.weights.h5, final.weights.h5, model.keras
    history.json, logs/    training curves and TensorBoard events

This module reads it back: the model with its best available weights and the
tokenizers, for `translate`, `export`, `evaluate` and the plots.
"""

import dataclasses
import json
import os

CONFIG_NAME = "config.json"
FINAL_WEIGHTS_NAME = "final.weights.h5"
CHECKPOINT_DIR = "checkpoints"
SPLIT_DIR = "splits"
EVALUATION_NAME = "evaluation.json"


@dataclasses.dataclass
class Run:
    """A trained translator read from its run folder."""

    path: str
    config: dict
    model: object  # Seq2SeqTransformer
    source_tokenizer: object  # SubwordTokenizer
    target_tokenizer: object
    weights_path: str

    @property
    def max_source_length(self):
        return self.config["data"]["max_source_length"]

    def split(self, part):
        """The (sources, targets) of the "train", "validation" or "test" split."""
        from keras_transformer.data.corpus import read_tsv
        from keras_transformer.data.corpus import sources_and_targets

        path = os.path.join(self.path, SPLIT_DIR, f"{part}.tsv")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} does not exist; accepted splits: train, validation, test.")
        if os.path.getsize(path) == 0:
            return [], []
        return sources_and_targets(read_tsv(path, 0, 1))


def read_config(run_dir):
    """The parsed config.json of a run folder, with a clear error if it is not one."""
    path = os.path.join(run_dir, CONFIG_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} does not exist: {run_dir} is not a run folder. Create one with "
            "`keras-transformer train --run DIR ...`."
        )
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def latest_weights(run_dir):
    """The final weights if training ended, else the newest step checkpoint."""
    final = os.path.join(run_dir, FINAL_WEIGHTS_NAME)
    if os.path.exists(final):
        return final
    directory = os.path.join(run_dir, CHECKPOINT_DIR)
    checkpoints = sorted(
        name for name in (os.listdir(directory) if os.path.isdir(directory) else [])
        if name.startswith("step-") and name.endswith(".weights.h5")
    )
    if not checkpoints:
        raise FileNotFoundError(
            f"{run_dir} holds no weights yet ({FINAL_WEIGHTS_NAME} or {CHECKPOINT_DIR}/step-*.weights.h5); "
            "train longer, or wait for the first checkpoint."
        )
    return os.path.join(directory, checkpoints[-1])


def load_run(run_dir, weights=None):
    """Loads the model and tokenizers of a run folder.

    Args:
        run_dir: the run folder.
        weights: a weights file; default `latest_weights(run_dir)`.

    Returns:
        A `Run`.
    """
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.models.config import TransformerConfig
    from keras_transformer.models.transformer import Seq2SeqTransformer

    config = read_config(run_dir)
    weights = weights or latest_weights(run_dir)
    model = Seq2SeqTransformer(TransformerConfig.from_dict(config["model"]))
    model.load_weights(weights)
    data = config["data"]
    source = SubwordTokenizer.from_file(os.path.join(run_dir, data["source_tokenizer"]))
    target = SubwordTokenizer.from_file(os.path.join(run_dir, data["target_tokenizer"]))
    return Run(run_dir, config, model, source, target, weights)
