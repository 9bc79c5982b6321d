"""`bench data` makes corpora of distinct pairs from the bundled one, as gzipped shards."""

import glob
import gzip

import pytest

from bench.__main__ import parse_args
from bench.data import make_corpus


def test_the_corpus_holds_distinct_tagged_copies_in_gzipped_shards(tmp_path):
    lines = [["Hi.", "嗨。"], ["Run.", "你用跑的。"], ["Hi.", "你好。"]]
    pattern = make_corpus(str(tmp_path / "small"), 7, lines)
    [path] = glob.glob(pattern)
    with gzip.open(path, "rt", encoding="utf-8") as file:
        pairs = [line.rstrip("\n").split("\t") for line in file]
    assert pairs == [*lines, ["Hi. 1", "嗨。 1"], ["Run. 1", "你用跑的。 1"], ["Hi. 1", "你好。 1"],
                     ["Hi. 2", "嗨。 2"]]
    pattern = make_corpus(str(tmp_path / "large"), 1_000_000, lines * 100_000)
    assert len(glob.glob(pattern)) == 8


def test_sizes_are_checked():
    assert parse_args(["data", "--sizes", "28k,1M"]).sizes == ["28k", "1M"]
    with pytest.raises(SystemExit):
        parse_args(["data", "--sizes", "5M"])
