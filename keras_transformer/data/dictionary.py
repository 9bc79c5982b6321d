"""A bilingual dictionary's entries as extra training pairs.

A dictionary file is tab-separated: a header line naming the two columns'
languages (`zh<TAB>en`), then one entry per line (`机器<TAB>machine`). The
bundled one is derived from CC-CEDICT (data/cc-cedict/README.md).

Only the entries whose word occurs in a training source sentence are used: they
teach the words the corpus uses (each once), without flooding a small
corpus with the tens of thousands of words it never needs. Validation and test
sentences are never looked at, so the scores stay honest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from keras_transformer.data.corpus import PathLike
from keras_transformer.data.corpus import SentencePair
from keras_transformer.data.corpus import read_tsv

# The dictionaries shipped in data/, by language pair (either direction).
BUNDLED_DICTIONARIES = {
    frozenset(("zh", "en")): Path(__file__).resolve().parents[2] / "data" / "cc-cedict" / "cedict.tsv",
}


def bundled_dictionary(src: str, tgt: str) -> Path | None:
    """The dictionary shipped for the pair `src`/`tgt` (either direction), or None."""
    return BUNDLED_DICTIONARIES.get(frozenset((src, tgt)))


def read_dictionary(path: PathLike, src: str, tgt: str) -> list[SentencePair]:
    """Reads a dictionary's entries as (source word, target gloss) pairs.

    Args:
        path: the dictionary TSV; its header line names the languages.
        src: source language code of the run (a header column).
        tgt: target language code of the run (a header column).

    Returns:
        The entries in file order, oriented `src` → `tgt`.

    Raises:
        ValueError: if the header does not name both languages, or a line is
            malformed (naming the file and line).
    """
    with open(path, encoding="utf-8-sig") as lines:
        header = lines.readline().rstrip("\r\n").split("\t")
    if src not in header or tgt not in header or src == tgt:
        raise ValueError(
            f"{path}: the header line names the languages {header}; a dictionary for "
            f"{src}→{tgt} needs both as column names (for example `{src}<TAB>{tgt}`)."
        )
    entries = read_tsv(path, header.index(src), header.index(tgt))
    return entries[1:]  # the header line


def entries_in(entries: Iterable[SentencePair], sentences: Sequence[str]) -> list[SentencePair]:
    """The entries whose source word occurs in one of `sentences`.

    "Occurs" is as a substring, which is how words sit in Chinese or Japanese
    text (no spaces); an entry appears once however often its word occurs.

    Args:
        entries: dictionary entries (source word, target gloss).
        sentences: the training source sentences.

    Returns:
        The matching entries, in the order given.
    """
    entries = list(entries)
    lengths = {len(entry.source) for entry in entries}
    present = {
        sentence[start:start + length]
        for sentence in sentences
        for length in lengths
        for start in range(len(sentence) - length + 1)
    }
    return [entry for entry in entries if entry.source in present]
