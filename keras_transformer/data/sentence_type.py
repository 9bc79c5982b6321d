"""The example classification data: sentence type (question, exclamation, statement) from cmn.txt.

Derived from the bundled Tatoeba corpus (`data/cmn-eng/cmn.txt`, CC-BY 2.0 FR): for
one language's column, each sentence's label is read from its final punctuation,
which is then removed, so the classifier must learn the type from the words:

- "?" or "？" → question; "!" or "！" → exclamation; "." or "。" (or "．") → statement;
- the whole run of final marks is removed ("Really?!" has two kinds: skipped); a run
  with an ellipsis ("..", "…") is skipped (it marks a trailing-off, not a type);
- a sentence with no final mark (closing quotes, for instance) is skipped, and so is
  one that nothing is left of;
- each distinct sentence is kept once (its first line), as many English sentences
  have several Chinese translations.

Each output line is `label<TAB>text<TAB>attribution`: the attribution column of the
line the sentence came from, as the license asks. Standard library only.

Usage (writes data/sentence-type/en.tsv and zh.tsv, the files in the repository):
    python -m keras_transformer.data.sentence_type --language en
    python -m keras_transformer.data.sentence_type --language zh
"""

import argparse
import os
from pathlib import Path

from keras_transformer.data.corpus import CMN_ENG_COLUMNS
from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.corpus import read_sources

QUESTION, EXCLAMATION, STATEMENT = "question", "exclamation", "statement"
FINAL_MARKS = {
    "?": QUESTION, "？": QUESTION,
    "!": EXCLAMATION, "！": EXCLAMATION,
    ".": STATEMENT, "。": STATEMENT, "．": STATEMENT,
    "…": None,  # an ellipsis: no type
}
DEFAULT_OUTPUT_DIR = DEFAULT_CMN_ENG_PATH.parents[1] / "sentence-type"
ATTRIBUTION_COLUMN = 2


def sentence_type(sentence):
    """`(label, text without its final marks)`, or None when the sentence has no one type.

    Example:
        >>> sentence_type("Is it raining?")
        ('question', 'Is it raining')
        >>> sentence_type("Wait...") is None
        True
    """
    sentence = sentence.strip()
    text = sentence.rstrip("".join(FINAL_MARKS))
    marks = sentence[len(text):]
    kinds = {FINAL_MARKS[mark] for mark in marks}
    text = text.rstrip()
    if not marks or None in kinds or len(kinds) != 1 or ".." in marks or "。。" in marks or not text:
        return None
    return kinds.pop(), text


def sentence_type_lines(language, corpus=DEFAULT_CMN_ENG_PATH):
    """The `label<TAB>text<TAB>attribution` lines of one language of cmn.txt (see the module)."""
    if language not in CMN_ENG_COLUMNS:
        raise ValueError(f"unknown language {language!r}; cmn.txt has {sorted(CMN_ENG_COLUMNS)}")
    column = CMN_ENG_COLUMNS[language]
    seen = set()
    lines = []
    for line in read_sources(corpus):
        fields = line.split("\t")
        typed = sentence_type(fields[column])
        if typed is None or typed[1] in seen:
            continue
        seen.add(typed[1])
        lines.append(f"{typed[0]}\t{typed[1]}\t{fields[ATTRIBUTION_COLUMN]}")
    return lines


def output_path(language, output_dir=DEFAULT_OUTPUT_DIR):
    """data/sentence-type/<language>.tsv."""
    return Path(output_dir) / f"{language}.tsv"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--language", required=True, choices=sorted(CMN_ENG_COLUMNS))
    parser.add_argument("--corpus", default=str(DEFAULT_CMN_ENG_PATH), help="the cmn.txt file")
    parser.add_argument("--output-dir", default=str(DEFAULT_OUTPUT_DIR))
    args = parser.parse_args(argv)
    from keras_transformer import files

    lines = sentence_type_lines(args.language, args.corpus)
    path = output_path(args.language, args.output_dir)
    os.makedirs(path.parent, exist_ok=True)
    files.write_lines(path, lines)
    counts = {label: sum(line.startswith(label + "\t") for line in lines)
              for label in (QUESTION, EXCLAMATION, STATEMENT)}
    print(f"{path}: {len(lines)} sentences, {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
