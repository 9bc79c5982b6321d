"""A tiny translator (tokenizers trained on a corpus slice, a tiny model) to export."""

import itertools
import os
import sys

import keras
import pytest

# Lets test modules import the helper module next to them by plain name.
sys.path.insert(0, os.path.dirname(__file__))

from keras_transformer.data import read_cmn_eng, train_tokenizers
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.export import TranslationModule
from keras_transformer.models import build_transformer


@pytest.fixture(scope="session")
def tiny_translator(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizers")
    pairs = list(itertools.islice(read_cmn_eng(), 0, 28000, 40))
    source_path, target_path = train_tokenizers(
        [p.source for p in pairs], [p.target for p in pairs], folder,
        source_vocab_size=1200, target_vocab_size=500,
    )
    source = SubwordTokenizer.from_file(source_path)
    target = SubwordTokenizer.from_file(target_path)
    keras.utils.set_random_seed(5)
    model = build_transformer(
        "tiny", source_vocab_size=source.vocab_size, target_vocab_size=target.vocab_size
    )
    module = TranslationModule(model, source, target, max_source_length=24, beam_width=3,
                               max_output_length=12)
    return module, (source_path, target_path)


@pytest.fixture(scope="session")
def english_tokenizer():
    """A SentencePiece model of the English side of a corpus slice (400 pieces)."""
    from keras_transformer.data.tokenizer import train_sentencepiece

    pairs = list(itertools.islice(read_cmn_eng(), 0, 28000, 40))
    return SubwordTokenizer(train_sentencepiece([p.target for p in pairs], 400))


def _untrained_run(root, task_name, data):
    """A run folder of `task_name` prepared on `data` (400 examples, tiny preset, 32
    positions), its weights the seeded initialisation (final.weights.h5)."""
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.loading import task_for

    run_dir = str(root / "run")
    task_for(task_name).prepare(run_dir, data, "tiny", max_examples=400, vocab_size=300,
                                model_overrides={"max_length": 32})
    keras.utils.set_random_seed(11)
    folder = RunFolder(run_dir)
    task_for(folder.config).build_model(folder.config).save_weights(folder.final_weights_path)
    return run_dir


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory):
    """An untrained "lm" run on the English side of the bundled corpus."""
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
    from keras_transformer.data.corpus import TextFile

    return _untrained_run(tmp_path_factory.mktemp("lm"), "lm",
                          TextFile(str(DEFAULT_CMN_ENG_PATH), column=0, language="en"))


@pytest.fixture(scope="session")
def classify_run(tmp_path_factory):
    """An untrained "classify" run on the bundled sentence-type data."""
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
    from keras_transformer.data.corpus import LabelledFile

    path = str(DEFAULT_CMN_ENG_PATH.parents[1] / "sentence-type" / "en.tsv")
    return _untrained_run(tmp_path_factory.mktemp("classify"), "classify",
                          LabelledFile(path, language="en"))


def _translator_run(root, seed=7, **model_overrides):
    """A "translate" run prepared on a slice of the bundled corpus (tiny preset, 16
    positions), its weights the seeded initialisation with every matrix doubled
    (final.weights.h5): so scaled, an untrained model's greedy outputs differ from
    sentence to sentence (9 distinct among 40) instead of one repeated word."""
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
    from keras_transformer.models.transformer import Seq2SeqTransformer
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.trainer import prepare_run

    run_dir = str(root / "run")
    prepare_run(run_dir, str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny",
                model_overrides={"max_length": 16, **model_overrides}, max_pairs=400,
                source_vocab_size=400, target_vocab_size=250)
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer(RunFolder(run_dir).config["model"])
    model.set_weights([w * 2.0 if w.ndim >= 2 else w for w in model.get_weights()])
    model.save_weights(RunFolder(run_dir).final_weights_path)
    return run_dir


@pytest.fixture(scope="session")
def translate_run(tmp_path_factory):
    """An untrained "translate" run (zh → en)."""
    return _translator_run(tmp_path_factory.mktemp("translate"))


@pytest.fixture(scope="session")
def window_run(tmp_path_factory):
    """An untrained "translate" run whose self-attention has a local window of 4."""
    return _translator_run(tmp_path_factory.mktemp("window"), window=4)
