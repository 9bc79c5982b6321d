"""`keras-transformer train --task lm|classify`: the run folder, the history, resume, and user errors."""

import json
import math
import shutil

import pytest

from keras_transformer import cli
from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
from keras_transformer.data.corpus import LabelledFile
from keras_transformer.data.sentence_type import output_path
from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TASK_DEFAULTS
from keras_transformer.training.config import TrainingConfig
from keras_transformer.tasks.loading import task_for

CMN_ENG = str(DEFAULT_CMN_ENG_PATH)
SENTENCE_TYPE_EN = str(output_path("en"))


def _split_lines(run_dir, part):
    """A part's examples as lines: the held-out ones from the run, the training ones from its stream."""
    if part == "train":
        from streams import training_pass

        return ["\t".join(example) for example in training_pass(RunFolder(run_dir))]
    return (run_dir / "splits" / f"{part}.tsv").read_text(encoding="utf-8").splitlines()


def test_lm_run_records_its_task_tokenizer_and_text_splits(lm_run):
    run = RunFolder(lm_run)
    config = run.config
    assert config["task"] == "lm" and run.task == "lm"
    assert config["data"]["column"] == 0 and config["data"]["language"] == "en"
    assert config["data"]["vocab_size"] == 250
    assert (lm_run / "tokenizer.model").is_file() and not (lm_run / "source.model").exists()
    assert run.tokenizer_files() == [run.tokenizer_path()]
    # The texts of the English column, one a line; no text on two sides of the split.
    parts = {part: _split_lines(lm_run, part) for part in ("train", "validation", "test")}
    assert sum(map(len, parts.values())) == 400
    assert all("\t" not in line for lines in parts.values() for line in lines)
    english = [line.split("\t")[0].strip() for line in open(CMN_ENG, encoding="utf-8-sig")][:400]
    assert sorted(line for lines in parts.values() for line in lines) == sorted(english)
    from keras_transformer.data.streaming import normalize

    keys = {part: set(normalize(lines).numpy()) for part, lines in parts.items()}
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    for name in ("best.weights.h5", "final.weights.h5", "model.keras", "backup/state.json"):
        assert (lm_run / name).is_file(), name


def test_lm_history_has_validation_perplexity_equal_to_evaluating_the_same_weights(lm_run, tmp_path, capsys):
    history = RunFolder(lm_run).history.read()
    assert [record["epoch"] for record in history] == [0, 1]
    for record in history:
        assert record["val_perplexity"] > 1 and math.isfinite(record["val_perplexity"])
        assert record["perplexity"] > 1
    # The metric is exp of the masked mean cross-entropy: evaluating the final weights on
    # the validation split (another code path, one batch at a time) gives the same number.
    copy = tmp_path / "run"
    shutil.copytree(lm_run, copy)
    assert cli.main(["evaluate", "--run", str(copy), "--split", "validation", "--weights", "last"]) == 0
    evaluation = json.loads((copy / "evaluation.json").read_text())
    assert evaluation["perplexity"] == pytest.approx(history[-1]["val_perplexity"], rel=1e-4)


def test_each_task_s_new_run_trains_with_that_task_s_defaults(lm_run, classify_run):
    # `train --task classify` without --lr-scale: the classifier's own scale is stored.
    assert RunFolder(classify_run).read_training_config().lr_scale == TASK_DEFAULTS["classify"]["lr_scale"]
    assert RunFolder(lm_run).read_training_config().lr_scale == TrainingConfig().lr_scale


def test_classify_run_stores_sorted_labels_and_labelled_splits(classify_run):
    run = RunFolder(classify_run)
    config = run.config
    assert config["task"] == "classify"
    labels, _ = LabelledFile(SENTENCE_TYPE_EN).read()
    assert run.read_labels() == sorted(set(labels[:600])) == ["exclamation", "question", "statement"]
    assert config["data"]["num_classes"] == 3
    rows = [line.split("\t") for part in ("train", "validation", "test")
            for line in _split_lines(classify_run, part)]
    assert len(rows) == 600 and all(len(row) == 2 and row[0] in run.read_labels() for row in rows)
    history = run.history.read()
    for record in history:
        assert 0 <= record["val_accuracy"] <= 1 and 0 <= record["val_macro_f1"] <= 1
        assert 0 <= record["macro_f1"] <= 1


@pytest.mark.parametrize("fixture", ["lm_run", "classify_run"])
def test_a_task_run_resumes_with_its_own_task(fixture, request, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(request.getfixturevalue(fixture), run_dir)
    before = RunFolder(run_dir).history.read()
    capsys.readouterr()
    # No --task, no data: the run folder says what it is.
    assert cli.main(["train", "--run", str(run_dir), "--epochs", "3", "--verbose", "0"]) == 0
    out = capsys.readouterr().out
    assert f"resumed at step {before[-1]['step']}" in out
    after = RunFolder(run_dir).history.read()
    assert [record["epoch"] for record in after] == [0, 1, 2]
    assert after[:2] == before and after[2]["step"] > before[-1]["step"]
    assert RunFolder(run_dir).task == RunFolder(request.getfixturevalue(fixture)).task


def _one_line_error(capsys, command="train"):
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"keras-transformer {command}: error: "), lines[0]
    return lines[0]


def test_a_missing_column_is_one_line_naming_the_file_and_line(tmp_path, capsys):
    code = cli.main(["train", "--task", "lm", "--data", CMN_ENG, "--column", "5", "--preset", "tiny",
                     "--run", str(tmp_path / "run")])
    assert code == 2
    line = _one_line_error(capsys)
    assert "cmn.txt: line 1" in line and "at least 6" in line


def test_a_classify_file_with_one_label_is_one_line(tmp_path, capsys):
    data = tmp_path / "one.tsv"
    data.write_text("yes\tgood\nyes\tfine\nyes\tgreat\n", encoding="utf-8")
    assert cli.main(["train", "--task", "classify", "--data", str(data), "--run", str(tmp_path / "run")]) == 2
    line = _one_line_error(capsys)
    assert "one label ('yes')" in line and "at least two" in line


def test_an_unknown_task_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["train", "--task", "summarize", "--run", str(tmp_path / "run")])
    assert exit.value.code == 2
    line = _one_line_error(capsys)
    assert "summarize" in line and "lm" in line and "classify" in line


def test_translation_options_on_a_language_model_are_one_line(tmp_path, capsys):
    assert cli.main(["train", "--task", "lm", "--data", CMN_ENG, "--src", "zh",
                     "--run", str(tmp_path / "run")]) == 2
    assert "--src is not read by --task lm" in _one_line_error(capsys)


def test_another_task_on_an_existing_run_is_one_line(lm_run, capsys):
    assert cli.main(["train", "--task", "classify", "--run", str(lm_run)]) == 2
    assert "task 'lm'" in _one_line_error(capsys)


def test_xla_batches_of_a_classifier_pad_only_the_length_and_of_a_language_model_also_rows():
    import tensorflow as tf

    from keras_transformer.data.fitting import pad_to_static_shapes

    tokens = tf.ones([3, 5], tf.int32)
    lm = tf.data.Dataset.from_tensors((tokens, tokens))
    (lm_tokens, lm_labels), = pad_to_static_shapes(lm, max_length=64, token_budget=64, pad_rows=True)
    assert lm_tokens.shape == lm_labels.shape == (8, 8)  # 64 // 8 rows of width 8
    assert int(tf.reduce_sum(lm_labels)) == 15  # the added rows and columns are padding
    classes = tf.data.Dataset.from_tensors((tokens, tf.constant([0, 1, 2])))
    (cl_tokens, cl_labels), = pad_to_static_shapes(classes, max_length=64, token_budget=64, pad_rows=False)
    assert cl_tokens.shape == (3, 8) and cl_labels.numpy().tolist() == [0, 1, 2]


def test_the_model_keras_of_each_task_loads_as_its_model(lm_run, classify_run):
    import keras

    from keras_transformer.models.classifier import EncoderClassifier
    from keras_transformer.models.language_model import LanguageModel
    from keras_transformer.training import losses  # noqa: F401 (registers the compiled loss and metrics)

    assert isinstance(keras.saving.load_model(lm_run / "model.keras"), LanguageModel)
    assert isinstance(keras.saving.load_model(classify_run / "model.keras"), EncoderClassifier)
