"""Helpers for the web page tests: a tiny exported translator, loopback HTTP.

The browser helpers are in screenshot.py, next to this file.
"""

import itertools
import json
import socket
import urllib.error
import urllib.request

MODEL_NAME = "zh_en"


def export_tiny_translator(base_path, work_dir):
    """Trains tokenizers on a corpus slice, builds a tiny (untrained) model and exports it.

    Returns:
        The written version folder, `<base_path>/zh_en/1`.
    """
    import keras

    from keras_transformer.data import read_cmn_eng
    from keras_transformer.data import train_tokenizers
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.export import TranslationModule
    from keras_transformer.export import write_export
    from keras_transformer.models import build_transformer

    pairs = list(itertools.islice(read_cmn_eng(), 0, 28000, 40))
    source_path, target_path = train_tokenizers(
        [p.source for p in pairs], [p.target for p in pairs], work_dir,
        source_vocab_size=1200, target_vocab_size=500,
    )
    source = SubwordTokenizer.from_file(source_path)
    target = SubwordTokenizer.from_file(target_path)
    keras.utils.set_random_seed(5)
    model = build_transformer(
        "tiny", source_vocab_size=source.vocab_size, target_vocab_size=target.vocab_size)
    module = TranslationModule(model, source, target, max_source_length=24, beam_width=3,
                               max_output_length=12)
    return write_export(module, str(base_path), MODEL_NAME, asset_files=(source_path, target_path))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(method, url, body=None, timeout=60):
    """Sends one request; returns (status, parsed JSON or text)."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, payload = response.status, response.read()
            kind = response.headers.get_content_type()
    except urllib.error.HTTPError as error:
        status, payload, kind = error.code, error.read(), error.headers.get_content_type()
    if kind == "application/json":
        return status, json.loads(payload)
    return status, payload.decode("utf-8")


def start_server(model_base_path, **options):
    """A started `ServerThread` serving zh_en on free loopback ports (stop it when done)."""
    from keras_transformer.serving import server as server_lib

    return server_lib.ServerThread(server_lib.ServerOptions.from_model(
        MODEL_NAME, str(model_base_path), port=0, rest_api_port=0, poll_seconds=0,
        **options)).start()


LM_NAME = "english"
CLASSIFIER_NAME = "sentence_type"
CLASSIFIER_LABELS = ("exclamation", "question", "statement")


def export_tiny_task_models(base_path):
    """Exports an untrained language model (LM_NAME) and classifier (CLASSIFIER_NAME)
    sharing one English SentencePiece model, as `keras-transformer export` would."""
    import keras

    from keras_transformer import build_classifier
    from keras_transformer import build_language_model
    from keras_transformer.data import read_cmn_eng
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.data.tokenizer import train_sentencepiece
    from keras_transformer.export import ClassificationModule
    from keras_transformer.export import LanguageModelModule
    from keras_transformer.export import write_export

    pairs = list(itertools.islice(read_cmn_eng(), 0, 28000, 40))
    tokenizer = SubwordTokenizer(train_sentencepiece([p.target for p in pairs], 400))
    keras.utils.set_random_seed(5)
    language_model = build_language_model("tiny", vocab_size=tokenizer.vocab_size, max_length=32)
    write_export(LanguageModelModule(language_model, tokenizer, max_new_tokens=8),
                 str(base_path), LM_NAME)
    classifier = build_classifier("tiny", vocab_size=tokenizer.vocab_size,
                                  num_classes=len(CLASSIFIER_LABELS))
    write_export(ClassificationModule(classifier, tokenizer, CLASSIFIER_LABELS, max_length=24),
                 str(base_path), CLASSIFIER_NAME)


def start_models_server(base_path, names):
    """A started `ServerThread` serving `<base_path>/<name>` for each name."""
    from keras_transformer.serving import config as config_lib
    from keras_transformer.serving import server as server_lib

    entries = " ".join(
        f"config {{ name: '{name}' base_path: '{base_path}/{name}' model_platform: 'tensorflow' }}"
        for name in names)
    return server_lib.ServerThread(server_lib.ServerOptions(
        model_config=config_lib.parse_model_config(f"model_config_list {{ {entries} }}"),
        port=0, rest_api_port=0, poll_seconds=0)).start()
