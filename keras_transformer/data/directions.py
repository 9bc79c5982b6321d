"""Bidirectional training: both directions of a language pair in one model.

Every training pair teaches twice: source → target with `TO_TARGET_TAG` before the
source, and target → source with `TO_SOURCE_TAG` before the target. A tag that
names the output language is how one model learns several directions (Johnson et
al., 2017, "Google's Multilingual Neural Machine Translation System"); with one
vocabulary for both languages, the encoder and decoder then learn both languages
from the same pairs. The tags are private-use characters, which no real sentence
holds, kept whole by the tokenizer (`train_tokenizers(source_symbols=...)`).

Only the training split holds reversed pairs: validation and test stay in the
run's direction, and the run's source tokenizer puts `TO_TARGET_TAG` before
every sentence it reads (`SubwordTokenizer(prefix=...)`), so a sentence to
translate, in `evaluate`, `translate`, the export or the server, never carries a
tag of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from keras_transformer.data.corpus import SentencePair

TO_TARGET_TAG = "\ue001"  # "translate into the run's target language"
TO_SOURCE_TAG = "\ue002"  # "translate into the run's source language"
DIRECTION_TAGS = (TO_TARGET_TAG, TO_SOURCE_TAG)


def both_directions(pairs: Iterable[SentencePair]) -> list[SentencePair]:
    """The training pairs of a bidirectional run.

    Args:
        pairs: (source, target) training pairs.

    Returns:
        `pairs` with `TO_TARGET_TAG` before each source, then the same pairs turned
        around (target, source) with `TO_SOURCE_TAG` before each target.
    """
    pairs = list(pairs)
    return [SentencePair(TO_TARGET_TAG + pair.source, pair.target) for pair in pairs] + [
        SentencePair(TO_SOURCE_TAG + pair.target, pair.source) for pair in pairs
    ]
