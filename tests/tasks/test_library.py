"""The task objects as a user meets them: load, from_preset, save_to_preset, fit, string calls."""

import ast
import json
import os
import pathlib
import urllib.request

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.runs.folder import RunFolder
from keras_transformer.tasks.loading import task_for

SENTENCES = ["我们来试试。", "你好。", "汤姆在哪里？", "我不知道。"]


@pytest.fixture(scope="module")
def translation_export(translation_run, tmp_path_factory):
    from keras_transformer.export.command import export_run

    base = str(tmp_path_factory.mktemp("export"))
    return export_run(translation_run, "zh_en", base=base, beam=2, max_length=10), base


def test_load_picks_the_task_of_each_folder(translation_run, lm_run, classify_run):
    assert isinstance(kt.load(translation_run), kt.Translator)
    assert isinstance(kt.load(lm_run), kt.CausalLM)
    classifier = kt.load(classify_run)
    assert isinstance(classifier, kt.TextClassifier)
    assert list(classifier.labels) == RunFolder(classify_run).read_labels()


def test_a_preset_name_needs_its_task_and_its_tokenizers(translation_run):
    with pytest.raises(ValueError, match="Translator.from_preset"):
        kt.load("tiny")
    with pytest.raises(ValueError, match="needs `source_tokenizer`"):
        kt.Translator.from_preset("tiny")


def test_from_preset_refuses_a_model_of_another_task(lm_run):
    with pytest.raises(ValueError, match="holds a model of task lm"):
        kt.Translator.from_preset(lm_run)


def test_save_to_preset_then_from_preset_gives_identical_outputs(
        translation_run, lm_run, classify_run, tmp_path):
    translator = kt.load(translation_run)
    copy = kt.Translator.from_preset(translator.save_to_preset(tmp_path / "translator"))
    assert copy.translate_n_best(SENTENCES, beam=2, max_length=8) == translator.translate_n_best(
        SENTENCES, beam=2, max_length=8)

    lm = kt.load(lm_run)
    lm_copy = kt.CausalLM.from_preset(lm.save_to_preset(tmp_path / "lm"))
    for sampler in ("greedy", "top_p"):
        assert lm_copy.generate(["Tom is", "I"], max_new_tokens=5, sampler=sampler, seed=4) == \
            lm.generate(["Tom is", "I"], max_new_tokens=5, sampler=sampler, seed=4)

    classifier = kt.load(classify_run)
    classifier_copy = kt.load(classifier.save_to_preset(tmp_path / "classifier"))
    np.testing.assert_array_equal(classifier_copy.probabilities(["What a day!", "Who?"]),
                                  classifier.probabilities(["What a day!", "Who?"]))
    assert classifier_copy.labels == classifier.labels


def test_run_export_and_server_translate_alike(translation_run, translation_export):
    from keras_transformer.serving import config as config_lib
    from keras_transformer.serving import server as server_lib

    path, base = translation_export
    expected = kt.load(translation_run).translate(SENTENCES, beam=2, max_length=10)
    exported = kt.load(path)
    assert exported.translate(SENTENCES) == expected
    assert kt.load(os.path.dirname(path)).translate(SENTENCES) == expected  # the model base
    model_config = config_lib.parse_model_config(
        f"model_config_list {{ config {{ name: 'zh_en' base_path: '{os.path.dirname(path)}' "
        "model_platform: 'tensorflow' } }")
    options = server_lib.ServerOptions(model_config=model_config, port=0, rest_api_port=0,
                                       poll_seconds=0)
    with server_lib.ServerThread(options) as running:
        request = urllib.request.Request(
            f"{running.rest_url}/v1/models/zh_en:predict",
            data=json.dumps({"instances": SENTENCES}).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=60) as response:
            served = [row["translation"] for row in json.load(response)["predictions"]]
    assert served == expected


def test_an_export_searches_as_exported(translation_export):
    exported = kt.load(translation_export[0])
    with pytest.raises(ValueError, match=r"beam=4 \(exported: 2\)"):
        exported.translate(SENTENCES, beam=4)
    assert exported.translate(SENTENCES, beam=2)  # its own width is accepted


def test_an_export_holds_the_preset_it_was_made_from(translation_run, translation_export):
    preset = os.path.join(translation_export[0], "preset")
    assert kt.load(preset).translate(SENTENCES, beam=2, max_length=10) == \
        kt.load(translation_run).translate(SENTENCES, beam=2, max_length=10)


def _pairs(run_dir, count):
    from streams import training_pass

    sources, targets = zip(*training_pass(RunFolder(run_dir))[:count])
    return tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))


def test_fit_on_string_pairs_lowers_the_loss_and_the_result_exports(translation_run, tmp_path):
    from keras_transformer.export.writer import write_export

    run = kt.load(translation_run)
    translator = kt.Translator.from_preset(
        "tiny", source_tokenizer=run.source_tokenizer, target_tokenizer=run.target_tokenizer,
        max_length=24)
    history = translator.fit(_pairs(translation_run, 64), batch_size=16, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] - 0.2, losses
    module = translator.translation_module(beam=2, max_length=8)
    path = write_export(module, str(tmp_path), "tuned", warmup_texts=SENTENCES[:1],
                        manifest={"task": "translate"}, preset=translator)
    assert kt.load(path).translate(SENTENCES) == translator.translate(SENTENCES, beam=2,
                                                                      max_length=8)


def test_fit_reads_texts_and_labelled_texts(lm_run, classify_run):
    lm = kt.load(lm_run)
    from streams import training_pass

    texts = [text for (text,) in training_pass(RunFolder(lm_run))[:48]]
    losses = lm.fit(tf.data.Dataset.from_tensor_slices(texts), batch_size=16, epochs=3,
                    verbose=0).history["loss"]
    assert losses[-1] < losses[0], losses

    classifier = kt.load(classify_run)
    labels, texts = zip(*training_pass(RunFolder(classify_run))[:48])
    dataset = tf.data.Dataset.from_tensor_slices((list(texts), list(labels)))
    losses = classifier.fit(dataset, batch_size=16, epochs=3, verbose=0).history["loss"]
    assert losses[-1] < losses[0], losses
    unknown = tf.data.Dataset.from_tensor_slices((["Hello"], ["no-such-class"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a class of the classifier"):
        classifier.fit(unknown, epochs=1, verbose=0)


def test_fit_on_an_export_trains_its_preset_and_calls_use_the_new_weights(translation_export):
    exported = kt.load(translation_export[0])
    before = exported.translate(SENTENCES)
    assert exported.model is None  # nothing Keras is read until it is needed
    targets = ["Let's try.", "Hello.", "Where is Tom?", "I don't know."]
    exported.compile(optimizer=keras.optimizers.Adam(1e-2))  # a rate that moves in 8 steps
    exported.fit(tf.data.Dataset.from_tensor_slices((SENTENCES, targets)), epochs=8, verbose=0)
    assert exported.model is not None
    assert exported.translate(SENTENCES, beam=2, max_length=10) != before


def test_init_from_starts_from_the_source_weights(translation_run, tmp_path):
    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.trainer import train

    config = TrainingConfig(max_steps=1, mixed_precision="none", jit_compile=False,
                            token_budget=512, patience=0)
    run_dir = str(tmp_path / "tuned")
    result = train(run_dir, config, data=str(pathlib.Path(translation_run) / "splits" / "validation.tsv"),
                   prepare_options={"source_column": 0, "target_column": 1, "split_seed": 1},
                   init_from=translation_run, verbose=0)
    stored = RunFolder(run_dir).config
    assert stored["init_from"]["path"] == os.path.abspath(translation_run)
    assert stored["model"] == RunFolder(translation_run).config["model"]

    source = kt.load(translation_run)
    recipe = task_for(stored)
    first, _, _ = recipe.make_datasets(RunFolder(run_dir), stored, config, seed=config.seed)
    features, labels = next(iter(first))
    expected = recipe.training_loss(stored, config)(labels, source.model(features))
    assert result.history["loss"][0] == pytest.approx(float(expected), rel=1e-4)


def test_init_from_refuses_what_cannot_work_in_one_line(cli, translation_run, lm_run, tmp_path):
    data = str(pathlib.Path(translation_run) / "splits" / "test.tsv")
    code, _, err = cli("train", "--run", tmp_path / "a", "--init-from", translation_run,
                       "--data", data, "--source-vocab-size", "900")
    assert code == 2 and "--source-vocab-size: the model and its vocabulary come from --init-from" in err
    code, _, err = cli("train", "--run", tmp_path / "b", "--init-from", lm_run, "--task",
                       "translate", "--data", data)
    assert code == 2 and "holds a model of task lm" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists() and not (tmp_path / "b" / "config.json").exists()


def test_config_file_sets_the_training_settings_and_flags_win(cli, tmp_path):
    from keras_transformer.training.command import read_settings

    path = tmp_path / "run.yaml"
    path.write_text("batch-tokens: 1024\nlr_scale: 0.5\nmax_steps: 7\n")
    assert read_settings(path) == {"token_budget": 1024, "lr_scale": 0.5, "max_steps": 7}
    path.write_text("batch_size: 32\n")
    code, _, err = cli("train", "--run", tmp_path / "r", "--config", path, "--data", "x.tsv")
    assert code == 2 and "unknown settings ['batch_size']" in err


def test_config_file_and_flag_in_a_run(tmp_path, translation_run):
    import argparse

    from keras_transformer.training import command

    path = tmp_path / "run.yaml"
    path.write_text("batch-tokens: 1024\nmax_steps: 7\n")
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--run", str(tmp_path / "r"), "--config", str(path), "--max-steps", "3"])
    from keras_transformer.training.config import TrainingConfig

    stored = TrainingConfig.for_task("translate").replace(**command.read_settings(args.config))
    config = TrainingConfig.from_flags(args, stored=stored)
    assert (config.token_budget, config.max_steps) == (1024, 3)


TASK_NAMES = {"translate", "lm", "classify"}


def _compares_a_task_name(node):
    if not isinstance(node, ast.Compare):
        return False
    operands = [node.left, *node.comparators]
    for operand in operands:
        values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        if any(isinstance(v, ast.Constant) and v.value in TASK_NAMES for v in values):
            return True
    return False


def test_no_module_outside_the_task_objects_compares_task_names():
    package = pathlib.Path(kt.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        # The server compares TF Serving's API verbs (predict, classify, regress); it reads
        # a SavedModel's signatures and never imports the task objects.
        if path.relative_to(package).parts[0] in ("tasks", "serving"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _compares_a_task_name(node):
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == [], "task names compared outside keras_transformer/tasks: " + ", ".join(found)


def test_the_task_classes_are_the_tasks_the_command_line_accepts():
    from keras_transformer.constants import TASKS
    from keras_transformer.tasks.loading import task_names

    assert tuple(TASKS) == task_names()
