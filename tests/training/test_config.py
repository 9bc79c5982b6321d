"""`TrainingConfig`: validated settings; the `train` flags are generated from its fields."""

import argparse
import dataclasses

import pytest

from keras_transformer.training import command
from keras_transformer.training.config import TASK_DEFAULTS
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.config import add_config_arguments
from keras_transformer.training.config import flag_name


def _train_parser():
    parser = argparse.ArgumentParser(prog="keras-transformer train")
    command.add_arguments(parser)
    return parser


def test_every_field_is_a_train_flag_with_its_default_and_help():
    help_text = " ".join(_train_parser().format_help().split())
    for field in dataclasses.fields(TrainingConfig):
        assert f"--{flag_name(field)}" in help_text, field.name
        default = "unset" if field.default is None else str(field.default).lower()
        # A task's own default follows the common one: "(default: 0.7; classify: 0.5)".
        assert f"{' '.join(field.metadata['help'].split())} (default: {default}" in help_text, field.name


def test_a_new_field_becomes_a_flag():
    # The flags are read off the dataclass: a new setting needs no other change.
    extended = dataclasses.make_dataclass(
        "Extended",
        [("dropout_schedule", float, dataclasses.field(
            default=0.25, metadata={"help": "a new setting", "flag": None, "parse": None,
                                    "choices": None, "check": lambda value: None}))],
        bases=(TrainingConfig,), frozen=True,
    )
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, extended)
    assert "--dropout-schedule" in parser.format_help() and "(default: 0.25)" in parser.format_help()
    assert extended.from_flags(parser.parse_args(["--dropout-schedule", "0.5"])).dropout_schedule == 0.5


def test_flags_parse_to_typed_settings_and_unset_flags_keep_stored_values():
    args = _train_parser().parse_args(
        ["--run", "r", "--epochs", "7", "--batch-tokens", "512", "--no-xla", "--save-freq", "epoch",
         "--clipnorm", "1.5", "--subword-sampling", "0.2", "--weight-decay", "0.05",
         "--batching", "sorted", "--loss-weighting", "batch", "--word-dropout", "0.15"]
    )
    stored = TrainingConfig(epochs=3, patience=9, label_smoothing=0.2)
    config = TrainingConfig.from_flags(args, stored=stored)
    assert config == stored.replace(
        epochs=7, token_budget=512, jit_compile=False, save_freq="epoch", clipnorm=1.5,
        subword_sampling=0.2, weight_decay=0.05, batching="sorted", loss_weighting="batch",
        word_dropout=0.15,
    )
    # A new run: flags not given take the defaults.
    assert TrainingConfig.from_flags(_train_parser().parse_args(["--run", "r"])) == TrainingConfig()


def test_a_new_run_takes_its_task_s_defaults_and_a_stored_run_keeps_its_own():
    assert TASK_DEFAULTS["classify"]["lr_scale"] != TrainingConfig().lr_scale
    for task in (None, "translate", "lm"):
        assert TrainingConfig.for_task(task) == TrainingConfig()
    classify = TrainingConfig.for_task("classify", epochs=4)
    assert classify == TrainingConfig(epochs=4, **TASK_DEFAULTS["classify"])
    parser = _train_parser()
    assert TrainingConfig.from_flags(parser.parse_args(["--run", "r"]), task="classify") == (
        TrainingConfig.for_task("classify"))
    given = parser.parse_args(["--run", "r", "--lr-scale", "0.9"])
    assert TrainingConfig.from_flags(given, task="classify").lr_scale == 0.9
    stored = TrainingConfig(lr_scale=0.7)  # a classifier stored before its own default
    assert TrainingConfig.from_flags(parser.parse_args(["--run", "r"]), stored, "classify") == stored
    help_text = " ".join(parser.format_help().split())
    assert f"(default: {TrainingConfig().lr_scale}; classify: {TASK_DEFAULTS['classify']['lr_scale']})" in help_text


def test_differences_name_the_flags_one_line_each():
    stored = TrainingConfig(epochs=3, jit_compile=None)
    lines = TrainingConfig(epochs=5, jit_compile=True).differences(stored)
    assert lines == ["--epochs 5 (was 3)", "--xla true (was unset)"]
    assert stored.differences(stored) == []


@pytest.mark.parametrize(
    "changes, flag",
    [
        (dict(epochs=0), "--epochs"),
        (dict(token_budget=-1), "--batch-tokens"),
        (dict(label_smoothing=1.0), "--label-smoothing"),
        (dict(save_freq="often"), "--save-freq"),
        (dict(mixed_precision="float8"), "--mixed-precision"),
        (dict(patience=-1), "--patience"),
        (dict(clipnorm=0.0), "--clipnorm"),
        (dict(subword_sampling=0.0), "--subword-sampling"),
        (dict(subword_sampling=1.5), "--subword-sampling"),
        (dict(lr_decay="cosine"), "--lr-decay"),
        (dict(weight_decay=-0.1), "--weight-decay"),
        (dict(weight_decay=float("nan")), "--weight-decay"),
        (dict(batching="random"), "--batching"),
        (dict(loss_weighting="row"), "--loss-weighting"),
        (dict(word_dropout=1.0), "--word-dropout"),
        (dict(word_dropout=-0.1), "--word-dropout"),
        (dict(lr_decay="linear"), "--max-steps"),  # it decays to 0 at --max-steps
        (dict(lr_decay="linear", max_steps=100, warmup_steps=100), "--max-steps"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(changes, flag):
    with pytest.raises(ValueError, match=flag):
        TrainingConfig(**changes)


def test_a_linear_decay_with_a_step_budget_is_accepted():
    assert TrainingConfig(lr_decay="linear", max_steps=300, warmup_steps=100).lr_decay == "linear"


def test_stored_dict_round_trips_and_unknown_keys_are_refused():
    config = TrainingConfig(epochs=4, save_freq="epoch", mixed_precision="none")
    assert TrainingConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="Unknown training settings"):
        TrainingConfig.from_dict({"epochs": 4, "learning_rate": 1.0})


@pytest.mark.parametrize("removed", [["--concatenate", "0.5"], ["--dictionary-tag"]])
def test_removed_train_flags_are_not_accepted(removed, capsys):
    with pytest.raises(SystemExit):
        _train_parser().parse_args(["--run", "r", *removed])
    assert f"unrecognized arguments: {' '.join(removed)}" in capsys.readouterr().err


def test_every_train_flag_says_what_it_is_for():
    # argparse keeps a parser's options in `_actions`; each one shows its help in --help.
    missing = [action.option_strings for action in _train_parser()._actions
               if action.option_strings and not action.help]
    assert missing == []


def test_cli_error_for_a_bad_setting_is_one_line(capsys, tmp_path):
    from keras_transformer import cli

    assert cli.main(["train", "--run", str(tmp_path / "r"), "--epochs", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--epochs" in err[0] and "positive integer" in err[0]


def test_config_run_folder_and_pair_reader_import_without_keras():
    from training_helpers import run_python

    modules = ["keras_transformer.training.config", "keras_transformer.runs", "keras_transformer.files",
               "keras_transformer.data.corpus", "keras_transformer.runs.average_command"]
    code = (f"import sys; import {', '.join(modules)}; "
            "heavy = [m for m in ('keras', 'tensorflow', 'numpy') if m in sys.modules]; "
            "print(heavy); sys.exit(bool(heavy))")
    process = run_python(["-c", code], timeout=120)
    assert process.returncode == 0, process.stdout + process.stderr[-2000:]
