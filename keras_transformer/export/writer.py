"""Writes an export module (`TranslationModule`, `ClassificationModule`, ...) as a
versioned SavedModel that TF Serving loads.

Layout of `<base>/<name>/<version>/`:
    saved_model.pb, variables/       the graph and weights (tag "serve")
    assets/source.model, target.model    the SentencePiece models
    assets.extra/tf_serving_warmup_requests    PredictionLog records TF Serving replays
    manifest.json                    config, vocabulary sizes, library versions, score
    preset/                          the float32 weights and tokenizers (`Task.save_to_preset`),
                                     for `keras_transformer.load` and `train --init-from`

The version is written under a hidden non-numeric name and renamed when complete:
TF Serving and our server ignore non-integer children, so a half-written (or
killed) export is never loaded.
"""

import dataclasses
import json
import os
import shutil
import uuid

import tensorflow as tf

from keras_transformer.versions import MODEL_NAME_RULE
from keras_transformer.versions import is_model_name
from keras_transformer.versions import is_version_dir
from keras_transformer.versions import next_version

WARMUP_FILE = "tf_serving_warmup_requests"
MANIFEST_FILE = "manifest.json"
# The preset a version was made from (`Task.save_to_preset`), for fine-tuning; TF Serving
# reads only the SavedModel beside it.
PRESET_DIR = "preset"
_TEMP_PREFIX = ".tmp-export-"
# An export serves and is never differentiated (fine-tuning reads preset/): the
# gradient functions of the layers' custom gradients are not traced into it.
SERVING_SAVE_OPTIONS = tf.saved_model.SaveOptions(experimental_custom_gradients=False)


def check_model_name(name):
    """Raises `ValueError` unless `name` is a plain identifier usable in URLs and paths."""
    if not is_model_name(name):
        raise ValueError(
            f"Model name {name!r} is not accepted: use {MODEL_NAME_RULE} (for example zh_en)."
        )
    return name


@dataclasses.dataclass(frozen=True)
class WarmupRequest:
    """One request TF Serving replays before a version serves.

    Attributes:
        signature_name: the signature it calls.
        inputs: for a Predict request, {input name: one value per row}.
        classify_texts: for a Classify request instead, the texts sent as
            `tf.Example`s with a "text" bytes feature.
    """

    signature_name: str
    inputs: dict | None = None
    classify_texts: list | None = None


def warmup_for_every_signature(requests, signatures, texts):
    """`requests` plus one per text for each signature they leave out, so no first call is cold.

    A signature left out whose inputs are all strings gets each text in each
    input; one that also takes numbers needs its module to say which (its
    `warmup_requests`).

    Args:
        requests: the module's `WarmupRequest`s.
        signatures: {signature key: concrete function}, as exported.
        texts: the warmup texts.

    Returns:
        The list of `WarmupRequest`s.

    Raises:
        ValueError: for a signature left out that takes numbers.
    """
    requests = list(requests)
    covered = {request.signature_name for request in requests}
    for key, function in signatures.items():
        if key in covered:
            continue
        specs = tf.nest.flatten(function.structured_input_signature)  # Named as exported.
        if any(spec.dtype != tf.string for spec in specs):
            raise ValueError(
                f"Signature {key!r} takes numbers and has no warmup request: give it one in "
                "the module's warmup_requests().")
        requests += [WarmupRequest(key, inputs={spec.name: [text] for spec in specs})
                     for text in texts]
    return requests


def write_warmup_requests(path, model_name, requests):
    """Writes `WarmupRequest`s as TF Serving's warmup file (TFRecord of PredictionLogs)."""
    from tensorflow_serving.apis import classification_pb2
    from tensorflow_serving.apis import model_pb2
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    with tf.io.TFRecordWriter(str(path)) as writer:
        for entry in requests:
            spec = model_pb2.ModelSpec(name=model_name, signature_name=entry.signature_name)
            if entry.classify_texts is not None:
                request = classification_pb2.ClassificationRequest(model_spec=spec)
                for text in entry.classify_texts:
                    feature = request.input.example_list.examples.add().features.feature["text"]
                    feature.bytes_list.value.append(text.encode("utf-8"))
                log = prediction_log_pb2.PredictionLog(
                    classify_log=prediction_log_pb2.ClassifyLog(request=request))
            else:
                request = predict_pb2.PredictRequest(model_spec=spec)
                for name, values in entry.inputs.items():
                    dtype = tf.string if isinstance(values[0], str) else None
                    request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=dtype))
                log = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())


def set_method_names(export_dir, method_names):
    """Gives signatures a method name other than predict, in saved_model.pb.

    `tf.saved_model.save` writes every SignatureDef with the predict method;
    TF Serving's Classify API (with --enable_signature_method_name_check, and
    any client that reads the metadata) wants "tensorflow/serving/classify".
    The graph, the functions and the TF2 loader do not depend on it.

    Args:
        export_dir: a SavedModel folder.
        method_names: dict {signature key: method name}.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    if not method_names:
        return
    path = os.path.join(export_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as file:
        saved_model.ParseFromString(file.read())
    for meta_graph in saved_model.meta_graphs:
        for key, method in method_names.items():
            if key not in meta_graph.signature_def:
                raise KeyError(f"No signature {key!r} in {export_dir}")
            meta_graph.signature_def[key].method_name = method
    with open(path, "wb") as file:
        file.write(saved_model.SerializeToString())


def _remove_abandoned_temporaries(model_base):
    """Deletes temporary folders of exports whose process no longer runs."""
    if not os.path.isdir(model_base):
        return
    for name in os.listdir(model_base):
        if not name.startswith(_TEMP_PREFIX):
            continue
        pid = name[len(_TEMP_PREFIX) :].split("-")[0]
        if pid.isdigit() and _process_alive(int(pid)):
            continue
        shutil.rmtree(os.path.join(model_base, name), ignore_errors=True)


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_export(
    module,
    base_path,
    name,
    version=None,
    overwrite=False,
    warmup_texts=(),
    manifest=None,
    preset=None,
    asset_files=(),
):
    """Saves `module` as `<base_path>/<name>/<version>/`, atomically.

    Args:
        module: an `ExportModule` (`signatures()`, `method_names()`, `warmup_texts()`,
            `warmup_requests()`).
        base_path: the TF Serving base path, e.g. "export".
        name: the model name, a plain identifier.
        version: integer version; default one above the latest present.
        overwrite: replace an existing version (otherwise `FileExistsError`).
        warmup_texts: sentences replayed by TF Serving before the version serves,
            on every signature, with those the module adds (`module.warmup_texts`;
            `warmup_for_every_signature`).
        manifest: JSON-serialisable dict written as manifest.json.
        preset: a task object (`keras_transformer.tasks.Task`) saved as preset/.
        asset_files: files copied into assets/ (the tokenizer models).

    Returns:
        The path of the written version folder.
    """
    check_model_name(name)
    model_base = os.path.join(base_path, name)
    os.makedirs(model_base, exist_ok=True)
    _remove_abandoned_temporaries(model_base)
    if version is None:
        version = next_version(model_base)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"`version` must be a non-negative integer; received {version!r}.")
    final = os.path.join(model_base, str(version))
    if os.path.exists(final) and not overwrite:
        raise FileExistsError(
            f"{final} already exists; pass a new --version, or --overwrite to replace it."
        )
    temporary = os.path.join(model_base, f"{_TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        signatures = module.signatures()
        tf.saved_model.save(module, temporary, signatures=signatures, options=SERVING_SAVE_OPTIONS)
        set_method_names(temporary, module.method_names())
        assets = os.path.join(temporary, "assets")
        os.makedirs(assets, exist_ok=True)
        for path in asset_files:
            shutil.copyfile(path, os.path.join(assets, os.path.basename(path)))
        extra = os.path.join(temporary, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        if warmup_texts:
            texts = module.warmup_texts(warmup_texts)
            write_warmup_requests(
                os.path.join(extra, WARMUP_FILE), name,
                warmup_for_every_signature(module.warmup_requests(texts), signatures, texts))
        with open(os.path.join(temporary, MANIFEST_FILE), "w", encoding="utf-8") as file:
            json.dump({"name": name, "version": version, **(manifest or {})}, file,
                      indent=2, ensure_ascii=False)
        if preset is not None:
            preset.save_to_preset(os.path.join(temporary, PRESET_DIR))
        if os.path.exists(final):  # overwrite: swap out the old folder, then delete it
            retired = f"{temporary}-retired"
            os.rename(final, retired)
            os.rename(temporary, final)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.rename(temporary, final)
    finally:
        if os.path.exists(temporary):
            shutil.rmtree(temporary, ignore_errors=True)
    assert is_version_dir(model_base, str(version))
    return final
