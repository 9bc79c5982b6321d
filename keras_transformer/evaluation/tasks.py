"""Evaluating the runs of the other tasks: a language model's perplexity, a classifier's scores.

Both read a loaded `keras_transformer.runs.Run` (`load_run`) and batch its texts
as training did (`keras_transformer.data.pipeline`); `keras-transformer evaluate`
calls them for a run whose task is "lm" or "classify" (translation: `scoring`).
What each task trains on and how: `keras_transformer.tasks`.
"""


def evaluate_language_model(run, texts, batch_size=64):
    """Perplexity and next-token accuracy of a loaded "lm" `Run` on texts.

    The perplexity is that of the training history (`MaskedPerplexity`: exp of the
    mean unsmoothed cross-entropy over real tokens, EOS included), over all texts.

    Returns:
        {"perplexity", "token_accuracy", "tokens" (real tokens scored), "texts"}.
    """
    from keras_transformer.data.pipeline import make_lm_eval_dataset
    from keras_transformer.training.losses import MaskedPerplexity
    from keras_transformer.training.losses import MaskedTokenAccuracy

    perplexity, accuracy = MaskedPerplexity(), MaskedTokenAccuracy()
    for tokens, labels in make_lm_eval_dataset(texts, run.tokenizer, batch_size, run.max_length):
        logits = run.model(tokens, training=False)
        perplexity.update_state(labels, logits)
        accuracy.update_state(labels, logits)
    return {
        "perplexity": float(perplexity.result()),
        "token_accuracy": float(accuracy.result()),
        "tokens": int(float(accuracy.count.numpy())),
        "texts": len(texts),
    }


def evaluate_classifier(run, labels, texts, batch_size=64):
    """Accuracy, macro-F1, per-class scores and the confusion matrix of a loaded "classify" `Run`.

    Args:
        run: the `Run` (its `labels` name the classes).
        labels: the true label strings.
        texts: the texts.
        batch_size: texts per batch.

    Returns:
        `classification_scores`'s record, plus "examples".
    """
    import numpy as np

    from keras_transformer.data.corpus import class_ids
    from keras_transformer.data.pipeline import make_classification_eval_dataset
    from keras_transformer.evaluation.classification import classification_scores

    ids = class_ids(run.labels, labels, "evaluated data")
    predicted = []
    for tokens, _ in make_classification_eval_dataset(texts, ids, run.tokenizer, batch_size, run.max_length):
        predicted.append(np.argmax(np.asarray(run.model(tokens, training=False)), axis=-1))
    predicted = np.concatenate(predicted) if predicted else np.zeros([0], "int64")
    return {**classification_scores(ids, predicted, run.labels), "examples": len(texts)}
