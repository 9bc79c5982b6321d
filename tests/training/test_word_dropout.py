"""`--word-dropout`: text tokens of the model's input become UNK, drawn afresh each epoch."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.data.pipeline import drop_words
from keras_transformer.data.pipeline import with_word_dropout
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.tasks.loading import task_for


def _ids(rows=300, width=40):
    """Text ids with every special id among them: PAD tails, BOS heads, EOS, UNK."""
    ids = np.random.default_rng(0).integers(EOS_ID + 1, 500, size=(rows, width))
    ids[:, 0] = BOS_ID
    ids[::3, 5] = UNK_ID
    ids[:, 30] = EOS_ID
    ids[:, 31:] = PAD_ID
    return tf.constant(ids, tf.int32)


def test_drop_words_turns_text_tokens_into_unk_at_the_rate_and_nothing_else():
    ids = _ids()
    dropped = drop_words(ids, 0.25, tf.constant([7, 0])).numpy()
    ids = ids.numpy()
    changed = dropped != ids
    assert dropped.dtype == ids.dtype and dropped.shape == ids.shape
    assert np.all(dropped[changed] == UNK_ID)
    assert not np.any(changed[ids <= EOS_ID])  # padding, UNK, BOS and EOS stay
    text = ids > EOS_ID
    assert changed[text].mean() == pytest.approx(0.25, abs=0.02)
    assert np.array_equal(drop_words(ids, 0.0, tf.constant([7, 0])).numpy(), ids)
    # A tokenizer's tags (ids below its first text id) stay too.
    tagged = drop_words(ids, 0.9, tf.constant([7, 0]), first_text_id=40).numpy()
    assert np.array_equal(tagged[ids < 40], ids[ids < 40])
    assert np.all(tagged[tagged != ids] == UNK_ID) and (tagged != ids).any()


def test_drop_words_is_the_same_for_a_seed_and_differs_across_seeds():
    ids = _ids()
    first = drop_words(ids, 0.25, tf.constant([7, 0])).numpy()
    assert np.array_equal(first, drop_words(ids, 0.25, tf.constant([7, 0])).numpy())
    assert not np.array_equal(first, drop_words(ids, 0.25, tf.constant([8, 0])).numpy())


def test_each_epoch_draws_anew_and_the_same_seed_draws_the_same_epochs():
    batches = tf.data.Dataset.from_tensors((_ids(), tf.constant([1, 2]))).repeat(3)

    def epochs(dataset):
        return [np.stack([tokens.numpy() for tokens, _ in dataset]) for _ in range(2)]

    first, second = epochs(with_word_dropout(batches, 0.25, seed=5))
    assert not np.array_equal(first, second)
    assert not np.array_equal(first[0], first[1])  # each batch draws anew too
    again = epochs(with_word_dropout(batches, 0.25, seed=5))
    np.testing.assert_array_equal(first, again[0])
    np.testing.assert_array_equal(second, again[1])
    assert not np.array_equal(first, epochs(with_word_dropout(batches, 0.25, seed=6))[0])
    labels = [labels.numpy() for _, labels in with_word_dropout(batches, 0.25, seed=5)]
    np.testing.assert_array_equal(labels, [[1, 2]] * 3)
    assert with_word_dropout(batches, 0.0, seed=5) is batches


def _input_text(batch):
    """The model's input text of a batch: a translator's source, the others' tokens."""
    inputs = batch[0]
    return inputs["encoder_tokens"] if isinstance(inputs, dict) else inputs


def _rest(batch):
    """Everything of a batch but its input text."""
    inputs, labels = batch
    others = {k: v for k, v in inputs.items() if k != "encoder_tokens"} if isinstance(inputs, dict) else {}
    return [labels.numpy()] + [others[k].numpy() for k in sorted(others)]


def _epochs(run_dir, run_config, config, count=2):
    train, validation, steps = task_for(run_config).make_datasets(run_dir, run_config, config, seed=3)
    batches = list(train.take(count * steps))
    return [batches[epoch * steps:(epoch + 1) * steps] for epoch in range(count)], list(validation)


@pytest.mark.parametrize("run_fixture", ["prepared_run", "lm_run", "classify_run"])
def test_every_task_drops_its_input_text_only_in_training(run_fixture, request):
    run_dir = RunFolder(str(request.getfixturevalue(run_fixture)))
    run_config = run_dir.config
    plain, plain_validation = _epochs(run_dir, run_config, TrainingConfig())
    noisy, noisy_validation = _epochs(run_dir, run_config, TrainingConfig(word_dropout=0.3))
    masks = []
    for plain_epoch, noisy_epoch in zip(plain, noisy):
        assert len(plain_epoch) == len(noisy_epoch)  # the same batches, in the same order
        epoch_masks = []
        for plain_batch, noisy_batch in zip(plain_epoch, noisy_epoch):
            before, after = _input_text(plain_batch).numpy(), _input_text(noisy_batch).numpy()
            changed = before != after
            assert np.all(after[changed] == UNK_ID) and not np.any(changed[before <= EOS_ID])
            for kept, noisy_kept in zip(_rest(plain_batch), _rest(noisy_batch)):
                np.testing.assert_array_equal(kept, noisy_kept)  # labels, decoder tokens
            epoch_masks.append(changed[before > EOS_ID])
        masks.append(np.concatenate(epoch_masks))
    for mask in masks:
        assert mask.mean() == pytest.approx(0.3, abs=0.05)
    # The same seed draws the same again; validation batches are never dropped.
    again, _ = _epochs(run_dir, run_config, TrainingConfig(word_dropout=0.3), count=1)
    for batch, batch_again in zip(noisy[0], again[0]):
        np.testing.assert_array_equal(_input_text(batch).numpy(), _input_text(batch_again).numpy())
    for batch, noisy_batch in zip(plain_validation, noisy_validation):
        np.testing.assert_array_equal(_input_text(batch).numpy(), _input_text(noisy_batch).numpy())
