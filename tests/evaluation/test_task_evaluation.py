"""`keras-transformer evaluate` of language-model and classifier runs, and their scores."""

import json
import shutil

import numpy as np
import pytest

from keras_transformer.evaluation.classification import classification_scores
from keras_transformer.runs.folder import RunFolder


@pytest.fixture
def lm_copy(lm_run, tmp_path):
    shutil.copytree(lm_run, tmp_path / "lm")
    return tmp_path / "lm"


@pytest.fixture
def classify_copy(classify_run, tmp_path):
    shutil.copytree(classify_run, tmp_path / "classify")
    return tmp_path / "classify"


def _one_error_line(err, command):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"keras-transformer {command}: error: "), lines[0]
    return lines[0]


def test_evaluate_a_language_model_reports_test_perplexity(cli, lm_copy):
    code, out, _ = cli("evaluate", "--run", lm_copy, "--split", "test")
    assert code == 0
    record = json.loads((lm_copy / "evaluation.json").read_text())
    assert record["task"] == "lm" and record["split"] == "test"
    assert 1 < record["perplexity"] < 250 * 10  # vocabulary of 250: near uniform after 2 epochs
    assert record["texts"] == len(RunFolder(lm_copy).read_texts("test"))
    assert record["tokens"] >= record["texts"]  # at least EOS per text
    # Two epochs are too few to average (half of them is one), so the best weights serve.
    assert record["weights"]["kind"] == "best"
    assert f"perplexity {record['perplexity']:.3f}" in out


def test_evaluate_a_classifier_reports_accuracy_f1_and_a_confusion_matrix(cli, classify_copy):
    code, out, _ = cli("evaluate", "--run", classify_copy)
    assert code == 0
    record = json.loads((classify_copy / "evaluation.json").read_text())
    labels, texts = RunFolder(classify_copy).read_labelled("test")
    assert record["task"] == "classify" and record["split"] == "test"
    assert record["labels"] == ["exclamation", "question", "statement"]
    matrix = np.array(record["confusion_matrix"])
    assert matrix.shape == (3, 3) and matrix.sum() == len(texts) == record["examples"]
    # Rows are the true labels.
    assert matrix.sum(axis=1).tolist() == [labels.count(name) for name in record["labels"]]
    assert record["accuracy"] == pytest.approx(np.trace(matrix) / matrix.sum())
    assert 0 <= record["macro_f1"] <= 1
    assert f"accuracy {record['accuracy']:.4f}, macro-F1 {record['macro_f1']:.4f}" in out
    assert "confusion matrix" in out


def test_evaluate_limit_scores_the_first_texts_only(cli, classify_copy):
    assert cli("evaluate", "--run", classify_copy, "--limit", 5)[0] == 0
    assert json.loads((classify_copy / "evaluation.json").read_text())["examples"] == 5


@pytest.mark.parametrize(
    "args, command, expected",
    [
        (["translate", "--run", "{run}", "hello"], "translate", "holds a model of task lm"),
        (["plot-attention", "--run", "{run}", "hello", "--output", "{tmp}/a.png"],
         "plot-attention", "needs a translation run"),
        (["evaluate", "--run", "{run}", "--data", "{tmp}/pairs.tsv"], "evaluate",
         "--data is for translation runs"),
        (["evaluate", "--run", "{run}", "--beam", "2"], "evaluate", "--beam is for translation runs"),
        (["evaluate", "--run", "{run}", "--alpha", "1.0"], "evaluate",
         "--alpha is for translation runs"),
        (["evaluate", "--run", "{run}", "--coverage", "0.4"], "evaluate",
         "--coverage is for translation runs"),
    ],
)
def test_translation_commands_on_a_language_model_run_are_one_line(cli, lm_run, tmp_path, args, command, expected):
    code, _, err = cli(*[arg.format(run=lm_run, tmp=tmp_path) for arg in args])
    assert code == 2
    assert expected in _one_error_line(err, command)


def test_classification_scores_of_known_predictions():
    # true:      a a a b b c ; predicted: a a b b c c
    scores = classification_scores([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 2, 2], ["a", "b", "c"])
    assert scores["confusion_matrix"] == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert scores["accuracy"] == pytest.approx(4 / 6)
    f1 = {"a": 2 * 1 * (2 / 3) / (1 + 2 / 3), "b": 0.5, "c": 2 * 0.5 * 1 / 1.5}
    for name, value in f1.items():
        assert scores["per_class"][name]["f1"] == pytest.approx(value)
    assert scores["macro_f1"] == pytest.approx(sum(f1.values()) / 3)
    assert scores["per_class"]["a"]["support"] == 3


def test_a_class_never_predicted_and_never_seen_scores_zero_not_nan():
    scores = classification_scores([0, 0], [0, 0], ["a", "b"])
    assert scores["per_class"]["b"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert scores["macro_f1"] == pytest.approx(0.5)
