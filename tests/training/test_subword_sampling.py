"""`--subword-sampling`: the run's training batches get a new segmentation every epoch."""

from keras_transformer.constants import PAD_ID
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig


def _two_epochs(run_dir, config):
    from keras_transformer.tasks.translator import make_datasets

    train, _, steps = make_datasets(run_dir, run_dir.config, config, seed=0)
    batches = list(train.take(2 * steps))
    return [
        sorted(tuple(row[row != PAD_ID]) for features, _ in batches[epoch * steps:(epoch + 1) * steps]
               for row in features["encoder_tokens"].numpy())
        for epoch in range(2)
    ]


def test_a_run_with_subword_sampling_trains_on_new_segmentations_each_epoch(prepared_run):
    run_dir = RunFolder(str(prepared_run))
    fixed = _two_epochs(run_dir, TrainingConfig())
    assert fixed[0] == fixed[1]  # the best segmentation, reshuffled
    sampled = _two_epochs(run_dir, TrainingConfig(subword_sampling=0.1))
    assert len(sampled[0]) == len(fixed[0])  # every pair, once
    assert sampled[0] != sampled[1] and sampled[0] != fixed[0]
