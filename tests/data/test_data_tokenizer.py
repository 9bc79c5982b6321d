"""Tests of SentencePiece training and in-graph tokenization."""

import sentencepiece as spm
import tensorflow as tf

import pytest

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.data.tokenizer import (
    SubwordTokenizer,
    default_vocab_size,
    train_sentencepiece,
    train_tokenizers,
)

# Chinese, full- and half-width punctuation, emoji (not in the vocabulary),
# empty and blank lines, digits, mixed scripts, a rare character.
SAMPLE = [
    "我们明天去北京吧！",
    "Tom 说：“你好，世界。”",
    "这个多少钱？ 3.5元",
    "我爱你😀🎉",
    "",
    "   ",
    "How much is it?",
    "It's 5 o'clock, isn't it? Yes -- it is.",
    "龘",
    "e-mail: tom@example.com 😀",
]


def _python_ids(model_proto, sentences):
    return spm.SentencePieceProcessor(model_proto=model_proto).encode(sentences)


def test_models_have_fixed_special_ids_and_sizes(tokenizer_dir, tokenizers):
    for name, size in (("source.model", default_vocab_size("zh")),
                       ("target.model", default_vocab_size("en"))):
        sp = spm.SentencePieceProcessor(model_file=str(tokenizer_dir / name))
        assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (
            PAD_ID, UNK_ID, BOS_ID, EOS_ID)
        assert sp.get_piece_size() == size
    source, target = tokenizers
    assert (source.vocab_size, target.vocab_size) == (5000, 5000)
    assert source.model_proto == (tokenizer_dir / "source.model").read_bytes()


@pytest.mark.parametrize("side", [0, 1])
def test_graph_tokenization_in_tf_data_equals_python(tokenizers, side):
    tokenizer = tokenizers[side]
    dataset = tf.data.Dataset.from_tensor_slices(SAMPLE).batch(4).map(tokenizer.tokenize)
    graph_ids = [row for batch in dataset for row in batch.to_list()]
    expected = _python_ids(tokenizer.model_proto, SAMPLE)
    assert graph_ids == expected
    # The sample does exercise the edge cases: empties and unknown emoji.
    assert expected[4] == [] and expected[5] == []
    assert UNK_ID in expected[3]


def test_bos_eos_and_detokenize(tokenizers):
    source, target = tokenizers
    ids = target.tokenize(tf.constant(["How much is it?", ""]), add_bos=True, add_eos=True)
    plain = _python_ids(target.model_proto, ["How much is it?"])[0]
    assert ids.to_list() == [[BOS_ID] + plain + [EOS_ID], [BOS_ID, EOS_ID]]
    assert target.detokenize(ids).numpy().tolist() == [b"How much is it?", b""]
    # Dense, padded model output: text stops at the first EOS; BOS/PAD dropped.
    dense = tf.constant([[BOS_ID] + plain + [EOS_ID] + plain, [BOS_ID, EOS_ID] + plain + [PAD_ID] * len(plain)])
    assert target.detokenize(dense).numpy().tolist() == [b"How much is it?", b""]
    pieces = target.id_to_string(tf.constant([plain, plain])).numpy()
    assert [p.decode("utf-8") for p in pieces[1]] == [target.id_to_piece(i) for i in plain]
    assert target.id_to_piece(plain[0]).startswith("\u2581")  # SentencePiece's word start
    zh = source.detokenize(source.tokenize(tf.constant(["我们明天去北京吧"])))
    assert zh.numpy()[0].decode("utf-8") == "我们明天去北京吧"


def _ids_after_saved_model(folder, tokenizer, sentences):
    """The ids of `sentences` from a SavedModel that tokenizes with `tokenizer`, loaded back."""
    module = tf.Module()
    module.tokenizer = tokenizer
    module.tokenize = tf.function(
        lambda s: tokenizer.tokenize(s).to_tensor(default_value=PAD_ID),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(folder))
    del module
    got = tf.saved_model.load(str(folder)).tokenize(tf.constant(sentences)).numpy().tolist()
    return [[i for i in row if i != PAD_ID] for row in got]


def test_tokenizer_survives_saved_model(tmp_path, tokenizers):
    source = tokenizers[0]
    expected = _python_ids(source.model_proto, SAMPLE[:4])
    assert _ids_after_saved_model(tmp_path / "sm", source, SAMPLE[:4]) == expected


def test_joint_model_is_written_under_both_names(tmp_path, cmn_split):
    train = cmn_split.train[:3000]
    src_path, tgt_path = train_tokenizers(
        [p.source for p in train], [p.target for p in train], tmp_path,
        joint=True, joint_vocab_size=2500,
    )
    assert src_path.read_bytes() == tgt_path.read_bytes()
    sp = spm.SentencePieceProcessor(model_file=str(src_path))
    assert sp.get_piece_size() == 2500
    assert UNK_ID not in sp.encode("Tom 说你好")  # both scripts are covered


def test_training_is_deterministic(cmn_split):
    text = [p.target for p in cmn_split.train[:2000]]
    assert train_sentencepiece(text, 500) == train_sentencepiece(text, 500)


def test_the_first_text_id_follows_the_special_ids_and_the_tags(tokenizers):
    assert [tokenizer.first_text_id for tokenizer in tokenizers] == [EOS_ID + 1] * 2
    sentences = ["hello world foo bar", "the cat sat on the mat"] * 50
    tags = ["\ue001", "\ue002"]
    tagged = SubwordTokenizer(train_sentencepiece(sentences, 24, user_defined_symbols=tags))
    assert tagged.first_text_id == EOS_ID + 1 + len(tags)
    assert {EOS_ID + 1, EOS_ID + 2} <= set(tagged.tokenize(tags).flat_values.numpy().tolist())


def test_foreign_special_ids_are_rejected():
    # SentencePiece's own defaults: unk 0, bos 1, eos 2, no pad.
    import io

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c d e f", "abc def"] * 20), model_writer=model,
        vocab_size=20, hard_vocab_limit=False, minloglevel=2,
    )
    with pytest.raises(ValueError, match="pad/unk/bos/eos"):
        SubwordTokenizer(model.getvalue())


def test_tokenizer_survives_kernel_cache_clear(cmn_split):
    # tf.random.set_seed clears TF's eager kernel cache, which deletes
    # tf_text's kernel-private model resource (the project's tests and
    # training call keras.utils.set_random_seed).
    text = [p.target for p in cmn_split.train[:2000]]
    tokenizer = SubwordTokenizer(train_sentencepiece(text, 400))
    dataset = tf.data.Dataset.from_tensor_slices(["How much is it?"]).batch(1).map(
        tokenizer.tokenize)
    before = tokenizer.tokenize(tf.constant(["How much is it?"])).to_list()
    tf.random.set_seed(7)
    assert tokenizer.tokenize(tf.constant(["How much is it?"])).to_list() == before
    assert [b.to_list() for b in dataset] == [before]
    assert tokenizer.detokenize(tf.ragged.constant(before)).numpy().tolist() == [b"How much is it?"]


def test_sampling_draws_varied_segmentations_that_detokenize_to_the_text(tokenizers):
    source, target = tokenizers
    sentences = tf.constant(["I think we should go to Beijing tomorrow.", "Machine learning is fun."])
    best = target.tokenize(sentences).to_list()
    assert target.tokenize(sentences).to_list() == best  # no sampling: always the best
    sampler = target.sampling(0.1)
    assert sampler.sample_alpha == 0.1 and target.sample_alpha is None
    draws = [sampler.tokenize(sentences) for _ in range(20)]
    assert len({str(draw.to_list()) for draw in draws}) > 1
    assert any(draw.to_list() != best for draw in draws)
    for draw in draws:
        assert [text.decode() for text in sampler.detokenize(draw).numpy()] == [
            "I think we should go to Beijing tomorrow.", "Machine learning is fun."
        ]
    chinese = source.sampling(0.1)
    assert len({str(chinese.tokenize(tf.constant(["我们明天应该去北京。"])).to_list())
                for _ in range(20)}) > 1


@pytest.mark.parametrize("alpha", [0, -0.1, 1.5])
def test_a_sampling_alpha_outside_0_1_is_refused(tokenizers, alpha):
    with pytest.raises(ValueError, match=r"sample_alpha.*\(0, 1\]"):
        tokenizers[1].sampling(alpha)


def test_a_prefix_is_read_before_every_sentence_in_the_graph_and_after_export(tmp_path, tokenizers):
    source = tokenizers[0]
    prefixed = source.with_prefix("我们")
    assert prefixed.prefix == "我们" and source.prefix == ""
    expected = _python_ids(source.model_proto, ["我们" + s for s in SAMPLE])
    assert prefixed.tokenize(tf.constant(SAMPLE)).to_list() == expected
    assert prefixed.sampling(0.5).prefix == "我们"  # training-time sampling keeps it
    assert prefixed.with_prefix("").tokenize(tf.constant(SAMPLE)).to_list() == _python_ids(
        source.model_proto, SAMPLE)
    assert _ids_after_saved_model(tmp_path / "sm", prefixed, SAMPLE[:4]) == expected[:4]


def test_a_joint_vocabulary_takes_its_size_from_either_side_and_refuses_two(tmp_path, cmn_split):
    train = cmn_split.train[:3000]
    sources, targets = [p.source for p in train], [p.target for p in train]
    source_path, _ = train_tokenizers(
        sources, targets, tmp_path, joint=True, target_vocab_size=2200,
        source_symbols=("\ue001", "\ue002"),
    )
    joint = SubwordTokenizer.from_file(source_path)
    assert joint.vocab_size == 2200
    # Each symbol is one piece of its own, whatever text follows it.
    for symbol in ("\ue001", "\ue002"):
        for text in ("我们", "We", ""):
            pieces = [joint.id_to_piece(i) for i in joint.tokenize([symbol + text]).to_list()[0]]
            assert symbol in pieces, pieces
    with pytest.raises(ValueError, match="one size"):
        train_tokenizers(sources, targets, tmp_path / "two", joint=True,
                         source_vocab_size=2000, target_vocab_size=2200)
