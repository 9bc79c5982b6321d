"""`export --quantize int8|bfloat16` for the three tasks: weights stored as asked, the
manifest saying so, loadable by the TF1 loader and the embedded server, core ops only,
and translations that mostly equal the float32 export's."""

import gc
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from export_helpers import graph_ops_report
from export_helpers import last_json_line
from export_helpers import post
from export_helpers import run_python
from keras_transformer.serving import server as server_lib
from keras_transformer.tasks import load
from keras_transformer.serving.config import ServerOptions
from keras_transformer.serving.config import single_model_config

MODES = ("int8", "bfloat16")
# Greedy translations of the test split (15 sentences) by the untrained tiny model
# that equal the float32 export's: at least this share (measured: 13 of 15, 0.87,
# for both int8 and bfloat16).
SAME_SHARE = {"int8": 0.75, "bfloat16": 0.75}
# The variables' dtypes each mode must store (besides float32 scales, biases, norms).
STORED = {"int8": tf.int8, "bfloat16": tf.bfloat16}


def _translations(path, texts):
    loaded = tf.saved_model.load(path)
    result = loaded.signatures["serving_default"](text=tf.constant(texts))
    return [t.decode() for t in result["translation"].numpy()]


def _variable_dtypes(path):
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    return {tf.as_dtype(dtype) for dtype in reader.get_variable_to_dtype_map().values()}


@pytest.fixture(scope="module")
def exports(translate_run, tmp_path_factory):
    """{mode: version folder}: the run exported greedy, once per quantization, each
    under its own model name."""
    from keras_transformer.export.command import export_run

    base = str(tmp_path_factory.mktemp("quantized"))
    return base, {mode: export_run(translate_run, f"zh_en_{mode}", base=base, beam=1,
                                   quantize=mode)
                  for mode in ("none",) + MODES}


@pytest.fixture(scope="module")
def test_sources(translate_run):
    """The test split's sources (15): the fixed set compared across exports."""
    from keras_transformer.runs import load_run

    sources, _ = load_run(translate_run).split("test")
    return sources[:40]


def test_manifest_records_the_quantization_and_variables_are_stored_so(exports):
    _, paths = exports
    for mode, path in paths.items():
        manifest = json.load(open(os.path.join(path, "manifest.json")))
        assert manifest["quantization"] == mode
        assert not os.path.exists(os.path.join(path, "model.keras"))
        # The preset beside the SavedModel keeps the float32 weights, to fine-tune from.
        preset = load(os.path.join(path, "preset")).model
        assert {weight.dtype for weight in preset.weights} == {"float32"}, mode
        dtypes = _variable_dtypes(path)
        for other, dtype in STORED.items():
            assert (dtype in dtypes) == (other == mode), (mode, dtypes)
    sizes = {mode: sum(os.path.getsize(os.path.join(root, name))
                       for root, _, names in os.walk(os.path.join(path, "variables"))
                       for name in names) for mode, path in paths.items()}
    assert sizes["int8"] < 0.5 * sizes["none"] and sizes["bfloat16"] < 0.7 * sizes["none"]


def test_quantized_translations_mostly_equal_float32(exports, test_sources):
    _, paths = exports
    reference = _translations(paths["none"], test_sources)
    assert len(set(reference)) > 5  # the set tells outputs apart
    for mode in MODES:
        translations = _translations(paths[mode], test_sources)
        same = np.mean([a == b for a, b in zip(translations, reference)])
        assert same >= SAME_SHARE[mode], (mode, same)


def test_tf1_loader_translates_each_quantized_export(exports, test_sources):
    _, paths = exports
    output = run_python(
        """
        import json, sys
        import tensorflow as tf
        import tensorflow_text
        tf.compat.v1.disable_eager_execution()
        results = {}
        for path in sys.argv[2:]:
            with tf.compat.v1.Session(graph=tf.Graph()) as session:
                meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
                signature = meta.signature_def["serving_default"]
                feed = {signature.inputs["text"].name: json.loads(sys.argv[1])}
                fetched = session.run(signature.outputs["translation"].name, feed_dict=feed)
            results[path] = [t.decode() for t in fetched]
        print(json.dumps(results))
        """,
        json.dumps(test_sources[:4]), *[paths[mode] for mode in MODES],
    )
    results = last_json_line(output)
    for mode in MODES:
        assert results[paths[mode]] == _translations(paths[mode], test_sources[:4])


def test_quantized_graphs_use_only_core_tensorflow_and_tensorflow_text_ops(exports):
    _, paths = exports
    for mode in MODES:
        report = graph_ops_report(paths[mode])
        assert report["outside"] == [] and report["xla"] == [], (mode, report)


def test_embedded_server_translates_each_quantized_export(exports, test_sources):
    base, paths = exports
    config = single_model_config("zh_en_int8", os.path.join(base, "zh_en_int8"))
    config.model_config_list.config.extend(single_model_config(
        "zh_en_bfloat16", os.path.join(base, "zh_en_bfloat16")).model_config_list.config)
    options = ServerOptions(model_config=config, port=0, rest_api_port=0, poll_seconds=0,
                            web_page=False)
    with server_lib.ServerThread(options) as running:
        for mode in MODES:
            status, body = post(running, f"/v1/models/zh_en_{mode}:predict",
                                {"instances": test_sources[:3]})
            assert status == 200, body
            assert [row["translation"] for row in body["predictions"]] == _translations(
                paths[mode], test_sources[:3])


@pytest.mark.parametrize("mode", MODES)
def test_language_model_and_classifier_export_quantized(mode, lm_run, classify_run, tmp_path):
    from keras_transformer.export.command import export_run

    float_path = export_run(classify_run, "kinds", base=str(tmp_path / "float"))
    path = export_run(classify_run, "kinds", base=str(tmp_path), quantize=mode)
    texts = ["Who are you?", "I am here.", "Come in!"]
    expected = tf.saved_model.load(float_path).signatures["serving_default"](
        text=tf.constant(texts))["probabilities"].numpy()
    probabilities = tf.saved_model.load(path).signatures["serving_default"](
        text=tf.constant(texts))["probabilities"].numpy()
    np.testing.assert_allclose(probabilities, expected, atol=0.05)
    assert STORED[mode] in _variable_dtypes(path)

    path = export_run(lm_run, "english", base=str(tmp_path), quantize=mode, max_new_tokens=4)
    generation = tf.saved_model.load(path).signatures["serving_default"](
        text=tf.constant(["Tom is"]))["generation"].numpy()
    assert generation.shape == (1,) and STORED[mode] in _variable_dtypes(path)
    assert json.load(open(os.path.join(path, "manifest.json")))["quantization"] == mode
    assert graph_ops_report(path)["outside"] == []


def test_int8_quantization_leaves_the_garbage_collector_unfrozen(translate_run):
    from keras_transformer.export.quantization import quantize_model

    model = load(translate_run).model
    quantize_model(model, "int8")
    assert gc.get_freeze_count() == 0
    assert any(weight.dtype == "int8" for weight in model.weights)
    # A failed quantization (an int8 model quantized again) unfreezes as well.
    with pytest.raises(ValueError):
        quantize_model(model, "int8")
    assert gc.get_freeze_count() == 0
