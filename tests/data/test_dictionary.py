"""Tests of the dictionary as extra training pairs (data/dictionary.py, data/cc-cedict)."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.corpus import SentencePair
from keras_transformer.data.dictionary import entries_in
from keras_transformer.data.dictionary import read_dictionary

CEDICT_FOLDER = Path(__file__).resolve().parents[2] / "data" / "cc-cedict"


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_read_dictionary_orients_columns_by_the_header(tmp_path):
    path = write(tmp_path / "d.tsv", "zh\ten\n机器\tmachine\n猫\tcat\n")
    assert read_dictionary(path, "zh", "en") == [SentencePair("机器", "machine"), SentencePair("猫", "cat")]
    assert read_dictionary(path, "en", "zh")[0] == SentencePair("machine", "机器")


def test_read_dictionary_refuses_a_header_without_the_languages(tmp_path):
    path = write(tmp_path / "d.tsv", "机器\tmachine\n")
    with pytest.raises(ValueError, match="header line names the languages"):
        read_dictionary(path, "zh", "en")


def test_entries_in_keeps_only_words_of_the_sentences():
    entries = [SentencePair("机器", "machine"), SentencePair("学习", "learn"), SentencePair("飞机", "plane")]
    assert entries_in(entries, ["我在学习。", "这台机器坏了。"]) == entries[:2]
    assert entries_in(entries, []) == []


def load_make():
    spec = importlib.util.spec_from_file_location("cedict_make", CEDICT_FOLDER / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_keeps_the_first_plain_gloss():
    gloss = load_make().gloss
    assert gloss("CL:臺|台[tai2]/machine/engine") == "machine"
    assert gloss("to learn/to study") == "learn"
    assert gloss("variant of 貓|猫[mao1]") is None
    assert gloss("surname Wang/king") == "king"
    assert gloss("cat (animal)/(dialect) to hide") == "cat"
    assert gloss("a sense with far too many words in it") is None


def test_bundled_dictionary_is_in_the_documented_format():
    lines = (CEDICT_FOLDER / "cedict.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "zh\ten"
    assert (CEDICT_FOLDER / "README.md").exists()  # license and attribution travel with the data
    word, gloss = re.compile(r"^[\u4e00-\u9fff]{1,4}$"), re.compile(r"^[A-Za-z' \-]+$")
    for line in lines[1:]:
        zh, en = line.split("\t")
        assert word.match(zh) and gloss.match(en) and len(en.split()) <= 4, line
    assert len({line.split("\t")[0] for line in lines[1:]}) == len(lines) - 1  # one entry a word


def test_prepare_run_adds_dictionary_pairs_to_training_only(tmp_path):
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.trainer import prepare_run

    dictionary = write(tmp_path / "d.tsv", "zh\ten\n我\tI\n你\tyou\n不存在的词\tnothing\n")
    options = dict(max_pairs=400, source_vocab_size=400, target_vocab_size=250)
    prepare_run(str(tmp_path / "plain"), str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny", **options)
    prepare_run(str(tmp_path / "dict"), str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny",
                dictionary=str(dictionary), **options)
    plain, with_dictionary = RunFolder(str(tmp_path / "plain")), RunFolder(str(tmp_path / "dict"))
    for part in ("validation", "test"):
        assert with_dictionary.read_split(part) == plain.read_split(part)
    from streams import training_pass

    corpus, mixed = training_pass(plain), training_pass(with_dictionary)
    # The word no sentence has is left out; the others join every pass of the stream.
    assert sorted(mixed) == sorted(corpus + [("我", "I"), ("你", "you")])
    assert (tmp_path / "dict" / "splits" / "dictionary.tsv").read_text(encoding="utf-8") == "我\tI\n你\tyou\n"
    recorded = json.loads((tmp_path / "dict" / "config.json").read_text())["data"]["dictionary"]
    assert recorded["pairs"] == 2


def test_train_dictionary_option_auto_none_and_file():
    from keras_transformer.data.dictionary import bundled_dictionary
    from keras_transformer.tasks.translator import _dictionary

    shipped = str(CEDICT_FOLDER / "cedict.tsv")
    assert _dictionary("auto", "zh", "en") == shipped == _dictionary("auto", "en", "zh")
    assert _dictionary("auto", "de", "en") is None and bundled_dictionary("de", "en") is None
    assert _dictionary("none", "zh", "en") is None
    assert _dictionary("my.tsv", "de", "en") == "my.tsv"

