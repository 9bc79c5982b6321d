"""Single-text data of the language-model and classifier tasks: readers, streamed split, pipelines."""

import numpy as np
import pytest
import sentencepiece as spm

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.corpus import LabelledFile
from keras_transformer.data.corpus import TextFile
from keras_transformer.data.corpus import class_ids
from keras_transformer.data.corpus import text_column


def test_text_file_reads_a_tatoeba_column_or_whole_lines(tmp_path):
    english = TextFile(str(DEFAULT_CMN_ENG_PATH), column=0).read()
    assert english[:3] == ["Hi.", "Hi.", "Run."] and len(english) == 28155
    plain = tmp_path / "plain.txt"
    plain.write_text("\ufeffone line\n  two\tcolumns  \n", encoding="utf-8")
    assert TextFile(str(plain)).read() == ["one line", "two\tcolumns"]


def test_text_file_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("fine\n\nafter\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"texts.txt: line 2: text is empty"):
        TextFile(str(path)).read()
    with pytest.raises(ValueError, match=r"line 1: expected at least 3 tab-separated columns"):
        TextFile(str(path), column=2).read()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TextFile(str(tmp_path / "missing.txt")).read()


def test_labelled_file_reads_chosen_columns_and_refuses_bad_ones(tmp_path):
    path = tmp_path / "labelled.tsv"
    path.write_text("a\tfirst text\tx\nb\tsecond text\ty\n", encoding="utf-8")
    assert LabelledFile(str(path)).read() == (["a", "b"], ["first text", "second text"])
    assert LabelledFile(str(path), label_column=2, text_column=1).read() == (
        ["x", "y"], ["first text", "second text"])
    with pytest.raises(ValueError, match=r"line 1: expected at least 4 .*label in column 3"):
        LabelledFile(str(path), label_column=3).read()
    with pytest.raises(ValueError, match="must be distinct"):
        LabelledFile(str(path), label_column=1, text_column=1).read()


def test_column_option_takes_a_language_or_a_number():
    assert text_column("en") == (0, "en") and text_column("zh") == (1, "zh")
    assert text_column("2") == (2, None) and text_column(None) == (None, None)
    with pytest.raises(ValueError, match="language of the Tatoeba layout"):
        text_column("fr")


def test_class_ids_follow_the_sorted_names_and_refuse_unknown_labels():
    assert class_ids(["a", "b"], ["b", "a", "b"], "x") == [1, 0, 1]
    with pytest.raises(ValueError, match=r"test split: labels \['c'\] are not among"):
        class_ids(["a", "b"], ["c"], "test split")


def test_the_streamed_split_keeps_equal_texts_on_one_side_and_is_seeded():
    import collections

    from keras_transformer.data.streaming import SplitRule, layout_of, normalize, pass_strings, scan

    layout = layout_of(TextFile(str(DEFAULT_CMN_ENG_PATH), column=0))
    found = scan(layout, SplitRule(seed=0), max_held_out=10_000)
    train = [text for (text,) in pass_strings(layout, found.rule, 0).as_numpy_iterator()]
    parts = [train, [t.encode() for (t,) in found.validation], [t.encode() for (t,) in found.test]]
    assert sum(map(len, parts)) == found.lines == 28155
    keys = [set(normalize(part).numpy()) for part in parts]
    assert not keys[0] & keys[1] and not keys[0] & keys[2] and not keys[1] & keys[2]
    # cmn.txt repeats English sentences (one per Chinese translation): groups are real.
    assert max(collections.Counter(found.validation).values()) > 1
    for part in parts[1:]:
        assert abs(len(part) / found.lines - 0.05) < 0.01
    assert scan(layout, SplitRule(seed=1), max_held_out=10_000).validation != found.validation


@pytest.fixture(scope="module")
def english_tokenizer(tmp_path_factory):
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.data.tokenizer import train_sentencepiece

    texts = TextFile(str(DEFAULT_CMN_ENG_PATH), column=0).read()[:3000]
    return SubwordTokenizer(train_sentencepiece(texts, 500))


def test_lm_batches_are_bos_text_and_text_eos_truncated(english_tokenizer):
    from keras_transformer.data.pipeline import make_lm_eval_dataset

    texts = ["Hello.", "This is a much longer sentence than the first one, by far."]
    (tokens, labels), = make_lm_eval_dataset(texts, english_tokenizer, batch_size=2, max_length=6)
    ids = spm.SentencePieceProcessor(model_proto=english_tokenizer.model_proto).encode(texts)
    tokens, labels = tokens.numpy(), labels.numpy()
    assert tokens.dtype == labels.dtype == np.int32 and tokens.shape == labels.shape
    assert tokens.shape[1] <= 6
    for row, text_ids in enumerate(ids):
        kept = text_ids[:5]
        assert tokens[row, : len(kept) + 1].tolist() == [BOS_ID] + kept
        assert labels[row, : len(kept) + 1].tolist() == kept + [EOS_ID]
        assert not tokens[row, len(kept) + 1:].any()


def test_lm_training_batches_stay_within_the_token_budget_and_hold_every_text(english_tokenizer):
    from keras_transformer.data.pipeline import make_lm_training_dataset

    texts = TextFile(str(DEFAULT_CMN_ENG_PATH), column=0).read()[:1500:3]
    rows = 0
    import tensorflow as tf

    strings = tf.data.Dataset.from_tensor_slices(texts)
    for tokens, labels in make_lm_training_dataset(strings, english_tokenizer, token_budget=256, max_length=32):
        assert tokens.shape[0] * tokens.shape[1] <= 256
        assert (labels.numpy() != PAD_ID).sum(axis=1).min() >= 1  # EOS at least
        rows += tokens.shape[0]
    assert rows == len(texts)


def test_classification_batches_pair_texts_with_their_class_ids(english_tokenizer):
    from keras_transformer.data.pipeline import make_classification_eval_dataset
    from keras_transformer.data.pipeline import make_classification_training_dataset

    texts = ["Is it raining", "Stop", "I see", "What time is it now"]
    (tokens, labels), = make_classification_eval_dataset(texts, [1, 0, 2, 1], english_tokenizer, batch_size=4)
    assert labels.numpy().tolist() == [1, 0, 2, 1] and labels.dtype == np.int32
    ids = spm.SentencePieceProcessor(model_proto=english_tokenizer.model_proto).encode(texts)
    for row, text_ids in enumerate(ids):
        assert tokens.numpy()[row, : len(text_ids)].tolist() == text_ids  # no BOS/EOS
    import tensorflow as tf

    seen = []
    examples = tf.data.Dataset.from_tensor_slices((texts * 10, [1, 0, 2, 1] * 10))
    for tokens, labels in make_classification_training_dataset(
        examples, english_tokenizer, token_budget=64, max_length=16
    ):
        assert tokens.shape[0] * tokens.shape[1] <= 64 and labels.shape == (tokens.shape[0],)
        seen += labels.numpy().tolist()
    assert sorted(seen) == sorted([1, 0, 2, 1] * 10)
