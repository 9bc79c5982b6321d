"""`--concatenate`: neighbouring training pairs joined into one, drawn afresh each epoch."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import cli
from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.pipeline import join_examples
from keras_transformer.data.pipeline import with_concatenation
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.tasks.loading import task_for
from training_helpers import FAST
from training_helpers import SLICE

MAX_SOURCE, MAX_TARGET = 8, 7  # some neighbours' joins do not fit


def _example(number, source_length, target_length):
    """Ids that name their example: source 100·(n + 1) + i, target 1000·(n + 1) + i, i >= 1
    (above the special ids)."""
    source = [100 * (number + 1) + i for i in range(1, source_length + 1)]
    target = [1000 * (number + 1) + i for i in range(1, target_length + 1)]
    return source, [BOS_ID, *target], [*target, EOS_ID]


def _dataset(count=300):
    """`count` tokenized examples of 1-6 source and 1-4 target ids."""
    rng = np.random.default_rng(0)
    examples = [_example(n, int(rng.integers(1, 7)), int(rng.integers(1, 5))) for n in range(count)]
    return tf.data.Dataset.from_generator(
        lambda: iter(examples), output_signature=(tf.TensorSpec([None], tf.int32),) * 3
    )


def _parts(encoder, decoder, labels):
    """The example numbers an example holds, checked to be whole examples, in order."""
    encoder, decoder, labels = (np.asarray(part).tolist() for part in (encoder, decoder, labels))
    assert decoder[0] == BOS_ID and BOS_ID not in decoder[1:]
    assert labels[-1] == EOS_ID and EOS_ID not in labels[:-1]
    assert decoder[1:] == labels[:-1]  # the labels are the decoder tokens shifted by one
    source_numbers = list(dict.fromkeys(token // 100 - 1 for token in encoder))
    target_numbers = list(dict.fromkeys(token // 1000 - 1 for token in labels[:-1]))
    assert source_numbers == target_numbers  # the same examples on both sides, in one order
    for number in source_numbers:  # each one whole
        source = [t for t in encoder if t // 100 - 1 == number]
        target = [t for t in labels[:-1] if t // 1000 - 1 == number]
        assert (source, [BOS_ID, *target]) == _example(number, len(source), len(target))[:2]
    return source_numbers


def test_join_examples_reads_as_one_sentence_pair():
    first, second = _example(1, 3, 2), _example(2, 2, 3)
    ragged = [tf.ragged.constant([a, b], dtype=tf.int32) for a, b in zip(first, second)]
    encoder, decoder, labels = (part.to_list() for part in join_examples(*ragged))
    assert encoder == [[201, 202, 203, 301, 302]]
    assert decoder == [[BOS_ID, 2001, 2002, 3001, 3002, 3003]]
    assert labels == [[2001, 2002, 3001, 3002, 3003, EOS_ID]]


def _epoch(dataset):
    return [_parts(*example) for example in dataset]


def test_each_epoch_joins_neighbours_at_the_rate_and_keeps_every_example_once():
    joined = with_concatenation(_dataset(), 0.5, seed=3, max_source_length=MAX_SOURCE,
                                max_target_length=MAX_TARGET)
    epochs = [_epoch(joined) for _ in range(2)]
    for epoch in epochs:
        # Every example once, alone or in a join of two neighbours, in its order.
        assert [number for numbers in epoch for number in numbers] == list(range(300))
        joins = [numbers for numbers in epoch if len(numbers) == 2]
        assert all(second == first + 1 and first % 2 == 0 for first, second in joins)
        # Half the neighbours that fit the limits are joined; none beyond the limits.
        assert len(joins) / 150 == pytest.approx(0.5 * _fitting_share(), abs=0.1)
    for example in joined:
        encoder, _, labels = (tensor.numpy() for tensor in example)
        assert len(encoder) <= MAX_SOURCE and len(labels) <= MAX_TARGET
    assert epochs[0] != epochs[1]  # drawn afresh each epoch ...
    again = with_concatenation(_dataset(), 0.5, seed=3, max_source_length=MAX_SOURCE,
                               max_target_length=MAX_TARGET)
    assert [_epoch(again) for _ in range(2)] == epochs  # ... the same epochs for the same seed
    other = with_concatenation(_dataset(), 0.5, seed=4, max_source_length=MAX_SOURCE,
                               max_target_length=MAX_TARGET)
    assert _epoch(other) != epochs[0]
    plain = _dataset()
    assert with_concatenation(plain, 0.0, seed=3, max_source_length=MAX_SOURCE,
                              max_target_length=MAX_TARGET) is plain


def _fitting_share():
    """The share of neighbouring twos whose join fits MAX_SOURCE and MAX_TARGET."""
    examples = [tuple(len(part) for part in example) for example in _dataset().as_numpy_iterator()]
    pairs = list(zip(examples[0::2], examples[1::2]))
    fits = [a[0] + b[0] <= MAX_SOURCE and a[2] + b[2] - 1 <= MAX_TARGET for a, b in pairs]
    assert 0.3 < np.mean(fits) < 1  # some pairs too long: the limit is tested
    return np.mean(fits)


def _real_tokens(batches, index):
    return sum(int(np.sum(batch[index] != PAD_ID)) for batch in batches)


def _flat(batch):
    inputs, labels = batch
    return inputs["encoder_tokens"].numpy(), inputs["decoder_tokens"].numpy(), labels.numpy()


def test_a_translation_run_joins_training_pairs_only(prepared_run):
    run_dir = RunFolder(str(prepared_run))
    run_config = run_dir.config

    def datasets(config):
        train, validation = task_for(run_config).make_datasets(run_dir, run_config, config, seed=3)
        return [_flat(batch) for batch in train], [_flat(batch) for batch in validation]

    plain, plain_validation = datasets(TrainingConfig())
    joined, joined_validation = datasets(TrainingConfig(concatenation=0.5))
    rows = sum(len(batch[0]) for batch in plain)
    joins = rows - sum(len(batch[0]) for batch in joined)
    assert 0.3 * rows / 2 < joins < 0.6 * rows / 2
    # The same source tokens; each join drops a BOS and an EOS from its target.
    assert _real_tokens(joined, 0) == _real_tokens(plain, 0)
    assert _real_tokens(joined, 2) == _real_tokens(plain, 2) - joins
    for _, decoder, labels in joined:
        assert np.all(decoder[:, 0] == BOS_ID) and np.all(np.sum(decoder == BOS_ID, 1) == 1)
        assert np.all(np.sum(labels == EOS_ID, 1) == 1)
    # Validation batches are the pairs as they are.
    for batch, joined_batch in zip(plain_validation, joined_validation, strict=True):
        for part, joined_part in zip(batch, joined_batch):
            np.testing.assert_array_equal(part, joined_part)


TRAIN_ARGS = [
    "train", "--preset", "tiny", "--data", str(DEFAULT_CMN_ENG_PATH), "--src", "zh", "--tgt", "en",
    "--max-pairs", str(SLICE["max_pairs"]), "--batch-tokens", str(FAST["token_budget"]),
    "--source-vocab-size", str(SLICE["source_vocab_size"]),
    "--target-vocab-size", str(SLICE["target_vocab_size"]),
    "--max-steps", "1", "--verbose", "0",  # one step, should a refusal ever fail to come
]


def _refused(capsys, run_dir):
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1 and "Traceback" not in error, error
    assert not RunFolder(str(run_dir)).exists()  # refused before anything of the run is written
    return error


def test_concatenation_is_refused_where_there_are_no_pairs_of_one_direction(tmp_path, capsys):
    language_model = tmp_path / "lm"
    assert cli.main(["train", "--task", "lm", "--data", str(DEFAULT_CMN_ENG_PATH), "--column", "0",
                     "--preset", "tiny", "--max-pairs", "400", "--vocab-size", "250",
                     "--max-steps", "1", "--run", str(language_model), "--concatenate", "0.5"]) == 2
    assert "--concatenate joins sentence pairs" in _refused(capsys, language_model)
    both_ways = tmp_path / "both"
    assert cli.main([*TRAIN_ARGS, "--run", str(both_ways), "--bidirectional",
                     "--concatenate", "0.5"]) == 2
    assert "bidirectional" in _refused(capsys, both_ways)
    assert cli.main([*TRAIN_ARGS, "--run", str(tmp_path / "bad"), "--concatenate", "1.5"]) == 2
    assert "[0, 1)" in capsys.readouterr().err


def test_a_translation_run_trains_with_concatenation_and_keeps_the_setting(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert cli.main([*TRAIN_ARGS, "--run", str(run_dir), "--concatenate", "0.5"]) == 0
    assert "now at step 1" in capsys.readouterr().out
    assert RunFolder(str(run_dir)).read_training_config().concatenation == 0.5
