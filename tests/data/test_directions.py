"""Tests of bidirectional training (data/directions.py, `train --bidirectional`)."""

import json

import pytest

from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.corpus import SentencePair
from keras_transformer.data.directions import TO_SOURCE_TAG
from keras_transformer.data.directions import TO_TARGET_TAG
from keras_transformer.data.directions import both_directions


def test_both_directions_tags_each_pair_with_its_output_language():
    pairs = [SentencePair("我", "I"), SentencePair("你", "you")]
    assert both_directions(pairs) == [
        SentencePair(TO_TARGET_TAG + "我", "I"), SentencePair(TO_TARGET_TAG + "你", "you"),
        SentencePair(TO_SOURCE_TAG + "I", "我"), SentencePair(TO_SOURCE_TAG + "you", "你"),
    ]
    assert TO_TARGET_TAG != TO_SOURCE_TAG


def test_a_bidirectional_run_trains_both_ways_and_translates_its_own_way(tmp_path):
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.trainer import prepare_run

    dictionary = tmp_path / "d.tsv"
    dictionary.write_text("zh\ten\n我\tI\n", encoding="utf-8")
    options = dict(max_pairs=3000, dictionary=str(dictionary))
    prepare_run(str(tmp_path / "plain"), str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny",
                source_vocab_size=1500, target_vocab_size=800, **options)
    prepare_run(str(tmp_path / "both"), str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny",
                bidirectional=True, source_vocab_size=2000, **options)
    plain, both = RunFolder(str(tmp_path / "plain")), RunFolder(str(tmp_path / "both"))
    for part in ("validation", "test"):  # in the run's direction, untagged
        assert both.read_split(part) == plain.read_split(part)
    from streams import training_pass

    plain_pairs, pairs = training_pass(plain), training_pass(both)
    assert ("我", "I") in plain_pairs
    assert sorted(pairs) == sorted(
        [(TO_TARGET_TAG + source, target) for source, target in plain_pairs]
        + [(TO_SOURCE_TAG + target, source) for source, target in plain_pairs]
    )
    config = json.loads((tmp_path / "both" / "config.json").read_text())
    assert config["data"]["bidirectional"] is True and config["data"]["joint_vocabulary"] is True
    assert config["data"]["source_prefix"] == TO_TARGET_TAG
    assert config["model"]["share_vocabulary"] is True

    # Sentences to translate get the run's tag, as its own first piece; the training
    # pipeline's tokenizer adds none (its sources carry their tags).
    source, target = both.tokenizers()
    assert source.prefix == TO_TARGET_TAG and target.prefix == ""
    sentence = "我们明天去北京吧。"
    ids = source.tokenize([sentence]).to_list()[0]
    pieces = [source.id_to_piece(i) for i in ids]
    assert TO_TARGET_TAG in pieces[:2] and TO_SOURCE_TAG not in pieces
    assert ids == source.with_prefix("").tokenize([TO_TARGET_TAG + sentence]).to_list()[0]
    other_way = source.with_prefix("").tokenize([TO_SOURCE_TAG + sentence]).to_list()[0]
    assert other_way != ids  # the two directions read differently
    # A one-direction run's source tokenizer puts nothing before a sentence.
    assert plain.config["data"]["source_prefix"] == "" and plain.tokenizers()[0].prefix == ""


def test_bidirectional_is_a_translation_option(tmp_path, capsys):
    from keras_transformer import cli

    arguments = ["train", "--run", str(tmp_path / "r"), "--task", "lm", "--data",
                 str(DEFAULT_CMN_ENG_PATH), "--bidirectional"]
    assert cli.main(arguments) == 2
    assert "--bidirectional is not read by --task lm" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("word_dropout", [0.0, 0.5])
def test_the_training_pipeline_reads_each_source_with_one_direction_tag(tmp_path, word_dropout):
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.tasks.translator import make_datasets
    from keras_transformer.training.trainer import prepare_run

    prepare_run(str(tmp_path / "both"), str(DEFAULT_CMN_ENG_PATH), "zh", "en", "tiny",
                max_pairs=3000, source_vocab_size=2000, bidirectional=True)
    run_dir = RunFolder(str(tmp_path / "both"))
    source, _ = run_dir.tokenizers()
    tag_ids = {tag: source.with_prefix("").tokenize([tag]).to_list()[0][-1]
               for tag in (TO_TARGET_TAG, TO_SOURCE_TAG)}
    # Word dropout leaves the tags: they sit below the first text id.
    assert max(tag_ids.values()) < source.first_text_id
    config = TrainingConfig(word_dropout=word_dropout)
    train, validation, steps = make_datasets(run_dir, run_dir.config, config, seed=0)

    for inputs, _ in validation.take(3):  # the run's direction, read as sentences are
        tokens = inputs["encoder_tokens"].numpy()
        assert (tokens[:, :2] == tag_ids[TO_TARGET_TAG]).sum(axis=1).tolist() == [1] * len(tokens)
        assert not (tokens == tag_ids[TO_SOURCE_TAG]).any()
    counts = {tag: 0 for tag in tag_ids}
    for inputs, _ in train.take(steps):  # both directions, each source with exactly one tag
        tokens = inputs["encoder_tokens"].numpy()
        real = tokens[(tokens != 0).any(axis=1)]
        found = {tag: (real[:, :2] == token).any(axis=1) for tag, token in tag_ids.items()}
        assert (found[TO_TARGET_TAG] ^ found[TO_SOURCE_TAG]).all()
        for tag in tag_ids:
            counts[tag] += int(found[tag].sum())
    assert counts[TO_TARGET_TAG] == counts[TO_SOURCE_TAG] > 0
