"""`RunFolder`: every file of a run folder round-trips through one reader and one writer,
and its config is read in one way, naming its task."""

import pytest

from keras_transformer.data.corpus import SentencePair
from keras_transformer.runs.folder import RunFolder

TRANSLATE = {"task": "translate", "preset": "tiny", "model": {},
             "data": {"source_tokenizer": "source.model", "target_tokenizer": "target.model",
                      "source_prefix": ""},
             "training": {"epochs": 3}}


def test_config_splits_and_evaluation_round_trip(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert not run.exists() and run.read_evaluation() is None and run.read_training_config() is None
    with pytest.raises(FileNotFoundError, match="is not a run folder"):
        run.config
    run.write_config(TRANSLATE)
    assert run.exists() and run.config == TRANSLATE and run.task == "translate"
    assert run.read_training_config().epochs == 3

    pairs = [SentencePair("你好。", "Hello."), SentencePair("谢谢。", "Thanks.")]
    run.write_split("test", pairs)
    assert run.read_split("test") == (["你好。", "谢谢。"], ["Hello.", "Thanks."])
    run.write_split("validation", [])
    assert run.read_split("validation") == ([], [])
    with pytest.raises(ValueError, match="accepted"):
        run.split_path("dev")
    with pytest.raises(ValueError, match="stores no training split: training streams from the corpus"):
        run.read_split("train")

    run.write_texts("validation", ["One text.", "Another."])
    assert run.read_texts("validation") == ["One text.", "Another."]
    run.write_labelled("test", ["question", "statement"], ["Why?", "So."])
    assert run.read_labelled("test") == (["question", "statement"], ["Why?", "So."])

    run.write_evaluation({"bleu": 12.5, "source": "中文"})
    assert run.read_evaluation() == {"bleu": 12.5, "source": "中文"}


def test_a_config_must_name_a_known_task(tmp_path):
    run = RunFolder(tmp_path)
    run.write_config({key: value for key, value in TRANSLATE.items() if key != "task"})
    with pytest.raises(ValueError, match=r"names task None; accepted: \['translate', 'lm', 'classify'\]"):
        run.task
    run.write_config({**TRANSLATE, "task": "summarize"})
    with pytest.raises(ValueError, match="names task 'summarize'"):
        run.task


def test_tokenizer_files_and_labels_follow_the_task(tmp_path):
    translation = RunFolder(tmp_path / "translate")
    translation.write_config(TRANSLATE)
    assert translation.tokenizer_paths() == (translation.file("source.model"), translation.file("target.model"))
    assert translation.tokenizer_files() == list(translation.tokenizer_paths())
    with pytest.raises(ValueError, match="translation run: it has a source and a target tokenizer"):
        translation.tokenizer_path()

    classifier = RunFolder(tmp_path / "classify")
    classifier.write_config({"task": "classify", "data": {"tokenizer": "tokenizer.model"}})
    assert classifier.tokenizer_files() == [classifier.tokenizer_file]
    with pytest.raises(ValueError, match="classifier run: it has one tokenizer"):
        classifier.tokenizer_paths()
    with pytest.raises(FileNotFoundError, match="is .* a classifier run"):
        classifier.read_labels()
    classifier.write_labels(["question", "statement"])
    assert classifier.read_labels() == ["question", "statement"]


def test_a_command_refuses_another_task_in_one_line(tmp_path):
    run = RunFolder(tmp_path)
    run.write_config({"task": "lm"})
    run.require_task("lm", "evaluate")
    with pytest.raises(ValueError, match=r"is a language-model run \(task lm\); `keras-transformer "
                                         r"translate` needs a translation run \(task translate\)"):
        run.require_task("translate", "translate")


def test_checkpoint_names_carry_their_number(tmp_path):
    run = RunFolder(tmp_path)
    step, epoch = run.checkpoint_path("step", 1200), run.checkpoint_path("epoch", 7)
    assert step.endswith("checkpoints/step-00001200.weights.h5")
    assert epoch.endswith("checkpoints/epoch-0007.weights.h5")
    assert run.checkpoint_number("step", "step-00001200.weights.h5") == 1200
    assert run.checkpoint_number("epoch", "epoch-0007.weights.h5") == 7
    assert run.checkpoint_number("epoch", "step-00001200.weights.h5") is None
    assert run.checkpoint_number("step", ".tmp-1-step-00001200.weights.h5") is None
