"""The benchmarks read their corpus with the options every command shares."""

from bench import training
from bench.__main__ import parse_args
from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.corpus import pair_files
from keras_transformer.data.corpus import read_cmn_eng


def test_bench_reads_the_corpus_its_pair_options_name(tmp_path):
    pairs = read_cmn_eng(src="en", tgt="zh")[:50]
    source_file, target_file = tmp_path / "en.txt", tmp_path / "zh.txt"
    source_file.write_text("".join(p.source + "\n" for p in pairs), encoding="utf-8")
    target_file.write_text("".join(p.target + "\n" for p in pairs), encoding="utf-8")
    args = parse_args(["training", "--source-file", str(source_file), "--target-file", str(target_file)])
    files = pair_files(args, default_languages=("zh", "en"))
    assert files.read() == pairs

    args = parse_args(["training", "--data", str(DEFAULT_CMN_ENG_PATH), "--src", "en", "--tgt", "zh"])
    training.use_corpus(pair_files(args, default_languages=("zh", "en")))
    try:
        sources, targets, _, _ = training.corpus_and_tokenizers()
    finally:
        training.use_corpus(None)
    english = {pair.source for pair in read_cmn_eng(src="en", tgt="zh")}
    assert sources and set(sources) <= english  # English sources: the options were followed
    assert not set(targets) & english
