import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from export_helpers import graph_ops_report
from export_helpers import run_python
from keras_transformer.export import write_export
from keras_transformer.export.writer import WARMUP_FILE

SAMPLE = [
    "我们来试试。",
    "",
    "这是一个非常长的句子，" * 40,  # far past max_source_length: truncated, not failed
    "Tom说他明天去Paris看Eiffel塔。",
    "你好 hello 😀!",
]


@pytest.fixture(scope="module")
def exported(tiny_translator, tmp_path_factory):
    module, assets = tiny_translator
    base = tmp_path_factory.mktemp("export")
    path = write_export(
        module, str(base), "zh_en", warmup_texts=SAMPLE[:2], asset_files=assets,
        manifest={"config": module.model.config.to_dict()},
    )
    return module, base, path


def test_version_folder_layout(exported):
    _, base, path = exported
    assert os.path.basename(path) == "1"
    for name in ("saved_model.pb", "variables", "assets/source.model", "assets/target.model",
                 f"assets.extra/{WARMUP_FILE}", "manifest.json"):
        assert os.path.exists(os.path.join(path, name)), name
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    assert manifest["name"] == "zh_en" and manifest["version"] == 1
    assert [n for n in os.listdir(base / "zh_en") if not n.isdigit()] == []


def test_fresh_process_translates_like_the_in_process_module(exported):
    module, _, path = exported
    expected = module.translate(tf.constant(SAMPLE))
    output = run_python(
        """
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # registers the SentencePiece ops
        loaded = tf.saved_model.load(sys.argv[1])
        result = loaded.signatures["serving_default"](text=tf.constant(json.loads(sys.argv[2])))
        print(json.dumps({"translation": [t.decode() for t in result["translation"].numpy()],
                          "score": result["score"].numpy().tolist()}))
        """,
        path, json.dumps(SAMPLE),
    )
    loaded = json.loads(output.strip().splitlines()[-1])
    assert loaded["translation"] == [t.decode() for t in expected["translation"].numpy()]
    np.testing.assert_allclose(loaded["score"], expected["score"].numpy(), atol=1e-4)
    assert loaded["translation"][1] == ""  # the empty input


def test_saved_model_cli_lists_signatures_with_dtypes(exported):
    _, _, path = exported
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    text = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True,
                          text=True, timeout=120, check=True).stdout
    default = text.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    assert "inputs['text'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in default
    assert "outputs['translation'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in default
    assert "outputs['score'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1)" in default
    for name in ("translate_n_best", "score", "tokenize"):
        assert f"signature_def['{name}']" in text
    assert "output_0" not in text


def test_tf1_loader_runs_the_signature_by_tensor_names(exported):
    module, _, path = exported
    expected = [t.decode() for t in module.translate(tf.constant(SAMPLE[:1]))["translation"].numpy()]
    output = run_python(
        """
        import json, sys
        import tensorflow as tf
        import tensorflow_text
        tf.compat.v1.disable_eager_execution()
        with tf.compat.v1.Session(graph=tf.Graph()) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[1])
            signature = meta.signature_def["serving_default"]
            feed = {signature.inputs["text"].name: [sys.argv[2]]}
            fetched = session.run(signature.outputs["translation"].name, feed_dict=feed)
        print(json.dumps([t.decode() for t in fetched]))
        """,
        path, SAMPLE[0],
    )
    assert json.loads(output.strip().splitlines()[-1]) == expected


def test_graph_uses_only_core_tensorflow_and_tensorflow_text_ops(exported):
    _, _, path = exported
    report = graph_ops_report(path)
    assert report["outside"] == []
    assert report["xla"] == []
    assert any("Sentencepiece" in op for op in report["text"])


def test_an_export_carries_the_layers_but_not_their_gradient_functions(exported):
    from tensorflow.core.protobuf import saved_model_pb2

    _, _, path = exported
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as file:
        saved.ParseFromString(file.read())
    library = saved.meta_graphs[0].graph_def.library
    # The layer norms' ops carry their custom gradient's mark; the gradient
    # functions themselves are left out of a serving export.
    assert any("_gradient_op_type" in node.attr
               for function in library.function for node in function.node_def)
    assert len(library.registered_gradients) == 0


def test_warmup_file_holds_prediction_logs_whose_requests_run(exported):
    from tensorflow_serving.apis import prediction_log_pb2

    _, _, path = exported
    loaded = tf.saved_model.load(path)
    records = list(tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE)))
    names = []
    for record in records:
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        assert request.model_spec.name == "zh_en"
        names.append(request.model_spec.signature_name)
        signature = loaded.signatures[request.model_spec.signature_name or "serving_default"]
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        result = signature(**{k: tf.constant(v) for k, v in inputs.items()})
        assert all(value.shape[0] == 1 for value in result.values())
    # Every signature, on each of the two warmup texts: no first call is cold.
    assert sorted(names) == sorted(list(loaded.signatures) * 2)


def test_other_signatures_serve_users(exported):
    module, _, path = exported
    loaded = tf.saved_model.load(path)
    n_best = loaded.signatures["translate_n_best"](text=tf.constant(SAMPLE[:2]))
    assert n_best["translations"].shape == (2, 3)
    scores = n_best["scores"].numpy()
    assert np.all(np.diff(scores[0]) <= 1e-6)  # best first
    best = loaded.signatures["serving_default"](text=tf.constant(SAMPLE[:1]))
    scored = loaded.signatures["score"](source=tf.constant(SAMPLE[:1]), target=best["translation"])
    # Scoring the model's own translation gives the score the search reported
    # (unless the search stopped at the length limit without an end token).
    if len(best["translation"].numpy()[0]) < 40:
        np.testing.assert_allclose(scored["score"], best["score"], atol=1e-3)
    tokens = loaded.signatures["tokenize"](text=tf.constant(["我们来试试。", ""]))
    assert tokens["lengths"].numpy()[1] == 0
    assert tokens["token_ids"].shape[0] == 2
    assert tokens["pieces"].dtype == tf.string


def test_an_export_searches_and_scores_with_its_coverage_penalty(tiny_translator, tmp_path):
    from keras_transformer.export import TranslationModule

    module, assets = tiny_translator

    def translator(coverage):
        return TranslationModule(
            module.model, module.source_tokenizer, module.target_tokenizer, max_source_length=24,
            beam_width=3, max_output_length=12, coverage=coverage,
        )

    covering, plain_module = translator(0.5), translator(0.0)
    path = write_export(covering, str(tmp_path), "zh_en", warmup_texts=SAMPLE[:1],
                        asset_files=assets)
    loaded = tf.saved_model.load(path)
    # 24 source pieces, at most 12 steps: no search covers the long sentence fully.
    texts = tf.constant([SAMPLE[0], SAMPLE[2]])
    expected = covering.translate(texts)
    result = loaded.signatures["serving_default"](text=texts)
    assert result["translation"].numpy().tolist() == expected["translation"].numpy().tolist()
    np.testing.assert_allclose(result["score"], expected["score"], atol=1e-4)
    # The score signature adds the same penalty: below the plain score.
    scored = loaded.signatures["score"](source=texts, target=result["translation"])["score"]
    plain = plain_module.score(texts, result["translation"])["score"]
    np.testing.assert_allclose(scored, covering.score(texts, result["translation"])["score"],
                               atol=1e-4)
    assert scored.numpy()[1] < plain.numpy()[1] - 1e-3


def test_every_signature_answers_an_empty_batch_with_no_rows(exported):
    # A columnar REST request (`{"inputs": {"text": []}}`) or a gRPC tensor of shape
    # [0] reaches the graph with no rows; the answer is no rows, not an error.
    _, _, path = exported
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) >= {"serving_default", "translate_n_best", "score", "attention"}
    for name, function in loaded.signatures.items():
        inputs = function.structured_input_signature[1]
        outputs = function(**{key: tf.constant([], spec.dtype) for key, spec in inputs.items()})
        assert outputs and all(value.shape[0] == 0 for value in outputs.values()), name


def test_existing_version_is_not_overwritten_unless_asked(tiny_translator, exported):
    module, assets = tiny_translator
    _, base, _ = exported
    with pytest.raises(FileExistsError, match="--overwrite"):
        write_export(module, str(base), "zh_en", version=1)
    with pytest.raises(ValueError, match="Model name"):
        write_export(module, str(base), "../evil")


def test_killed_export_leaves_no_numeric_folder(tmp_path):
    script = textwrap.dedent(
        """
        import itertools, sys
        from keras_transformer.data import read_cmn_eng, train_tokenizers
        from keras_transformer.data.tokenizer import SubwordTokenizer
        from keras_transformer.export import TranslationModule, write_export
        from keras_transformer.models import build_transformer
        pairs = list(itertools.islice(read_cmn_eng(), 0, 28000, 40))
        s, t = train_tokenizers([p.source for p in pairs], [p.target for p in pairs], sys.argv[1],
                                source_vocab_size=1200, target_vocab_size=500)
        source, target = SubwordTokenizer.from_file(s), SubwordTokenizer.from_file(t)
        model = build_transformer("tiny", source_vocab_size=1200, target_vocab_size=500)
        module = TranslationModule(model, source, target, max_source_length=16)
        print("exporting", flush=True)
        write_export(module, sys.argv[1] + "/export", "zh_en")
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    try:
        assert process.stdout.readline().strip() == "exporting"
        model_base = tmp_path / "export" / "zh_en"
        deadline = time.time() + 120
        while time.time() < deadline and not (model_base.exists() and os.listdir(model_base)):
            time.sleep(0.05)
        assert model_base.exists() and os.listdir(model_base), "export never started"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert [n for n in os.listdir(model_base) if n.isdigit()] == []


def test_attention_signature_returns_one_map_per_layer_and_head(exported):
    module, _, path = exported
    loaded = tf.saved_model.load(path)
    result = loaded.signatures["attention"](text=tf.constant(SAMPLE[:2]))
    config = module.model.config
    maps = result["cross_attention"].numpy()
    batch, layers, heads, targets, sources = maps.shape
    assert (batch, layers, heads) == (2, config.decoder.num_layers, config.num_heads)
    assert targets == result["target_pieces"].shape[1]
    assert sources == result["source_pieces"].shape[1]
    source_length = result["source_lengths"].numpy()[0]
    target_length = result["target_lengths"].numpy()[0]
    real = maps[0, :, :, :target_length, :]
    np.testing.assert_allclose(real.sum(-1), 1.0, atol=1e-4)  # rows are distributions
    assert np.all(real[..., source_length:] == 0)  # over real input tokens only
    pieces = [p.decode() for p in result["target_pieces"].numpy()[0][:target_length]]
    assert pieces[-1] == "</s>"
    expected = module.translate(tf.constant(SAMPLE[:1]))["translation"].numpy()[0]
    assert result["translation"].numpy()[0] == expected
