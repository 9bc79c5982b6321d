"""`export --format ctranslate2`: the conversion is exact (CTranslate2 float32 gives
our greedy search's tokens and our teacher-forced log-probabilities), `translate` and
`evaluate` run the folder, and what CTranslate2 cannot represent is refused in one line."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

ctranslate2 = pytest.importorskip("ctranslate2")

from keras_transformer.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def converted(translate_run, tmp_path_factory):
    from keras_transformer.export.command import export_ctranslate2

    base = str(tmp_path_factory.mktemp("ct2"))
    return export_ctranslate2(translate_run, "zh_en", base=base, quantization="float32")


@pytest.fixture(scope="module")
def loaded_run(translate_run):
    from keras_transformer.runs import load_run

    return load_run(translate_run)


@pytest.fixture(scope="module")
def test_sources(loaded_run):
    sources, _ = loaded_run.split("test")
    # The test split (15 sentences), an empty one and one past the source length cap.
    return sources[:40] + ["", "这是一个非常长的句子，" * 10]


def test_folder_holds_the_model_its_sentencepiece_models_and_manifest(converted):
    for name in ("model.bin", "config.json", "source.model", "target.model", "manifest.json"):
        assert os.path.isfile(os.path.join(converted, name)), name
    manifest = json.load(open(os.path.join(converted, "manifest.json")))
    assert manifest["format"] == "ctranslate2" and manifest["quantization"] == "float32"
    assert os.path.basename(converted) == "ctranslate2-float32"


def test_greedy_tokens_equal_our_search_on_a_fixed_set(converted, loaded_run, test_sources):
    from keras_transformer.evaluation.translators import CTranslate2Translator
    from keras_transformer.evaluation.translators import translation_module

    module = translation_module(loaded_run, beam_width=1)
    ours = [t.decode() for t in module.translate(tf.constant(test_sources))["translation"].numpy()]
    theirs, scores = CTranslate2Translator(converted, beam_width=1, alpha=0.0)(test_sources)
    assert len(set(ours)) > 5  # the set tells outputs apart
    assert [row[0] for row in theirs] == ours
    np.testing.assert_allclose(
        [row[0] for row in scores],
        module.translate(tf.constant(test_sources))["score"].numpy(), rtol=1e-3)


def test_teacher_forced_log_probabilities_equal_ours(converted, loaded_run):
    from keras_transformer.evaluation.translators import CTranslate2Translator
    from keras_transformer.evaluation.translators import translation_module

    sources, targets = loaded_run.split("test")
    sources, targets = sources[:8], [target[:40] for target in targets[:8]]
    module = translation_module(loaded_run)  # held: its tf.functions keep a weak reference
    ours = module.score(tf.constant(sources), tf.constant(targets))["log_probability"].numpy()
    translator = CTranslate2Translator(converted)
    target_pieces = translator.target.encode(targets, out_type=str)
    results = translator.translator.score_batch(translator.pieces(sources), target_pieces)
    theirs = [sum(result.log_probs) for result in results]
    # Summed float32 log-probabilities of up to 40 subwords: agree to 1e-3 relative
    # (measured: 2.4e-4 at most); a misplaced weight changes them by whole units.
    np.testing.assert_allclose(theirs, ours, rtol=1e-3)


def test_translate_and_evaluate_run_the_folder_with_beam_settings(converted, loaded_run,
                                                                  tmp_path, capsys):
    sources, targets = loaded_run.split("test")
    assert main(["translate", "--ctranslate2", converted, "--beam", "4", "--alpha", "0.6",
                 "--coverage", "0.2", "--n-best", "2", sources[0]]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("0\t1\t")
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources[:6], targets[:6])),
                    encoding="utf-8")
    assert main(["evaluate", "--ctranslate2", converted, "--data", str(data), "--beam", "2",
                 "--no-progress", "--output", str(tmp_path / "hyp.txt")]) == 0
    out = capsys.readouterr().out
    assert "BLEU" in out and "6 sentences, beam 2" in out
    assert len((tmp_path / "hyp.txt").read_text(encoding="utf-8").splitlines()) == 6


def test_a_window_model_is_refused_in_one_line(window_run, tmp_path, capsys):
    code = main(["export", "--run", window_run, "--name", "zh_en", "--base", str(tmp_path),
                 "--format", "ctranslate2"])
    error = capsys.readouterr().err.strip()
    assert code != 0 and len(error.splitlines()) == 1
    assert "local attention window" in error and "4" in error
    assert not os.path.exists(tmp_path / "zh_en" / "ctranslate2-int8")
