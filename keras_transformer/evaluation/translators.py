"""The two translators evaluation and plots read: a run folder's model, or an export.

Both are `translate_fn(list of strings) -> list of strings`:

* `run_translator(run)` wraps a `TranslationModule` built in process from a run
  folder (`keras_transformer.runs.loading.load_run`);
* `saved_model_translator(path)` calls the `serving_default` signature of an
  exported SavedModel (`export/<name>/<version>/`), needing no model code.

Fed the same batches (see `scoring.translate_all`) they give the same hypotheses
when the export was made from the same weights with the same beam width.
"""

import json
import os

from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE

MANIFEST_FILE = "manifest.json"  # written by keras_transformer.export.writer


def _texts(tensor):
    return [value.decode("utf-8") for value in tensor.numpy().tolist()]


def translation_module(run, beam_width=DEFAULT_BEAM_WIDTH, alpha=DEFAULT_ALPHA,
                       coverage=DEFAULT_COVERAGE):
    """The `TranslationModule` of a loaded run (beam search of width `beam_width`)."""
    from keras_transformer.export.module import TranslationModule

    return TranslationModule(
        run.model,
        run.source_tokenizer,
        run.target_tokenizer,
        max_source_length=run.max_source_length,
        beam_width=beam_width,
        alpha=alpha,
        coverage=coverage,
    )


def module_translator(module):
    """The `translate_fn` of a `TranslationModule` (its `translate` function)."""
    import tensorflow as tf

    def translate(batch):
        return _texts(module.translate(tf.constant(list(batch), tf.string))["translation"])

    return translate


def run_translator(run, beam_width=DEFAULT_BEAM_WIDTH, alpha=DEFAULT_ALPHA,
                   coverage=DEFAULT_COVERAGE):
    """The `translate_fn` of a run folder's model.

    Args:
        run: a `keras_transformer.runs.loading.Run` (from `load_run`).
        beam_width: 1 for greedy search.
        alpha: length-penalty exponent of beam search.
        coverage: weight of beam search's coverage penalty.

    Returns:
        list of strings -> list of strings.
    """
    return module_translator(
        translation_module(run, beam_width=beam_width, alpha=alpha, coverage=coverage)
    )


def resolve_saved_model(path):
    """The SavedModel folder `path` names: a version folder, or the latest version of a base.

    Args:
        path: `export/zh_en/3` (a version) or `export/zh_en` (its latest version).

    Returns:
        The folder holding `saved_model.pb`.

    Raises:
        FileNotFoundError: when `path` holds neither.
    """
    from keras_transformer.versions import version_paths

    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist; pass an export such as export/zh_en/1.")
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    versions = version_paths(path)
    if versions:
        latest = list(versions.values())[-1]
        if os.path.exists(os.path.join(latest, "saved_model.pb")):
            return latest
    raise FileNotFoundError(
        f"{path} holds no SavedModel (saved_model.pb) and no numbered version folder with one; "
        "create one with `keras-transformer export`."
    )


def read_manifest(path):
    """The export's manifest.json as a dict ({} when there is none)."""
    manifest = os.path.join(path, MANIFEST_FILE)
    if not os.path.exists(manifest):
        return {}
    with open(manifest, encoding="utf-8") as file:
        return json.load(file)


def find_setting(manifest, key):
    """`manifest[key]`, or the first `manifest[...][key]` one level down (None if absent)."""
    if key in manifest:
        return manifest[key]
    for value in manifest.values():
        if isinstance(value, dict) and key in value:
            return value[key]
    return None


def load_saved_model(path):
    """Loads an exported translator; returns (its folder, the loaded object)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    path = resolve_saved_model(path)
    loaded = tf.saved_model.load(path)
    if "serving_default" not in loaded.signatures:
        raise ValueError(f"{path} has no serving_default signature; is it a translator export?")
    return path, loaded


def saved_model_translator(path_or_loaded):
    """The `translate_fn` of an exported SavedModel (its serving_default signature).

    Args:
        path_or_loaded: the export folder, or an object from `tf.saved_model.load`.

    Returns:
        list of strings -> list of strings.
    """
    import tensorflow as tf

    loaded = path_or_loaded
    if isinstance(path_or_loaded, (str, os.PathLike)):
        _, loaded = load_saved_model(os.fspath(path_or_loaded))
    signature = loaded.signatures["serving_default"]

    def translate(batch):
        return _texts(signature(text=tf.constant(list(batch), tf.string))["translation"])

    return translate
