"""Best weights follow the lowest validation loss; averaging gives the mean of checkpoints."""

import argparse
import os

import keras
import numpy as np
import pytest

from keras_transformer.tasks.loading import task_for
from keras_transformer.runs import average_command
from keras_transformer.runs.folder import RunFolder
from keras_transformer.runs.loading import load_run
from keras_transformer.runs.weights import average_checkpoints
from keras_transformer.training.callbacks import BestWeights
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.trainer import compile_model
from keras_transformer.training.trainer import train
from training_helpers import FAST
from training_helpers import h5_arrays


def _model_arrays(path):
    """The model's (not the optimizer's) arrays of a weights file."""
    return {name: value for name, value in h5_arrays(path).items() if not name.startswith("optimizer")}


def test_best_weights_are_those_of_the_lowest_validation_loss(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    run = RunFolder(tmp_path)
    callback = BestWeights(run)
    callback.set_model(model)
    callback.on_train_begin()
    for epoch, (value, val_loss) in enumerate([(1.0, 3.0), (2.0, 2.0), (3.0, 2.5), (4.0, float("nan"))]):
        model.set_weights([np.full_like(w, value) for w in model.get_weights()])
        callback.on_epoch_end(epoch, {"loss": 1.0, "val_loss": val_loss})
    assert run.checkpoints.read_best() == {"epoch": 1, "step": 0, "val_loss": 2.0}
    model.load_weights(run.weights("best").path)
    assert all(np.all(w == 2.0) for w in model.get_weights())
    # A resumed run keeps the stored best: a worse epoch does not replace it.
    resumed = BestWeights(run)
    resumed.set_model(model)
    resumed.on_train_begin()
    resumed.on_epoch_end(4, {"val_loss": 2.1})
    assert run.checkpoints.read_best()["epoch"] == 1


def test_training_keeps_the_best_epoch_and_commands_use_it(fresh_run):
    # A learning rate far too high makes the validation loss go up and down.
    config = TrainingConfig(epochs=4, lr_scale=8.0, warmup_steps=2, keep_epoch_checkpoints=4, **FAST)
    train(str(fresh_run), config, verbose=0)
    run = RunFolder(fresh_run)
    history = run.history.read()
    losses = [record["val_loss"] for record in history]
    best_epoch = int(np.nanargmin(np.array(losses, dtype=float)))
    best = run.weights("best")
    assert (best.kind, best.epoch) == ("best", best_epoch)
    assert best.step == history[best_epoch]["step"] and best.val_loss == pytest.approx(losses[best_epoch])
    expected = _model_arrays(run.checkpoint_path("epoch", best_epoch))
    actual = _model_arrays(best.path)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)
    assert load_run(run, "best").weights.path == best.path

    # The default: the average of the newest epoch checkpoints, written when training
    # ended, never reaching back past half the run (4 epochs: the newest 2 of the 4
    # kept); once a newer epoch checkpoint exists it is stale and the best is used.
    default = run.weights()
    assert default.kind == "average" and default.epoch == history[-1]["epoch"]
    assert default.sources == tuple(
        os.path.relpath(checkpoint.path, run.path) for checkpoint in run.checkpoints.kept("epoch")[-2:])
    assert load_run(run).weights.path == default.path
    newest = run.checkpoints.kept("epoch")[-1].path
    os.link(newest, run.checkpoint_path("epoch", history[-1]["epoch"] + 1))
    assert run.weights().kind == "best"


def _average_args(run_dir, *flags):
    parser = argparse.ArgumentParser()
    average_command.add_arguments(parser)
    return parser.parse_args(["--run", str(run_dir), *flags])


def test_average_of_two_checkpoints_is_their_mean_and_translates(fresh_run, capsys):
    from keras_transformer.evaluation.translators import run_translator

    run = RunFolder(fresh_run)
    model = task_for(run.config).build_model(run.config)
    compile_model(model)  # checkpoints hold optimizer state too: averaging must skip it
    model.optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    sets = []
    for epoch in range(3):
        weights = [rng.normal(size=w.shape).astype(w.dtype) * 0.1 for w in model.get_weights()]
        model.set_weights(weights)
        run.checkpoints.save(model, "epoch", epoch, keep=5)
        sets.append(weights)
    run.history.write([{"epoch": 0, "step": 5, "val_loss": 4.0},
                       {"epoch": 1, "step": 10, "val_loss": 3.0},
                       {"epoch": 2, "step": 15, "val_loss": 3.5}])

    assert average_command.run(_average_args(fresh_run, "--last", "2")) == 0
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    averaged = run.weights("average")
    assert averaged.sources == ("checkpoints/epoch-0001.weights.h5", "checkpoints/epoch-0002.weights.h5")
    loaded = load_run(run, "average")
    for value, first, second in zip(loaded.model.get_weights(), sets[1], sets[2]):
        np.testing.assert_allclose(value, (first + second) / 2, rtol=1e-6, atol=1e-7)
    translations = run_translator(loaded, beam_width=1)(["你好。", "我们来试试。"])
    assert len(translations) == 2 and all(isinstance(text, str) for text in translations)

    # --best 2: the epochs of the two lowest validation losses (1 and 2).
    average_checkpoints(run, task_for(run.config).build_model(run.config), best=2)
    assert set(run.weights("average").sources) == set(averaged.sources)
    average_checkpoints(run, task_for(run.config).build_model(run.config), best=1)
    only = load_run(run, "average").model.get_weights()
    for value, expected in zip(only, sets[1]):
        np.testing.assert_allclose(value, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="keeps 3 epoch checkpoints"):
        average_command.run(_average_args(fresh_run, "--last", "4"))
