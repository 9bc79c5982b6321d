"""Tests of the tf.data pipelines: shifting, truncation, token budget, epochs of a stream."""

import numpy as np
import pytest
import sentencepiece as spm

from keras_transformer.constants import BATCHINGS, BOS_ID, EOS_ID, PAD_ID
from keras_transformer.data.corpus import sources_and_targets
from keras_transformer.data.pipeline import (
    _batch_plan,
    _tokenized,
    bucket_batch_sizes,
    bucket_boundaries_for,
    epochs,
    example_length_counts,
    make_eval_dataset,
    make_training_dataset,
    pairs_of,
    steps_per_epoch,
)
from keras_transformer.data.streaming import epoch_seed, shuffled


@pytest.fixture(scope="module")
def small_corpus(cmn_split):
    """2,000 training pairs plus long ones that need truncating."""
    sources, targets = sources_and_targets(cmn_split.train[::12][:2000])
    sources += ["我们明天去北京吧。" * 8, "你好。"]
    targets += ["Tom said that he would come. " * 6, "This is a very long answer. " * 9]
    return sources, targets


def _rows(batch):
    """Per example: (encoder ids, decoder ids, label ids), padding removed."""
    features, labels = batch
    out = []
    for enc, dec, lab in zip(features["encoder_tokens"].numpy(),
                             features["decoder_tokens"].numpy(), labels.numpy()):
        out.append((tuple(enc[enc != PAD_ID]), tuple(dec[dec != PAD_ID]), tuple(lab[lab != PAD_ID])))
    return out


def test_decoder_inputs_and_labels_are_shifted_and_truncated(tokenizers, small_corpus):
    source_tok, target_tok = tokenizers
    sources, targets = small_corpus
    sources, targets = ["你好。", "谢谢！"] + sources[-2:], ["Hello.", "Thanks!"] + targets[-2:]
    max_s, max_t = 12, 9
    (features, labels), = make_eval_dataset(
        sources, targets, source_tok, target_tok, batch_size=4,
        max_source_length=max_s, max_target_length=max_t,
    )
    src_ids = spm.SentencePieceProcessor(model_proto=source_tok.model_proto).encode(sources)
    tgt_ids = spm.SentencePieceProcessor(model_proto=target_tok.model_proto).encode(targets)
    enc, dec, lab = (features["encoder_tokens"].numpy(), features["decoder_tokens"].numpy(),
                     labels.numpy())
    assert enc.dtype == dec.dtype == lab.dtype == np.int32
    assert dec.shape == lab.shape and dec.shape[1] <= max_t and enc.shape[1] <= max_s
    truncated = 0
    for i in range(4):
        kept = tgt_ids[i][: max_t - 1]
        truncated += len(kept) < len(tgt_ids[i])
        n = len(kept) + 1
        assert enc[i].tolist() == (src_ids[i][:max_s] + [PAD_ID] * enc.shape[1])[: enc.shape[1]]
        assert dec[i, :n].tolist() == [BOS_ID] + kept
        assert lab[i, :n].tolist() == kept + [EOS_ID]  # EOS survives truncation
        assert not dec[i, n:].any() and not lab[i, n:].any()
    assert truncated == 2  # the two long targets
    assert enc.shape[1] == max_s  # the long source was cut


@pytest.mark.parametrize("batching", BATCHINGS)
def test_no_batch_exceeds_token_budget(tokenizers, small_corpus, batching):
    sources, targets = small_corpus
    budget = 300
    dataset = make_training_dataset(
        pairs_of(sources, targets), *tokenizers, token_budget=budget,
        max_source_length=40, max_target_length=30, seed=1, batching=batching,
    )
    sizes, examples = set(), 0
    for features, labels in dataset:
        batch, s = features["encoder_tokens"].shape
        t = labels.shape[1]
        assert features["decoder_tokens"].shape == labels.shape
        assert batch * max(s, t) <= budget, (batch, s, t)
        sizes.add(batch)
        examples += batch
    assert examples == len(sources)
    assert len(sizes) > 2  # short sentences do share bigger batches


def test_batches_group_examples_of_nearly_equal_length(tokenizers, small_corpus):
    # Little compute goes to padding: every batch holds one bucket's examples,
    # whose lengths max(S, T) differ by less than the bucket width.
    sources, targets = small_corpus
    step = 2
    dataset = make_training_dataset(
        pairs_of(sources, targets), *tokenizers, token_budget=300,
        max_source_length=40, max_target_length=30, seed=1,
        bucket_boundaries=bucket_boundaries_for(40, step=step),
    )
    batches = 0
    for batch in dataset:
        lengths = [max(len(encoder), len(decoder)) for encoder, decoder, _ in _rows(batch)]
        bucket = (max(lengths) - 1) // step
        assert all((length - 1) // step == bucket for length in lengths), lengths
        batches += 1
    assert batches > 10


@pytest.mark.parametrize("batching", BATCHINGS)
def test_training_batches_hold_every_example_once(tokenizers, small_corpus, batching):
    sources, targets = small_corpus
    kwargs = dict(max_source_length=40, max_target_length=30)
    reference = [r for b in make_eval_dataset(sources, targets, *tokenizers, **kwargs)
                 for r in _rows(b)]
    train = [r for b in make_training_dataset(pairs_of(sources, targets), *tokenizers,
                                              token_budget=512, batching=batching, **kwargs)
             for r in _rows(b)]
    assert sorted(train) == sorted(reference)
    assert train != reference  # grouped by length


def _stream(sources, targets, tokenizers, batching, seed=0, first_epoch=0, steps=4):
    """`epochs` of shuffled passes, as a run's training stream is made."""
    def one_pass(epoch):
        pairs = shuffled(pairs_of(sources, targets), 10_000, epoch_seed(epoch, seed))
        return make_training_dataset(pairs, *tokenizers, token_budget=512, seed=seed,
                                     batching=batching)

    return epochs(one_pass, first_epoch, steps)


@pytest.mark.parametrize("batching", BATCHINGS)
def test_each_epoch_is_its_seed_and_number_alone(tokenizers, small_corpus, batching):
    sources, targets = small_corpus[0][:600], small_corpus[1][:600]
    steps = 4

    def batches(dataset, count):
        return [_rows(batch) for batch in dataset.take(count)]

    first = batches(_stream(sources, targets, tokenizers, batching, steps=steps), 3 * steps)
    # Rebuilt, the same stream; every epoch is `steps` batches of a new order.
    assert batches(_stream(sources, targets, tokenizers, batching, steps=steps), 3 * steps) == first
    assert first[:steps] != first[steps:2 * steps]
    # A run resumed at epoch 1 reads epoch 1 from its start, as the run it continues did.
    resumed = batches(_stream(sources, targets, tokenizers, batching, first_epoch=1, steps=steps), 2 * steps)
    assert resumed == first[steps:]
    assert batches(_stream(sources, targets, tokenizers, batching, seed=1, steps=steps), steps) != first[:steps]


@pytest.mark.parametrize("batching", BATCHINGS)
def test_steps_per_epoch_count_the_batches_of_one_pass(tokenizers, small_corpus, batching):
    sources, targets = small_corpus
    lengths = dict(max_source_length=40, max_target_length=30)
    counts = example_length_counts(_tokenized(pairs_of(sources, targets), *tokenizers, **lengths,
                                              batched=True), 40)
    assert sum(counts) == len(sources)
    batches = sum(1 for _ in make_training_dataset(pairs_of(sources, targets), *tokenizers,
                                                   token_budget=512, batching=batching, **lengths))
    estimate = steps_per_epoch(counts, len(sources), 512, 40, batching)
    if batching == "buckets":
        assert estimate == batches  # each bucket's count over its batch size, exactly
    else:  # the budget's fill, not the greedy cut's
        assert abs(estimate - batches) <= 0.05 * batches
    # From a sample of the corpus, scaled to its size.
    half = example_length_counts(_tokenized(pairs_of(sources[::2], targets[::2]), *tokenizers, **lengths,
                                            batched=True), 40)
    assert abs(steps_per_epoch(half, len(sources), 512, 40, batching) - estimate) <= 0.1 * estimate


def test_subword_sampling_tokenizes_every_epoch_anew(tokenizers, small_corpus):
    sources, targets = small_corpus[0][:300], small_corpus[1][:300]
    source_tokenizer, target_tokenizer = tokenizers

    def epochs(sample_alpha):
        sides = tokenizers if sample_alpha is None else [t.sampling(sample_alpha) for t in tokenizers]
        dataset = make_training_dataset(pairs_of(sources, targets), *sides, token_budget=512)
        return [[r for b in dataset for r in _rows(b)] for _ in range(2)]

    fixed = epochs(None)
    assert fixed[0] == fixed[1]
    sampled = epochs(0.1)
    assert sampled[0] != sampled[1] and sampled[0] != fixed[0]
    # Every sample is the same sentence pair: its pieces detokenize to the text.
    for epoch in sampled:
        texts = sorted(
            (source_tokenizer.detokenize([list(encoder)]).numpy()[0].decode(),
             target_tokenizer.detokenize([list(labels)]).numpy()[0].decode())
            for encoder, _, labels in epoch
        )
        expected = sorted(
            (source_tokenizer.detokenize([list(encoder)]).numpy()[0].decode(),
             target_tokenizer.detokenize([list(labels)]).numpy()[0].decode())
            for encoder, _, labels in fixed[0]
        )
        assert texts == expected


def _padding_shares(dataset):
    """(real / padded source positions, real / padded target positions, batches)."""
    real_source = padded_source = real_target = padded_target = batches = 0
    for features, labels in dataset:
        encoder, labels = features["encoder_tokens"].numpy(), labels.numpy()
        real_source += (encoder != PAD_ID).sum()
        padded_source += encoder.size
        real_target += (labels != PAD_ID).sum()
        padded_target += labels.size
        batches += 1
    return real_source / padded_source, real_target / padded_target, batches


def test_sorted_batches_pad_less_and_are_fewer(tokenizers, small_corpus):
    # Sorting a window (here the whole pass) by length pads less on both sides, where length buckets
    # pad within a bucket's width and leave a partial batch per bucket.
    sources, targets = small_corpus
    kwargs = dict(token_budget=1024, max_source_length=40, max_target_length=30, seed=3)
    sorted_source, sorted_target, sorted_batches = _padding_shares(
        make_training_dataset(pairs_of(sources, targets), *tokenizers, batching="sorted", **kwargs))
    bucket_source, bucket_target, bucket_batches = _padding_shares(
        make_training_dataset(pairs_of(sources, targets), *tokenizers, batching="buckets", **kwargs))
    assert sorted_target > 0.9
    assert sorted_target > bucket_target and sorted_source > bucket_source
    assert sorted_batches < bucket_batches


def test_batch_plan_sorts_by_length_and_fills_every_batch_but_the_last():
    rng = np.random.default_rng(0)
    widths = rng.integers(1, 30, size=(2, 500))
    budget = 200
    order, sizes = _batch_plan(widths, budget, shortest=1)
    assert sorted(order.tolist()) == list(range(500)) and sizes.sum() == 500
    longest = widths.max(axis=0)[order]
    keys = list(zip(longest, widths[0][order], widths[1][order]))
    assert keys == sorted(keys)  # by the longest part, then each part's length
    ends = np.cumsum(sizes)
    for end, size in zip(ends, sizes):
        assert size * longest[end - 1] <= budget  # its longest example is its last
        if end < 500:  # full: the next example would not fit
            assert (size + 1) * longest[end] > budget
    # An example longer than the budget still gets a batch of its own.
    order, sizes = _batch_plan(np.array([[5, 300, 7]]), budget, shortest=1)
    assert order.tolist() == [0, 2, 1] and sizes.tolist() == [2, 1]


def test_batch_plan_budgets_widths_rounded_up_to_the_width_step():
    # Under XLA a batch is padded to its longest length rounded up to a multiple
    # of 8 and to budget // that many rows: the plan must count those widths.
    rng = np.random.default_rng(1)
    widths = rng.integers(1, 40, size=(2, 500))
    budget = 256
    order, sizes = _batch_plan(widths, budget, shortest=1, width_step=8)
    assert order.tolist() == _batch_plan(widths, budget, shortest=1)[0].tolist()
    padded = -(-widths.max(axis=0)[order] // 8) * 8
    ends = np.cumsum(sizes)
    for end, size in zip(ends, sizes):
        assert size <= budget // padded[end - 1]
        if end < 500:
            assert (size + 1) * padded[end] > budget
    # Counted exactly, some batches would hold more rows than their padded width allows.
    _, exact_sizes = _batch_plan(widths, budget, shortest=1)
    exact_ends = np.cumsum(exact_sizes)
    assert any(size > budget // padded[end - 1] for end, size in zip(exact_ends, exact_sizes))


def test_batch_plan_keeps_the_shortest_examples_shuffled_in_batches_of_bounded_rows():
    # Examples no longer than `shortest` are not sorted among themselves (the
    # dataset arrives shuffled), and no batch holds more than budget // shortest rows.
    widths = np.array([[3, 1, 9, 2, 4, 8, 1, 2, 12],
                       [2, 2, 3, 5, 1, 3, 7, 1, 4]])
    order, sizes = _batch_plan(widths, token_budget=24, shortest=8)
    assert order.tolist() == [0, 1, 3, 4, 5, 6, 7, 2, 8]  # the short ones in input order
    assert sizes.tolist() == [3, 3, 2, 1]  # the last short one shares a batch with the 9
    assert max(sizes) <= 24 // 8


def test_unknown_batching_is_refused_naming_the_choices(tokenizers, small_corpus):
    with pytest.raises(ValueError, match="sorted"):
        make_training_dataset(pairs_of(*small_corpus), *tokenizers, batching="random")


def test_eval_batches_keep_corpus_order(tokenizers, small_corpus):
    sources, targets = small_corpus
    sources, targets = sources[:10], targets[:10]
    batches = list(make_eval_dataset(sources, targets, *tokenizers, batch_size=4))
    assert [b[1].shape[0] for b in batches] == [4, 4, 2]
    decoded = [t.decode("utf-8") for b in batches for t in tokenizers[1].detokenize(b[1]).numpy()]
    expected = spm.SentencePieceProcessor(model_proto=tokenizers[1].model_proto).decode(
        spm.SentencePieceProcessor(model_proto=tokenizers[1].model_proto).encode(targets))
    assert decoded == expected


def test_bucket_sizes_fit_budget():
    assert bucket_boundaries_for(64, step=2) == list(range(3, 64, 2))
    boundaries = bucket_boundaries_for(64)  # the default: 8 ids wide
    assert boundaries == [9, 17, 25, 33, 41, 49, 57]
    sizes = bucket_batch_sizes(boundaries, 64, 4096)
    assert sizes == [512, 256, 170, 128, 102, 85, 73, 64]
    longest = [b - 1 for b in boundaries] + [64]
    assert all(size * length <= 4096 for size, length in zip(sizes, longest))
    with pytest.raises(ValueError, match="cannot hold"):
        bucket_batch_sizes(boundaries, 64, 63)
    with pytest.raises(ValueError, match="increase"):
        bucket_batch_sizes([9, 9, 17], 64, 4096)
    with pytest.raises(ValueError, match="increase"):
        bucket_batch_sizes([9, 80], 64, 4096)
