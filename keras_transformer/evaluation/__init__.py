"""Floor 3: scoring translations (BLEU, chrF with sacrebleu) of a run folder or an export;
a language model's perplexity and a classifier's accuracy, F1 and confusion matrix (`tasks`,
`classification`).

`evaluate(translate_fn, sources, references)` translates in fixed, length-sorted
batches and scores with sacrebleu; `translators` builds the `translate_fn` of a
run folder (a `TranslationModule` in process) or of an exported SavedModel, so
both give the same hypotheses. The names load lazily: scoring needs no TensorFlow.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "EvaluationResult": "scoring",
    "evaluate": "scoring",
    "score": "scoring",
    "translate_all": "scoring",
    "bleu_tokenizer_for": "scoring",
    "run_translator": "translators",
    "classification_scores": "classification",
    "confusion_matrix": "classification",
    "evaluate_classifier": "tasks",
    "evaluate_language_model": "tasks",
    "saved_model_translator": "translators",
    "load_saved_model": "translators",
    "resolve_saved_model": "translators",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
