"""The streamed corpus: the split rule, its caps, the shards of workers, every layout, the record."""

import gzip
import random

import pytest

from keras_transformer.data.corpus import LabelledFile, PairFiles, TextFile
from keras_transformer.data.streaming import (
    SplitRule,
    check_unchanged,
    layout_of,
    pass_strings,
    scan,
)

# Variants of one sentence under normalization: width, case, whitespace.
VARIANTS = ["Ｈｅｌｌｏ  World {i}", "hello world {i}", "HELLO\tWORLD {i} "]


def _pairs(count=600):
    """Distinct pairs plus, for every tenth, copies whose source differs only under
    normalization (and whose target differs outright)."""
    pairs = [(f"source sentence {i}", f"target {i}") for i in range(count)]
    for i in range(0, count, 10):
        pairs += [(variant.format(i=i).replace("\t", " ").strip(), f"other target {i}.{k}")
                  for k, variant in enumerate(VARIANTS)]
    return pairs


def _write(path, pairs, compress=False):
    text = "".join(f"{s}\t{t}\tattribution\n" for s, t in pairs)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as file:
            file.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _shards(folder, pairs, count, seed):
    """`pairs` shuffled into `count` gzipped files under `folder`."""
    pairs = list(pairs)
    random.Random(seed).shuffle(pairs)
    folder.mkdir()
    for index in range(count):
        _write(folder / f"part-{index}.tsv.gz", pairs[index::count], compress=True)
    return str(folder / "part-*.tsv.gz")


def _stream(layout, rule, part="train", **options):
    return sorted(tuple(field.decode("utf-8") for field in example)
                  for example in pass_strings(layout, rule, 0, part=part, **options).as_numpy_iterator())


def test_no_example_is_in_two_parts_not_even_a_copy_under_normalization(tmp_path):
    pairs = _pairs()
    layout = layout_of(PairFiles(str(_write(tmp_path / "c.tsv", pairs))))
    found = scan(layout, SplitRule(seed=0, validation_fraction=0.2, test_fraction=0.2))
    parts = {"validation": found.validation, "test": found.test,
             "train": _stream(layout, found.rule)}
    assert sum(map(len, parts.values())) == len(pairs)  # every pair, each once
    assert sorted(p for part in parts.values() for p in part) == sorted(pairs)
    from keras_transformer.data.streaming import normalize

    keys = {name: set(normalize([s for s, _ in part]).numpy()) if part else set()
            for name, part in parts.items()}
    assert all(keys.values())
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    # The variants of each source share one normalized key, so one part.
    assert len(set(normalize([v.format(i=0) for v in VARIANTS]).numpy())) == 1


def test_a_pairs_part_depends_on_neither_file_order_nor_sharding(tmp_path):
    pairs = _pairs()
    rule = SplitRule(seed=3, validation_fraction=0.1, test_fraction=0.1)
    one = layout_of(PairFiles(str(_write(tmp_path / "one.tsv", pairs))))
    many = layout_of(PairFiles(_shards(tmp_path / "shards", pairs, 3, seed=1)))
    reordered = layout_of(PairFiles(_shards(tmp_path / "other", pairs, 5, seed=2)))
    scans = [scan(layout, rule, max_held_out=40) for layout in (one, many, reordered)]
    for found in scans[1:]:
        assert found.validation == scans[0].validation and found.test == scans[0].test
        assert found.rule == scans[0].rule
        assert found.sample == scans[0].sample
    trains = [_stream(layout, found.rule) for layout, found in zip((one, many, reordered), scans)]
    assert trains[0] == trains[1] == trains[2]
    # Another seed, another split.
    assert scan(one, SplitRule(seed=4, validation_fraction=0.1, test_fraction=0.1),
                max_held_out=40).validation != scans[0].validation


def test_held_out_parts_are_capped_and_the_rest_of_their_share_trains(tmp_path):
    pairs = _pairs()
    layout = layout_of(PairFiles(str(_write(tmp_path / "c.tsv", pairs))))
    rule = SplitRule(validation_fraction=0.2, test_fraction=0.2)
    whole = scan(layout, rule, max_held_out=10_000)
    capped = scan(layout, rule, max_held_out=25)
    assert len(whole.validation) > 100 and len(whole.test) > 100
    assert 0 < len(capped.validation) <= 25 and 0 < len(capped.test) <= 25
    # The cap keeps a part's first examples by hash: a prefix of the uncapped part.
    assert capped.validation == whole.validation[:len(capped.validation)]
    assert capped.test == whole.test[:len(capped.test)]
    train = _stream(layout, capped.rule)
    assert len(train) == capped.train_examples == len(pairs) - len(capped.validation) - len(capped.test)
    assert set(whole.validation) - set(capped.validation) <= set(train)


@pytest.mark.parametrize("files", [1, 3], ids=["by hash, one file", "by file"])
def test_two_workers_read_disjoint_shares_that_make_the_training_part(tmp_path, files):
    pairs = _pairs()
    path = _shards(tmp_path / "c", pairs, files, seed=0)
    layout = layout_of(PairFiles(path))
    found = scan(layout, SplitRule())
    whole = _stream(layout, found.rule)
    shares = [_stream(layout, found.rule, shard=index, num_shards=2) for index in range(2)]
    assert shares[0] and shares[1]
    assert not set(shares[0]) & set(shares[1])
    assert sorted(shares[0] + shares[1]) == whole


def test_every_layout_streams_from_globs_and_gzip(tmp_path):
    (tmp_path / "a").mkdir()
    for index, (sources, targets) in enumerate([(["一", "二"], ["one", "two"]), (["三"], ["three"])]):
        with gzip.open(tmp_path / "a" / f"{index}.zh.gz", "wt", encoding="utf-8") as file:
            file.write("".join(f"{s}\n" for s in sources))
        (tmp_path / "a" / f"{index}.en").write_text("".join(f"{t}\n" for t in targets), encoding="utf-8")
    everything = SplitRule(validation_fraction=0.0, test_fraction=0.0)
    aligned = layout_of(PairFiles(str(tmp_path / "a" / "*.zh.gz"), str(tmp_path / "a" / "*.en")))
    assert _stream(aligned, everything) == sorted([("一", "one"), ("二", "two"), ("三", "three")])

    (tmp_path / "texts.txt").write_text("\ufeffa first text\r\n  second  \n", encoding="utf-8")
    assert _stream(layout_of(TextFile(str(tmp_path / "texts.txt"))), everything) == [
        ("a first text",), ("second",)]
    _write(tmp_path / "c.tsv.gz", [("你好。", "Hello.")], compress=True)
    assert _stream(layout_of(TextFile(str(tmp_path / "c.tsv.gz"), column=1)), everything) == [("Hello.",)]
    assert _stream(layout_of(PairFiles(str(tmp_path / "c.tsv.gz"), source_column=1, target_column=0)),
                   everything) == [("Hello.", "你好。")]
    (tmp_path / "l.tsv").write_text("question\tWhy?\nstatement\tSo.\n", encoding="utf-8")
    labelled = layout_of(LabelledFile(str(tmp_path / "l.tsv")))
    assert _stream(labelled, everything) == [("question", "Why?"), ("statement", "So.")]
    assert scan(labelled, everything, collect_labels=True).labels == ["question", "statement"]


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    _write(folder / "0.tsv.gz", [("a", "b")] * 3, compress=True)
    with gzip.open(folder / "1.tsv.gz", "wt", encoding="utf-8") as file:
        file.write("c\td\nonly-one-column\n")
    with pytest.raises(ValueError, match=r"1\.tsv\.gz: line 2: expected at least 2 .*found 1"):
        scan(layout_of(PairFiles(str(folder / "*.gz"))), SplitRule())
    (tmp_path / "s.txt").write_text("一\n二\n三\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"s\.txt: line 3: has no partner"):
        scan(layout_of(PairFiles(str(tmp_path / "s.txt"), str(tmp_path / "t.txt"))), SplitRule())
    (tmp_path / "e.tsv").write_text("a\tb\n\tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"e\.tsv: line 2: source sentence is empty"):
        scan(layout_of(PairFiles(str(tmp_path / "e.tsv"))), SplitRule())
    (tmp_path / "u.tsv").write_bytes(b"a\tb\n\xff\tc\n")
    with pytest.raises(ValueError, match=r"u\.tsv: line 2: not valid UTF-8"):
        scan(layout_of(PairFiles(str(tmp_path / "u.tsv"))), SplitRule())
    with pytest.raises(FileNotFoundError, match="matches no file"):
        layout_of(PairFiles(str(tmp_path / "none-*.tsv")))


def test_max_examples_reads_the_first_lines_in_file_order(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(50)]
    layout = layout_of(PairFiles(str(_write(tmp_path / "c.tsv", pairs))))
    found = scan(layout, SplitRule(), max_examples=20)
    assert found.lines == 20
    train = _stream(layout, found.rule, max_examples=20)
    assert sorted(train + found.validation + found.test) == sorted(pairs[:20])


def test_a_changed_file_is_refused_in_one_line(tmp_path):
    path = _write(tmp_path / "c.tsv", _pairs(20))
    records = layout_of(PairFiles(str(path))).describe_files()
    check_unchanged(records, "runs/x")
    path.write_text(path.read_text().replace("target 3", "target 4"), encoding="utf-8")  # same size
    with pytest.raises(ValueError, match=r"^runs/x streams .*c\.tsv, which has changed [^\n]*$"):
        check_unchanged(records, "runs/x")
    path.write_text("short\tfile\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bytes, not the"):
        check_unchanged(records, "runs/x")
    path.unlink()
    with pytest.raises(ValueError, match="is missing"):
        check_unchanged(records, "runs/x")


def test_a_run_without_a_corpus_record_is_refused_in_one_line(tmp_path):
    from keras_transformer.data.streaming import stream_of
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.config import TrainingConfig

    with pytest.raises(ValueError, match=r"records no corpus files .*train a new run\.$"):
        stream_of(RunFolder(tmp_path), {"max_length": 8, "split_sizes": {"train": 1}}, TrainingConfig())
