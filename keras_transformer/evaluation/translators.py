"""The two translators evaluation and plots read: a run folder's model, or an export.

Both are `translate_fn(list of strings) -> list of strings`:

* `run_translator(run)` wraps a `TranslationModule` built in process from a run
  folder (`keras_transformer.runs.loading.load_run`);
* `saved_model_translator(path)` calls the `serving_default` signature of an
  exported SavedModel (`export/<name>/<version>/`), needing no model code;
* `ctranslate2_translator(path)` runs a CTranslate2 model folder
  (`export --format ctranslate2`) with CTranslate2, searching with the beam width,
  α and β it is given.

Fed the same batches (see `scoring.translate_all`) they give the same hypotheses
when the export was made from the same weights with the same beam width.
"""

import json
import os

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.constants import PAD_ID

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


class CTranslate2Translator:
    """Translates with a CTranslate2 model folder (`export --format ctranslate2`).

    It reads sentences as our export does: the source prefix, SentencePiece
    pieces cut to `max_source_length`, no BOS or EOS; it never produces padding or
    the start token, caps the output at each batch's longest source + `extra_length`
    (at most the model's positions), and gives an empty sentence an empty
    translation with score 0. The search settings are CTranslate2's options of the
    same name: beam width, the length penalty's exponent α and the coverage
    penalty's weight β.

    Args:
        path: the CTranslate2 model folder.
        beam_width: K; 1 is greedy search.
        alpha: length-penalty exponent.
        coverage: coverage-penalty weight.
        extra_length: output subwords allowed beyond the longest source's.
        intra_threads: threads of one translation (0: CTranslate2's default).
        max_batch_size: rows CTranslate2 translates at once (0: the whole batch).

    Call arguments:
        texts: list of B strings.
        n_best: hypotheses per sentence (at most K).

    Returns:
        `(translations, scores)`: B lists of `n_best` strings and floats, best first.
    """

    def __init__(self, path, beam_width=DEFAULT_BEAM_WIDTH, alpha=DEFAULT_ALPHA,
                 coverage=DEFAULT_COVERAGE, extra_length=50, intra_threads=0,
                 max_batch_size=0):
        import sentencepiece

        from keras_transformer.export.ctranslate2 import import_ctranslate2
        from keras_transformer.export.ctranslate2 import is_ctranslate2_folder

        ctranslate2 = import_ctranslate2()
        if not is_ctranslate2_folder(path):
            raise FileNotFoundError(
                f"{path} is not a CTranslate2 model folder (model.bin and manifest.json); "
                "create one with `keras-transformer export --format ctranslate2`.")
        if beam_width < 1:
            raise ValueError(f"--beam must be a positive integer; received {beam_width}.")
        for name, value in (("alpha", alpha), ("coverage", coverage)):
            if not value >= 0:
                raise ValueError(f"--{name} must be a number >= 0; received {value}.")
        self.path = path
        self.manifest = read_manifest(path)
        self.beam_width, self.alpha, self.coverage = int(beam_width), float(alpha), float(coverage)
        self.extra_length = int(extra_length)
        self.max_batch_size = int(max_batch_size)
        self.translator = ctranslate2.Translator(path, device="cpu", compute_type="default",
                                                 inter_threads=1, intra_threads=intra_threads)
        self.source = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(path, "source.model"))
        self.target = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(path, "target.model"))
        # Never generated (as `decoding.search.next_token_log_probs` bans them).
        self.banned = [[self.target.id_to_piece(PAD_ID)], [self.target.id_to_piece(BOS_ID)]]

    def pieces(self, texts):
        """The source pieces our export's encoder would read for each text."""
        prefix = self.manifest.get("source_prefix") or ""
        limit = self.manifest["max_source_length"]
        return [pieces[:limit] for pieces in
                self.source.encode([prefix + text for text in texts], out_type=str)]

    def __call__(self, texts, n_best=1):
        texts = list(texts)
        sources = self.pieces(texts)
        translations = [[""] * n_best for _ in texts]
        scores = [[0.0] * n_best for _ in texts]
        rows = [row for row, pieces in enumerate(sources) if pieces]
        if not rows:
            return translations, scores
        longest_source = max(len(sources[row]) for row in rows)
        # Our greedy search ignores α and β (CTranslate2's greedy path crashes on a
        # coverage penalty), so they are passed to beam search only.
        beam = self.beam_width > 1
        results = self.translator.translate_batch(
            [sources[row] for row in rows],
            max_batch_size=self.max_batch_size,
            beam_size=self.beam_width,
            num_hypotheses=max(n_best, 1),
            length_penalty=self.alpha if beam else 0.0,
            coverage_penalty=self.coverage if beam else 0.0,
            max_decoding_length=min(longest_source + self.extra_length,
                                    self.manifest["max_length"]),
            suppress_sequences=self.banned,
            return_scores=True,
        )
        for row, result in zip(rows, results):
            for rank, (hypothesis, score) in enumerate(zip(result.hypotheses, result.scores)):
                if rank < n_best:
                    translations[row][rank] = self.target.decode_pieces(hypothesis)
                    scores[row][rank] = float(score)
        return translations, scores


def ctranslate2_translator(path, beam_width=DEFAULT_BEAM_WIDTH, alpha=DEFAULT_ALPHA,
                           coverage=DEFAULT_COVERAGE):
    """The `translate_fn` of a CTranslate2 model folder (list of strings → list of strings)."""
    translator = CTranslate2Translator(path, beam_width=beam_width, alpha=alpha,
                                       coverage=coverage)

    def translate(batch):
        return [row[0] for row in translator(batch)[0]]

    return translate
