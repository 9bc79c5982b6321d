"""Shared fixtures for the data-layer tests: a corpus slice and tokenizers trained on it."""

import pytest

from keras_transformer.data.corpus import read_cmn_eng, sources_and_targets, split_pairs


@pytest.fixture(scope="session")
def cmn_split():
    """The bundled corpus, split with the default seed."""
    return split_pairs(read_cmn_eng())


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
