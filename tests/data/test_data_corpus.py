"""Tests of the bounded readers (held-out splits, test files); the split is streaming's (test_streaming.py)."""

import json
import os
import subprocess
import sys

import pytest

from keras_transformer.data.corpus import (
    DEFAULT_CMN_ENG_PATH,
    SentencePair,
    columns_for,
    read_aligned,
    read_cmn_eng,
    read_tsv,
)


# --- reading -----------------------------------------------------------------


def test_cmn_eng_reads_zh_source_en_target_without_bom():
    pairs = read_cmn_eng()
    assert len(pairs) == 28155
    assert pairs[0] == SentencePair(source="嗨。", target="Hi.")
    assert pairs[1] == SentencePair(source="你好。", target="Hi.")
    reverse = read_cmn_eng(src="en", tgt="zh")
    assert reverse[0] == SentencePair(source="Hi.", target="嗨。")


def test_columns_for_known_layout_and_unknown_language():
    assert columns_for("zh", "en") == (1, 0)
    assert columns_for("en", "zh") == (0, 1)
    with pytest.raises(ValueError, match="'fr'"):
        columns_for("fr", "en")
    with pytest.raises(ValueError):
        columns_for("en", "en")


def test_read_tsv_explicit_columns_strips_bom_and_crlf(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes("\ufeffid1\tbonjour\thello\r\nid2\tmerci\tthanks\n".encode("utf-8"))
    assert read_tsv(path, source_column=1, target_column=2) == [
        SentencePair("bonjour", "hello"),
        SentencePair("merci", "thanks"),
    ]


def test_ragged_line_names_file_and_line(tmp_path):
    path = tmp_path / "ragged.tsv"
    path.write_text("a\tb\tc\nd\te\tf\nonly-one-column\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"ragged\.tsv: line 3: .*at least 2 .*found 1"):
        read_tsv(path, 1, 0)


def test_empty_file_names_file(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.tsv: line 1: file is empty"):
        read_tsv(path, 1, 0)
    bom_only = tmp_path / "bom.txt"
    bom_only.write_bytes(b"\xef\xbb\xbf\n")
    with pytest.raises(ValueError, match=r"bom\.txt: line 1: file is empty"):
        read_aligned(bom_only, bom_only)


def test_bad_encoding_names_file_line_and_utf8(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("Hi.\t嗨。\n".encode("utf-8") + "Café.\t咖啡。\n".encode("latin-1", "replace"))
    with pytest.raises(ValueError, match=r"latin1\.tsv: line 2: byte 0xe9 at column 4 .*UTF-8"):
        read_tsv(path, 1, 0)
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("ok\n".encode("utf-8") + "ok\n".encode("utf-8") + "你好\n".encode("gbk"))
    with pytest.raises(ValueError, match=r"gbk\.txt: line 3: .*UTF-8"):
        read_aligned(gbk, gbk)


def test_empty_sentence_names_file_and_line(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("a\tb\n \tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"c\.tsv: line 2: source sentence is empty"):
        read_tsv(path, 0, 1)


def test_read_aligned_pairs_lines(tmp_path):
    src, tgt = tmp_path / "train.zh", tmp_path / "train.en"
    src.write_text("\ufeff你好。\n谢谢。\n", encoding="utf-8")
    tgt.write_text("Hello.\nThanks.", encoding="utf-8")  # no final newline
    assert read_aligned(src, tgt) == [
        SentencePair("你好。", "Hello."),
        SentencePair("谢谢。", "Thanks."),
    ]


def test_read_aligned_different_line_counts(tmp_path):
    src, tgt = tmp_path / "a.zh", tmp_path / "a.en"
    src.write_text("一\n二\n三\n", encoding="utf-8")
    tgt.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.zh has 3 lines but .*a\.en has 2.*a\.zh: line 3"):
        read_aligned(src, tgt)
