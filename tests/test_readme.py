"""The README's Python examples run as written, on tiny models of the three tasks.

Each ```python block of README.md is executed in order in one namespace, with the run
folders it names (runs/zh-en, runs/lm-en, ...) replaced by tiny runs of the same task
and the folders it writes placed under a temporary directory.
"""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory):
    import keras

    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.loading import task_for

    run_dir = str(tmp_path_factory.mktemp("readme") / "zh-en")
    config = task_for("translate").prepare(
        run_dir, str(DEFAULT_CMN_ENG_PATH), "tiny", max_pairs=400, source_vocab_size=400,
        target_vocab_size=250, model_overrides={"max_length": 24})
    keras.utils.set_random_seed(3)
    task_for(config).build_model(config).save_weights(RunFolder(run_dir).final_weights_path)
    return run_dir


def test_the_readme_has_python_examples_of_each_task():
    code = "\n".join(python_blocks(README.read_text(encoding="utf-8")))
    for call in ("from_preset", ".translate(", ".generate(", ".classify(", ".fit(", "save_to_preset"):
        assert call in code, call


def test_the_readme_python_examples_run(translation_run, lm_run, classify_run, tmp_path,
                                         monkeypatch):
    runs = {"translate": translation_run, "lm": str(lm_run), "classify": str(classify_run)}
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in python_blocks(README.read_text(encoding="utf-8")):
        # A run folder the README names is a tiny run of the task it is loaded as.
        block = re.sub(r'kt\.Translator\.from_preset\("runs/[\w.-]+"',
                       f'kt.Translator.from_preset("{runs["translate"]}"', block)
        block = re.sub(r'kt\.CausalLM\.from_preset\("runs/[\w.-]+"',
                       f'kt.CausalLM.from_preset("{runs["lm"]}"', block)
        block = re.sub(r'kt\.TextClassifier\.from_preset\("runs/[\w.-]+"',
                       f'kt.TextClassifier.from_preset("{runs["classify"]}"', block)
        block = re.sub(r'kt\.load\("runs/zh-en"', f'kt.load("{runs["translate"]}"', block)
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 (the README's own code)
