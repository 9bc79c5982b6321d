"""Where a corpus is and how it reads; reading bounded files (held-out splits, a test file).

Training corpora of any size are streamed (`keras_transformer.data.streaming`), never
read whole; the readers here read files that fit in memory: a run's validation and
test splits, the file `evaluate --data` scores, a dictionary. Two layouts are read:

* tab-separated files, one pair per line, with the source and target in chosen
  columns (the bundled Tatoeba file ``data/cmn-eng/cmn.txt`` is
  ``English<TAB>Mandarin<TAB>attribution``);
* two aligned plain-text files, one sentence per line.

Readers are strict: anything malformed raises a ``ValueError`` that names the
file and the 1-based line number, so a broken corpus fails before training.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# Column of each language in the bundled Tatoeba "anki" export (cmn.txt).
CMN_ENG_COLUMNS: Mapping[str, int] = {"en": 0, "zh": 1}

# The bundled corpus, relative to the repository root.
DEFAULT_CMN_ENG_PATH = Path(__file__).resolve().parents[2] / "data" / "cmn-eng" / "cmn.txt"

_BOM = "\ufeff"

PathLike = str | os.PathLike


@dataclasses.dataclass(frozen=True)
class SentencePair:
    """One aligned sentence pair.

    Attributes:
        source: Sentence in the source language (model input).
        target: Sentence in the target language (model output).
    """

    source: str
    target: str


def columns_for(
    src: str, tgt: str, layout: Mapping[str, int] = CMN_ENG_COLUMNS
) -> tuple[int, int]:
    """Maps language codes to (source, target) column indices of a known layout.

    Args:
        src: Source language code, e.g. ``"zh"``.
        tgt: Target language code, e.g. ``"en"``.
        layout: Language code -> 0-based column index. Defaults to cmn.txt's.

    Returns:
        ``(source_column, target_column)``; ``("zh", "en")`` gives ``(1, 0)``.

    Raises:
        ValueError: If a code is not in ``layout`` or both codes are equal.
    """
    for code in (src, tgt):
        if code not in layout:
            raise ValueError(
                f"unknown language {code!r}; this layout has {sorted(layout)}"
            )
    if src == tgt:
        raise ValueError(f"source and target language are both {src!r}")
    return layout[src], layout[tgt]


def _read_lines(path: PathLike) -> list[str]:
    """Reads a UTF-8 text file into lines, without line ends or a leading BOM.

    Decoding is done line by line so that an encoding error can name its line.
    """
    path = Path(path)
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise ValueError(f"{path}: line 1: file is empty")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":  # the final newline ends a line, it does not start one
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{path}: line {number}: byte {raw[error.start]:#04x} at column "
                f"{error.start + 1} is not valid UTF-8; the corpus must be UTF-8 text"
            ) from None
        if line.endswith("\r"):
            line = line[:-1]
        lines.append(line.removeprefix(_BOM) if number == 1 else line)
    return lines


def _check_sentence(text: str, path: Path, number: int, what: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError(f"{path}: line {number}: {what} is empty")
    return text


def read_tsv(
    path: PathLike, source_column: int, target_column: int
) -> list[SentencePair]:
    """Reads sentence pairs from a tab-separated file.

    Columns beyond the two chosen ones (e.g. attributions) are ignored.

    Args:
        path: UTF-8 file, one pair per line; a leading BOM is dropped.
        source_column: 0-based column of the source sentence.
        target_column: 0-based column of the target sentence.

    Returns:
        The pairs in file order, with surrounding whitespace stripped.

    Raises:
        ValueError: Naming the file and 1-based line, if the file is empty,
            is not UTF-8, a line has too few columns, or a sentence is empty.
    """
    path = Path(path)
    if min(source_column, target_column) < 0 or source_column == target_column:
        raise ValueError(
            f"columns must be distinct and >= 0, got {source_column} and {target_column}"
        )
    needed = max(source_column, target_column) + 1
    pairs = []
    for number, line in enumerate(_read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) < needed:
            raise ValueError(
                f"{path}: line {number}: expected at least {needed} tab-separated "
                f"columns, found {len(fields)}"
            )
        pairs.append(
            SentencePair(
                _check_sentence(fields[source_column], path, number, "source sentence"),
                _check_sentence(fields[target_column], path, number, "target sentence"),
            )
        )
    return pairs


def read_aligned(source_path: PathLike, target_path: PathLike) -> list[SentencePair]:
    """Reads sentence pairs from two line-aligned files.

    Args:
        source_path: UTF-8 file with one source sentence per line.
        target_path: UTF-8 file whose line i translates line i of the source.

    Returns:
        The pairs in file order, with surrounding whitespace stripped.

    Raises:
        ValueError: Naming the file and 1-based line, if a file is empty or is
            not UTF-8, a sentence is empty, or the files differ in line count.
    """
    source_path, target_path = Path(source_path), Path(target_path)
    sources = _read_lines(source_path)
    targets = _read_lines(target_path)
    if len(sources) != len(targets):
        longer = source_path if len(sources) > len(targets) else target_path
        raise ValueError(
            f"{source_path} has {len(sources)} lines but {target_path} has "
            f"{len(targets)}; {longer}: line {min(len(sources), len(targets)) + 1} "
            "has no partner"
        )
    return [
        SentencePair(
            _check_sentence(source, source_path, number, "source sentence"),
            _check_sentence(target, target_path, number, "target sentence"),
        )
        for number, (source, target) in enumerate(zip(sources, targets), start=1)
    ]


def read_cmn_eng(
    path: PathLike = DEFAULT_CMN_ENG_PATH, src: str = "zh", tgt: str = "en"
) -> list[SentencePair]:
    """Reads the bundled Tatoeba Chinese-English corpus.

    Args:
        path: The ``English<TAB>Mandarin<TAB>attribution`` file.
        src: Source language code, ``"zh"`` or ``"en"``.
        tgt: Target language code, ``"en"`` or ``"zh"``.

    Returns:
        The pairs in file order (28,155 for the bundled file).
    """
    return read_tsv(path, *columns_for(src, tgt))


def sources_and_targets(pairs: Iterable[SentencePair]) -> tuple[list[str], list[str]]:
    """Unzips pairs into a list of sources and a list of targets."""
    sources, targets = [], []
    for pair in pairs:
        sources.append(pair.source)
        targets.append(pair.target)
    return sources, targets


# -- One way to read pairs from the command line -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PairFiles:
    """Where a parallel text is and how to read it: a TSV's two columns, or two files.

    Attributes:
        path: the tab-separated file, or the source file of a two-file corpus.
        target_path: the target file of a two-file corpus (None for a TSV).
        source_column: 0-based source column of a TSV.
        target_column: 0-based target column of a TSV.
    """

    path: str
    target_path: str | None = None
    source_column: int = 0
    target_column: int = 1

    def read(self) -> list[SentencePair]:
        """The pairs, with errors naming the file and line (see `read_tsv`, `read_aligned`)."""
        for path in filter(None, (self.path, self.target_path)):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path} does not exist.")
            if os.path.isdir(path):
                raise ValueError(f"{path} is a folder; pass a file of sentences.")
        if self.target_path is not None:
            return read_aligned(self.path, self.target_path)
        return read_tsv(self.path, self.source_column, self.target_column)

    def describe(self) -> dict:
        """A JSON-ready record (absolute paths) for a run's or an evaluation's config."""
        if self.target_path is not None:
            return {"path": os.path.abspath(self.path), "target_path": os.path.abspath(self.target_path)}
        return {"path": os.path.abspath(self.path), "source_column": self.source_column,
                "target_column": self.target_column}


@dataclasses.dataclass(frozen=True)
class TextFile:
    """Where a language model's text is: every line of a file, or one column of a TSV.

    Attributes:
        path: the file (UTF-8).
        column: 0-based tab-separated column (None: whole lines).
        language: language code of the text, when known (sets the tokenizer's
            character coverage and default vocabulary size).
    """

    path: str
    column: int | None = None
    language: str | None = None

    def read(self) -> list[str]:
        """The texts in file order, with errors naming the file and line."""
        _check_file(self.path)
        lines = _read_lines(self.path)
        if self.column is None:
            return [_check_sentence(line, Path(self.path), number, "text")
                    for number, line in enumerate(lines, start=1)]
        return column_of(lines, self.column, self.path, what="text", flag="--column")

    def describe(self) -> dict:
        """A JSON-ready record (absolute path) for a run's config."""
        return {"path": os.path.abspath(self.path), "column": self.column, "language": self.language}


@dataclasses.dataclass(frozen=True)
class LabelledFile:
    """Where a classifier's examples are: a TSV with a label column and a text column.

    Attributes:
        path: the file (UTF-8), ``label<TAB>text`` by default; other columns
            (e.g. attributions) are ignored.
        label_column: 0-based column of the label.
        text_column: 0-based column of the text.
        language: language code of the text, when known.
    """

    path: str
    label_column: int = 0
    text_column: int = 1
    language: str | None = None

    def read(self) -> tuple[list[str], list[str]]:
        """``(labels, texts)`` in file order, with errors naming the file and line.

        Raises:
            ValueError: for columns that are equal or negative, a line with too
                few columns, or an empty label or text.
        """
        if min(self.label_column, self.text_column) < 0 or self.label_column == self.text_column:
            raise ValueError(
                "--label-column and --text-column must be distinct and >= 0; received "
                f"{self.label_column} and {self.text_column}."
            )
        _check_file(self.path)
        needed = max(self.label_column, self.text_column) + 1
        labels, texts = [], []
        for number, line in enumerate(_read_lines(self.path), start=1):
            fields = line.split("\t")
            if len(fields) < needed:
                raise ValueError(
                    f"{self.path}: line {number}: expected at least {needed} tab-separated columns "
                    f"(label in column {self.label_column}, text in column {self.text_column}), "
                    f"found {len(fields)}"
                )
            labels.append(_check_sentence(fields[self.label_column], Path(self.path), number, "label"))
            texts.append(_check_sentence(fields[self.text_column], Path(self.path), number, "text"))
        return labels, texts

    def describe(self) -> dict:
        """A JSON-ready record (absolute path) for a run's config."""
        return {"path": os.path.abspath(self.path), "label_column": self.label_column,
                "text_column": self.text_column, "language": self.language}


def _check_file(path: PathLike) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist.")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder; pass a file of sentences.")


def text_column(value: str | None) -> tuple[int | None, str | None]:
    """`--column`: a language of the Tatoeba layout or a 0-based column, as (column, language).

    Example: ``text_column("en")`` is ``(0, "en")``; ``text_column("2")`` is ``(2, None)``.
    """
    if value is None:
        return None, None
    if value in CMN_ENG_COLUMNS:
        return CMN_ENG_COLUMNS[value], value
    try:
        column = int(value)
    except ValueError:
        raise ValueError(
            f"--column {value!r}: expected a language of the Tatoeba layout "
            f"{sorted(CMN_ENG_COLUMNS)} or a 0-based column number."
        ) from None
    if column < 0:
        raise ValueError(f"--column must be >= 0; received {column}.")
    return column, None


def add_pair_arguments(parser, data_help="tab-separated sentence pairs", languages_help=None):
    """Adds the options that say where parallel text is and how to read it.

    One set, shared by every command that reads pairs (`train`, `evaluate --data`):
    `--data FILE` with the pair in columns 0 and 1 (`source<TAB>target`, the layout
    of a run's split files), in the columns of the Tatoeba layout of `--src/--tgt`
    (`English<TAB>Mandarin<TAB>attribution`), or in `--src-column/--tgt-column`;
    or a two-file corpus `--source-file/--target-file` (one sentence a line).
    Standard library only.
    """
    group = parser.add_argument_group(
        "parallel text", "a TSV (--data) or two line-aligned files (--source-file/--target-file)"
    )
    group.add_argument("--data", help=data_help)
    group.add_argument("--source-file", help="source sentences, one a line (with --target-file)")
    group.add_argument("--target-file", help="their translations, line by line (with --source-file)")
    group.add_argument(
        "--src", help=languages_help or "source language: with --data, its column in the Tatoeba "
        f"layout {dict(CMN_ENG_COLUMNS)} (default: columns 0 and 1 are source and target)",
    )
    group.add_argument("--tgt", help="target language (see --src)")
    group.add_argument("--src-column", type=int, help="0-based source column of --data")
    group.add_argument("--tgt-column", type=int, help="0-based target column of --data")
    return group


def pair_files(args, default_languages: tuple[str, str] | None = None) -> PairFiles | None:
    """The `PairFiles` the options of `add_pair_arguments` name (None when none is given).

    Columns of `--data`: `--src-column/--tgt-column` if given; else the Tatoeba
    columns of `--src/--tgt` (each defaulting to `default_languages` when the
    command has defaults); else 0 and 1.

    Raises:
        ValueError: for options that do not fit together, with what is accepted.
    """
    data, source_file, target_file = args.data, args.source_file, args.target_file
    if (source_file is None) != (target_file is None):
        raise ValueError("Give both --source-file and --target-file (one sentence a line), or neither.")
    if (args.src_column is None) != (args.tgt_column is None):
        raise ValueError("Give both --src-column and --tgt-column, or neither.")
    if source_file is not None:
        if data is not None:
            raise ValueError("Give --data or --source-file/--target-file, not both.")
        if args.src_column is not None:
            raise ValueError("--src-column/--tgt-column choose columns of --data, not of --source-file.")
        return PairFiles(source_file, target_path=target_file)
    if data is None:
        if args.src_column is not None:
            raise ValueError("--src-column/--tgt-column need --data.")
        return None
    if args.src_column is not None:
        return PairFiles(data, source_column=args.src_column, target_column=args.tgt_column)
    if args.src is None and args.tgt is None and default_languages is None:
        return PairFiles(data)
    src = args.src or (default_languages or (None, None))[0]
    tgt = args.tgt or (default_languages or (None, None))[1]
    if src is None or tgt is None:
        raise ValueError("Give both --src and --tgt (their Tatoeba columns), or --src-column/--tgt-column.")
    try:
        source_column, target_column = columns_for(src, tgt)
    except ValueError as error:
        raise ValueError(f"{error}; for another layout give --src-column/--tgt-column") from None
    return PairFiles(data, source_column=source_column, target_column=target_column)


def add_source_arguments(parser):
    """`--input` and how to read it, for commands that read source sentences only (translate)."""
    parser.add_argument(
        "--input", help="file with one sentence per line (- for stdin), or a TSV with --src/--src-column"
    )
    parser.add_argument(
        "--src", help=f"with --input: read the column of this language in the Tatoeba layout {dict(CMN_ENG_COLUMNS)}"
    )
    parser.add_argument("--src-column", type=int, help="with --input: read this 0-based TSV column")


def read_sources(path: PathLike, column: int | None = None) -> list[str]:
    """Source sentences of a file (`-`: stdin): every line, or one tab-separated column of each.

    Raises:
        ValueError: naming the file and line, for a missing column or an empty sentence.
    """
    if str(path) == "-":
        import sys

        return column_of([line.rstrip("\n") for line in sys.stdin], column, "<stdin>")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    return column_of(_read_lines(path), column, path)


def column_of(
    lines: list[str], column: int | None, path: PathLike, what: str = "source sentence",
    flag: str = "--src-column",
) -> list[str]:
    """Every line, or its 0-based tab-separated `column` (errors name `path` and the line)."""
    if column is None:
        return lines
    if column < 0:
        raise ValueError(f"{flag} must be >= 0; received {column}.")
    sentences = []
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        if len(fields) <= column:
            raise ValueError(
                f"{path}: line {number}: expected at least {column + 1} tab-separated columns, "
                f"found {len(fields)}"
            )
        sentences.append(_check_sentence(fields[column], path, number, what))
    return sentences


def source_column(args) -> int | None:
    """The column `add_source_arguments`' options name (None: whole lines)."""
    if args.src_column is not None and args.src is not None:
        raise ValueError("Give --src or --src-column, not both.")
    if args.src is not None:
        if args.src not in CMN_ENG_COLUMNS:
            raise ValueError(
                f"unknown language {args.src!r}; this layout has {sorted(CMN_ENG_COLUMNS)}; for "
                "another layout give --src-column"
            )
        return CMN_ENG_COLUMNS[args.src]
    return args.src_column


def class_ids(names: Sequence[str], labels: Iterable[str], where: str) -> list[int]:
    """The class ids of label strings: label ``names[i]`` is class i.

    Raises:
        ValueError: naming `where`, for labels that are not among `names`.
    """
    index = {name: i for i, name in enumerate(names)}
    labels = list(labels)
    unknown = sorted(set(labels) - set(index))
    if unknown:
        raise ValueError(f"{where}: labels {unknown} are not among the run's labels {list(names)}.")
    return [index[label] for label in labels]
