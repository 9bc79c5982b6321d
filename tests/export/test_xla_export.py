"""An XLA export (`export --xla`) warms every source width it compiles for, and
translates as the graph export does."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.decoding.loop import pad_to_static_width
from keras_transformer.decoding.loop import static_widths
from keras_transformer.export import TranslationModule
from keras_transformer.export import write_export
from keras_transformer.export.module import width_filling_texts
from keras_transformer.export.writer import WARMUP_FILE

SAMPLE = ["我们来试试。", "这是一个非常长的句子，" * 8, "你好。"]
SEARCHING_SIGNATURES = {"serving_default", "translate_n_best", "attention"}


def _module(tiny_translator, jit_compile):
    module, _ = tiny_translator
    return TranslationModule(module.model, module.source_tokenizer, module.target_tokenizer,
                             max_source_length=24, beam_width=1, max_output_length=12,
                             jit_compile=jit_compile)


def _padded_widths(module, texts):
    source = module.encode_text(tf.constant(texts))
    lengths = (source.numpy() != PAD_ID).sum(axis=1)
    cap = module.model.config.max_length
    return {pad_to_static_width(tf.zeros((1, max(length, 1)), tf.int32), cap).shape[1]
            for length in lengths}


@pytest.fixture(scope="module")
def xla_export(tiny_translator, tmp_path_factory):
    module = _module(tiny_translator, jit_compile=True)
    base = tmp_path_factory.mktemp("xla")
    path = write_export(module, str(base), "zh_en", warmup_texts=SAMPLE[:1],
                        asset_files=tiny_translator[1])
    return module, path


def test_width_filling_texts_reach_every_width_the_encoding_allows(tiny_translator):
    module = _module(tiny_translator, jit_compile=True)
    cap = module.model.config.max_length
    texts = width_filling_texts(["你好。"], module.encode_text, cap)
    # max_source_length 24 truncates: widths 8 and 16, and 32 for 17..24 subwords.
    reachable = [width for width in static_widths(cap) if width < 24] + [32]
    assert [_padded_widths(module, [text]).pop() for text in texts] == reachable


def test_the_warmup_file_compiles_each_source_width_for_every_searching_signature(xla_export):
    from tensorflow_serving.apis import prediction_log_pb2

    module, path = xla_export
    requests = {}
    for record in tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        if "text" not in request.inputs:  # the score signature's source and target
            continue
        text = tf.make_ndarray(request.inputs["text"]).tolist()[0].decode()
        requests.setdefault(request.model_spec.signature_name, []).append(text)
    assert SEARCHING_SIGNATURES <= set(requests)
    every_width = _padded_widths(module, width_filling_texts(SAMPLE[:1], module.encode_text,
                                                             module.model.config.max_length))
    assert every_width == {8, 16, 32}
    for name in SEARCHING_SIGNATURES:
        assert SAMPLE[0] in requests[name]
        assert _padded_widths(module, requests[name]) == every_width, name


def test_the_graph_export_warms_only_the_texts_given(tiny_translator):
    module = _module(tiny_translator, jit_compile=False)
    assert module.warmup_texts(SAMPLE[:2]) == SAMPLE[:2]


def test_an_xla_export_translates_as_the_graph_module(tiny_translator, xla_export):
    _, path = xla_export
    loaded = tf.saved_model.load(path).signatures["serving_default"]
    graph_module = _module(tiny_translator, jit_compile=False)
    texts = tf.constant(SAMPLE)
    expected = graph_module.translate(texts)
    result = loaded(text=texts)
    assert result["translation"].numpy().tolist() == expected["translation"].numpy().tolist()
    np.testing.assert_allclose(result["score"], expected["score"], atol=1e-4)


def test_an_xla_language_model_warms_every_prompt_width_of_serving_default(english_tokenizer):
    import keras

    from keras_transformer.export import LanguageModelModule
    from keras_transformer.models import build_language_model

    keras.utils.set_random_seed(1)
    model = build_language_model("tiny", vocab_size=english_tokenizer.vocab_size)
    module = LanguageModelModule(model, english_tokenizer, max_length=40, max_new_tokens=6,
                                 jit_compile=True)
    texts = module.warmup_texts(["Tom is here."])
    assert texts[0] == "Tom is here."
    new_tokens = tf.fill([len(texts)], 6)
    prompts = module.encode_prompt(tf.constant(texts), new_tokens).numpy()
    widths = {pad_to_static_width(tf.zeros((1, n), tf.int32), 40).shape[1]
              for n in (prompts != PAD_ID).sum(axis=1)}
    # BOS and at most 40 - 1 - 6 = 33 subwords: 34 positions, padded to 40.
    assert widths == {8, 16, 32, 40}
