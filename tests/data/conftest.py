"""Shared fixtures for the data-layer tests: the bundled corpus's parts and tokenizers trained on it."""

import types

import pytest

from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH, PairFiles, SentencePair, sources_and_targets


@pytest.fixture(scope="session")
def cmn_split():
    """The bundled corpus's parts under the default split: `train` is every training pair
    (the scan's sample holds them all: the corpus is smaller than the sample), in sample order."""
    from keras_transformer.data.streaming import SplitRule, layout_of, scan

    found = scan(layout_of(PairFiles(str(DEFAULT_CMN_ENG_PATH), source_column=1, target_column=0)),
                 SplitRule())
    assert len(found.sample) == found.train_examples
    return types.SimpleNamespace(**{part: [SentencePair(*pair) for pair in getattr(found, name)]
                                    for part, name in (("train", "sample"), ("validation", "validation"),
                                                       ("test", "test"))})


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory, cmn_split):
    """source.model / target.model trained on the training split (default sizes)."""
    from keras_transformer.data.tokenizer import train_tokenizers

    sources, targets = sources_and_targets(cmn_split.train)
    out = tmp_path_factory.mktemp("tokenizers")
    train_tokenizers(sources, targets, out)
    return out


@pytest.fixture(scope="session")
def tokenizers(tokenizer_dir):
    """(source, target) SubwordTokenizers."""
    from keras_transformer.data.tokenizer import SubwordTokenizer

    return (
        SubwordTokenizer.from_file(tokenizer_dir / "source.model"),
        SubwordTokenizer.from_file(tokenizer_dir / "target.model"),
    )
