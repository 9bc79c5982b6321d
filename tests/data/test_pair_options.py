"""One way to read pairs: the options every pair-reading command shares, and what they read."""

import argparse

import pytest

from keras_transformer.data.corpus import PairFiles
from keras_transformer.data.corpus import SentencePair
from keras_transformer.data.corpus import add_pair_arguments
from keras_transformer.data.corpus import pair_files


def _parse(*argv):
    parser = argparse.ArgumentParser()
    add_pair_arguments(parser)
    return parser.parse_args([str(arg) for arg in argv])


@pytest.fixture
def corpus(tmp_path):
    tatoeba = tmp_path / "cmn.txt"
    tatoeba.write_text("Hi.\t嗨。\tCC-BY\nRun.\t你用跑的。\tCC-BY\n", encoding="utf-8")
    (tmp_path / "train.zh").write_text("嗨。\n你用跑的。\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("Hi.\nRun.\n", encoding="utf-8")
    return tmp_path


EXPECTED = [SentencePair("嗨。", "Hi."), SentencePair("你用跑的。", "Run.")]


def test_every_layout_reads_the_same_pairs(corpus):
    layouts = [
        ("--data", corpus / "cmn.txt", "--src", "zh", "--tgt", "en"),
        ("--data", corpus / "cmn.txt", "--src-column", "1", "--tgt-column", "0"),
        ("--source-file", corpus / "train.zh", "--target-file", corpus / "train.en"),
    ]
    for argv in layouts:
        assert pair_files(_parse(*argv)).read() == EXPECTED, argv
    # No language or column: columns 0 and 1, the run splits' source<TAB>target.
    assert pair_files(_parse("--data", corpus / "cmn.txt")) == PairFiles(str(corpus / "cmn.txt"), None, 0, 1)
    # A command with default languages (train) reads their Tatoeba columns.
    assert pair_files(_parse("--data", "x.tsv"), default_languages=("zh", "en")).source_column == 1
    assert pair_files(_parse()) is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--data", "x", "--src", "zh"], "both --src and --tgt"),
        (["--data", "x", "--src", "de", "--tgt", "en"], "--src-column/--tgt-column"),
        (["--data", "x", "--src-column", "1"], "both --src-column and --tgt-column"),
        (["--source-file", "a"], "both --source-file and --target-file"),
        (["--source-file", "a", "--target-file", "b", "--data", "x"], "not both"),
        (["--source-file", "a", "--target-file", "b", "--src-column", "0", "--tgt-column", "1"], "of --data"),
    ],
)
def test_options_that_do_not_fit_together_are_refused(argv, message):
    with pytest.raises(ValueError, match=message):
        pair_files(_parse(*argv))


def test_missing_files_are_named(corpus):
    with pytest.raises(FileNotFoundError, match="train.de does not exist"):
        pair_files(_parse("--source-file", corpus / "train.de", "--target-file", corpus / "train.en")).read()


def test_train_prepares_a_run_from_two_files(corpus, tmp_path):
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.trainer import prepare_run

    from keras_transformer.data.corpus import read_cmn_eng

    pairs = read_cmn_eng()[:400]
    (corpus / "big.zh").write_text("".join(f"{p.source}\n" for p in pairs), encoding="utf-8")
    (corpus / "big.en").write_text("".join(f"{p.target}\n" for p in pairs), encoding="utf-8")
    data = pair_files(_parse("--source-file", corpus / "big.zh", "--target-file", corpus / "big.en"))
    config = prepare_run(str(tmp_path / "run"), data, "zh", "en", "tiny",
                         source_vocab_size=400, target_vocab_size=250)
    assert config["data"]["target_path"] == str(corpus / "big.en")
    from streams import training_pass

    run = RunFolder(tmp_path / "run")
    streamed = training_pass(run)
    assert streamed and set(streamed) <= {(p.source, p.target) for p in pairs}
    sources, targets = run.read_split("validation")
    assert len(streamed) + len(sources) + len(run.read_split("test")[0]) == len(pairs)


def test_translate_reads_a_column_of_the_same_files(corpus):
    from keras_transformer.data.corpus import read_sources

    assert read_sources(corpus / "cmn.txt", 1) == ["嗨。", "你用跑的。"]
    assert read_sources(corpus / "train.zh") == ["嗨。", "你用跑的。"]
    with pytest.raises(ValueError, match="line 1: expected at least 4"):
        read_sources(corpus / "cmn.txt", 3)
