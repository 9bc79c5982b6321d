"""`keras-transformer train` writes a complete run folder, and running it again resumes."""

import json
import time

import keras
import numpy as np
import pytest

from keras_transformer import cli
from keras_transformer import DecoderBlock
from keras_transformer import EncoderBlock
from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.models import Seq2SeqTransformer
from keras_transformer.models.config import preset
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.trainer import train
from training_helpers import FAST
from training_helpers import SLICE

TRAIN_ARGS = [
    "train", "--preset", "tiny", "--data", str(DEFAULT_CMN_ENG_PATH), "--src", "zh", "--tgt", "en",
    "--max-pairs", str(SLICE["max_pairs"]),
    "--source-vocab-size", str(SLICE["source_vocab_size"]),
    "--target-vocab-size", str(SLICE["target_vocab_size"]),
    "--batch-tokens", str(FAST["token_budget"]), "--save-freq", str(FAST["save_freq"]),
    "--verbose", "0",
]


def test_train_cli_writes_run_folder_and_second_invocation_resumes(tmp_path, capsys):
    run_dir = tmp_path / "zh-en"
    assert cli.main([*TRAIN_ARGS, "--run", str(run_dir), "--epochs", "2"]) == 0
    assert "started at step 0" in capsys.readouterr().out

    config = RunFolder(run_dir).config
    assert config["preset"] == "tiny"
    assert config["model"]["d_model"] == 32
    assert config["model"]["encoder"]["vocab_size"] == SLICE["source_vocab_size"]
    assert config["model"]["decoder"]["vocab_size"] == SLICE["target_vocab_size"]
    assert config["data"]["source_language"] == "zh" and config["data"]["target_language"] == "en"
    assert config["training"]["token_budget"] == FAST["token_budget"]
    assert config["training"]["label_smoothing"] == 0.1
    # zh-en runs add the bundled dictionary's words by default (--dictionary auto).
    assert config["data"]["dictionary"]["path"].endswith("cc-cedict/cedict.tsv")
    assert config["data"]["dictionary"]["pairs"] > 0
    from streams import training_pass

    streamed = training_pass(RunFolder(run_dir))
    assert config["data"]["split_sizes"]["train"] == len(streamed)
    # The corpus is recorded, not copied.
    assert not (run_dir / "splits/train.tsv").exists()
    [[record]] = config["data"]["files"]
    assert record["path"].endswith("cmn-eng/cmn.txt") and len(record["sha256"]) == 64
    for name in ("source.model", "target.model", "splits/validation.tsv",
                 "splits/test.tsv", "backup/state.json", "history.csv", "model.keras",
                 "final.weights.h5", "best.weights.h5", "best.json"):
        assert (run_dir / name).is_file(), name
    # The split keeps sources apart and the test pairs out of training.
    train_sources = {source for source, _ in streamed}
    test_sources = {line.split("\t")[0] for line in (run_dir / "splits/test.tsv").read_text().splitlines()}
    assert train_sources and not train_sources & test_sources
    assert list((run_dir / "checkpoints").glob("step-*.weights.h5"))
    assert list((run_dir / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((run_dir / "logs" / "validation").glob("events.out.tfevents.*"))
    history = json.loads((run_dir / "history.json").read_text())
    assert [record["epoch"] for record in history] == [0, 1]
    assert all(np.isfinite(record["val_loss"]) for record in history)
    model = keras.saving.load_model(run_dir / "model.keras")
    assert isinstance(model, Seq2SeqTransformer)

    # Again on the same folder, with no corpus or preset: it resumes.
    assert cli.main(["train", "--run", str(run_dir), "--epochs", "3", "--verbose", "0"]) == 0
    out = capsys.readouterr().out
    assert f"resumed at step {history[-1]['step']}" in out
    # The one flag given differs from the stored run, and is said so; the others keep
    # their stored values.
    assert "resuming with --epochs 3 (was 2)" in out
    assert out.count("resuming with") == 1
    assert RunFolder(run_dir).config["training"]["token_budget"] == FAST["token_budget"]
    resumed = json.loads((run_dir / "history.json").read_text())
    assert [record["epoch"] for record in resumed] == [0, 1, 2]
    assert resumed[:2] == history
    assert resumed[2]["step"] > history[1]["step"]
    assert resumed[2]["train_seconds"] > history[1]["train_seconds"]


def test_minutes_budget_stops_training_cleanly(fresh_run):
    start = time.monotonic()
    result = train(str(fresh_run), TrainingConfig(epochs=10_000, **FAST), minutes=0.05, verbose=0)
    assert result.stopped_by == "time"
    assert time.monotonic() - start < 90
    assert 0 < result.epochs < 10_000
    assert (fresh_run / "model.keras").is_file()
    # What a later run resumes from is the very last state.
    metadata = json.loads((fresh_run / "backup" / "state.json").read_text())
    assert metadata["step"] == result.step


def test_resuming_with_another_preset_is_refused(fresh_run):
    with pytest.raises(ValueError, match="preset"):
        train(str(fresh_run), TrainingConfig(epochs=1), preset="small", verbose=0)


def test_shape_flags_change_a_new_runs_preset_and_a_resumed_run_keeps_its_shape(tmp_path, capsys):
    run_dir = tmp_path / "shape"
    flags = ["--num-encoder-layers", "1", "--num-decoder-layers", "3", "--d-model", "16",
             "--num-heads", "4", "--intermediate-dim", "24"]
    assert cli.main([*TRAIN_ARGS, "--run", str(run_dir), "--max-steps", "1", *flags]) == 0
    stored = RunFolder(run_dir).config["model"]
    assert [stored["encoder"]["num_layers"], stored["decoder"]["num_layers"], *(stored[name] for name in (
        "d_model", "num_heads", "intermediate_dim"))] == [1, 3, 16, 4, 24]
    # The built model has that shape (the tiny preset's is 2 + 2 blocks, width 32, 2 heads).
    model = keras.saving.load_model(run_dir / "model.keras")
    encoders = [layer for layer in model.backbone.layers if isinstance(layer, EncoderBlock)]
    decoders = [layer for layer in model.backbone.layers if isinstance(layer, DecoderBlock)]
    assert (len(encoders), len(decoders)) == (1, 3)
    attention = decoders[0].self_attention
    assert (attention.num_heads, attention.head_dim) == (4, 4)
    assert decoders[0].feed_forward.inner_dense.kernel.shape == (16, 24)
    capsys.readouterr()

    # Another shape on the existing run is refused in one line.
    assert cli.main(["train", "--run", str(run_dir), "--intermediate-dim", "32", "--verbose", "0"]) == 2
    error = capsys.readouterr().err
    assert "--intermediate-dim 32 (the run has 24)" in error and "Traceback" not in error
    assert cli.main(["train", "--run", str(run_dir), "--num-decoder-layers", "2", "--verbose", "0"]) == 2
    error = capsys.readouterr().err
    assert "--num-decoder-layers 2 (the run has 3)" in error and "Traceback" not in error

    # Heads that do not divide the width are refused before anything is written.
    bad = tmp_path / "bad"
    assert cli.main([*TRAIN_ARGS, "--run", str(bad), "--num-heads", "3"]) == 2
    error = capsys.readouterr().err
    assert "num_heads" in error and "Traceback" not in error
    assert not bad.exists()
    with pytest.raises(SystemExit) as exit:  # argparse's one-line usage error
        cli.main([*TRAIN_ARGS, "--run", str(bad), "--intermediate-dim", "0.5"])
    assert exit.value.code == 2
    assert "argument --intermediate-dim: invalid int value" in capsys.readouterr().err
    assert not bad.exists()


def test_model_flags_set_a_new_runs_dropouts_and_a_resumed_run_keeps_its_model(tmp_path, capsys):
    run_dir = tmp_path / "dropouts"
    flags = ["--dropout", "0.2", "--attention-dropout", "0.15", "--activation-dropout", "0.05"]
    assert cli.main([*TRAIN_ARGS, "--run", str(run_dir), "--max-steps", "1", *flags]) == 0
    stored = RunFolder(run_dir).config["model"]
    assert (stored["dropout"], stored["attention_dropout"], stored["activation_dropout"]) == (
        0.2, 0.15, 0.05)
    # The built model's blocks carry the rates (the tiny preset's own are 0, 0, 0).
    model = keras.saving.load_model(run_dir / "model.keras")
    blocks = [layer for layer in model.backbone.layers if isinstance(layer, (EncoderBlock, DecoderBlock))]
    assert len(blocks) == 4
    for block in blocks:
        assert (block.dropout, block.attention_dropout, block.activation_dropout) == (0.2, 0.15, 0.05)
    capsys.readouterr()

    # The same flags resume; another rate is refused in one line and changes nothing.
    assert cli.main(["train", "--run", str(run_dir), "--max-steps", "2", "--verbose", "0", *flags]) == 0
    assert cli.main(["train", "--run", str(run_dir), "--dropout", "0.3", "--verbose", "0"]) == 2
    error = capsys.readouterr().err
    assert "--dropout 0.3 (the run has 0.2)" in error and "Traceback" not in error
    assert RunFolder(run_dir).config["model"]["dropout"] == 0.2

    # A rate outside [0, 1) is refused before anything is written.
    bad = tmp_path / "bad"
    assert cli.main([*TRAIN_ARGS, "--run", str(bad), "--attention-dropout", "1.5"]) == 2
    assert "attention_dropout" in capsys.readouterr().err
    assert not bad.exists()


def test_norm_first_switch_builds_a_pre_ln_run_and_a_resumed_run_keeps_it(tmp_path, capsys):
    run_dir = tmp_path / "pre-ln"
    assert preset("tiny").norm_first is False  # so the switch is what changes it
    assert cli.main([*TRAIN_ARGS, "--run", str(run_dir), "--max-steps", "1", "--norm-first"]) == 0
    assert RunFolder(run_dir).config["model"]["norm_first"] is True
    model = keras.saving.load_model(run_dir / "model.keras")
    blocks = [layer for layer in model.backbone.layers if isinstance(layer, (EncoderBlock, DecoderBlock))]
    assert len(blocks) == 4 and all(block.norm_first for block in blocks)
    capsys.readouterr()

    # The other switch on the existing run is refused in one line and changes nothing.
    assert cli.main(["train", "--run", str(run_dir), "--no-norm-first", "--verbose", "0"]) == 2
    error = capsys.readouterr().err
    assert "--no-norm-first (the run has --norm-first)" in error and "Traceback" not in error
    assert RunFolder(run_dir).config["model"]["norm_first"] is True


def test_activation_flag_sets_a_new_runs_feed_forward_and_a_resumed_run_keeps_it(tmp_path, capsys):
    run_dir = tmp_path / "gelu"
    assert preset("tiny").activation == "relu"  # so the flag is what changes it
    assert cli.main([*TRAIN_ARGS, "--run", str(run_dir), "--max-steps", "1", "--activation", "gelu"]) == 0
    assert RunFolder(run_dir).config["model"]["activation"] == "gelu"
    model = keras.saving.load_model(run_dir / "model.keras")
    blocks = [layer for layer in model.backbone.layers if isinstance(layer, (EncoderBlock, DecoderBlock))]
    assert len(blocks) == 4
    probe = np.linspace(-3.0, 3.0, 7, dtype="float32")
    for block in blocks:
        hidden = keras.ops.convert_to_numpy(block.feed_forward.activation(probe))
        np.testing.assert_allclose(
            hidden, keras.ops.convert_to_numpy(keras.activations.gelu(probe)), rtol=1e-6
        )
    capsys.readouterr()

    # Another activation on the existing run is refused in one line and changes nothing.
    assert cli.main(["train", "--run", str(run_dir), "--activation", "relu", "--verbose", "0"]) == 2
    error = capsys.readouterr().err
    assert "--activation relu (the run has gelu)" in error and "Traceback" not in error
    assert RunFolder(run_dir).config["model"]["activation"] == "gelu"

    # A name outside ACTIVATIONS is refused in one line that lists them, before anything is written.
    bad = tmp_path / "bad"
    assert cli.main([*TRAIN_ARGS, "--run", str(bad), "--activation", "tanh"]) == 2
    error = capsys.readouterr().err.strip()
    assert "activation" in error and "gelu" in error and "silu" in error
    assert "\n" not in error and "Traceback" not in error
    assert not bad.exists()


def test_resuming_on_a_changed_corpus_is_refused_in_one_line(tmp_path, capsys):
    corpus = tmp_path / "corpus.tsv"
    lines = DEFAULT_CMN_ENG_PATH.read_text(encoding="utf-8").splitlines(keepends=True)[:300]
    corpus.write_text("".join(lines), encoding="utf-8")
    arguments = [*TRAIN_ARGS[:3], "--data", str(corpus), *TRAIN_ARGS[5:], "--run", str(tmp_path / "run"),
                 "--max-steps", "1", "--max-held-out", "10", "--vocab-sample", "200"]
    assert cli.main(arguments) == 0
    data = RunFolder(tmp_path / "run").config["data"]
    assert data["max_held_out"] == 10 and data["vocab_sample"] == 200
    assert len(RunFolder(tmp_path / "run").read_split("validation")[0]) <= 10
    capsys.readouterr()
    corpus.write_text("".join(lines[:-1]), encoding="utf-8")
    resume = ["train", "--run", str(tmp_path / "run"), "--max-steps", "2", "--verbose", "0"]
    assert cli.main(resume) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "corpus.tsv" in err and "train a new run" in err
