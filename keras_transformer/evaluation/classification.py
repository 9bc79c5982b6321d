"""Scores of a classifier's predictions: accuracy, per-class precision/recall/F1, macro-F1.

All come from one confusion matrix (rows: true class, columns: predicted class,
`tf.math.confusion_matrix`'s convention). A class that is never predicted has
precision 0, one that never occurs has recall 0 (and F1 0), as scikit-learn's
`zero_division=0` does; macro-F1 is the plain mean of the per-class F1 over all
the run's classes.

Example:
    >>> scores = classification_scores([0, 1, 1], [0, 1, 0], ["a", "b"])
    >>> scores["accuracy"], scores["confusion_matrix"]
    (0.6666666666666666, [[1, 0], [1, 1]])
"""

import numpy as np


def confusion_matrix(labels, predictions, num_classes):
    """int (C, C) counts: entry [i, j] is how many examples of class i were predicted j."""
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    predictions = np.asarray(predictions, dtype=np.int64).reshape(-1)
    if labels.shape != predictions.shape:
        raise ValueError(f"{labels.size} labels but {predictions.size} predictions")
    for name, ids in (("labels", labels), ("predictions", predictions)):
        if ids.size and (ids.min() < 0 or ids.max() >= num_classes):
            raise ValueError(f"{name} must be class ids in [0, {num_classes}); found {ids.min()}..{ids.max()}")
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (labels, predictions), 1)
    return matrix


def classification_scores(labels, predictions, names):
    """A JSON-ready record of a classifier's scores.

    Args:
        labels: true class ids (N,).
        predictions: predicted class ids (N,).
        names: the class names; class id i is names[i].

    Returns:
        {"accuracy", "macro_f1", "per_class": {name: {"precision", "recall", "f1",
        "support"}}, "labels": names, "confusion_matrix": C lists of C counts
        (rows: true class, columns: predicted)}.
    """
    matrix = confusion_matrix(labels, predictions, len(names))
    hits = np.diag(matrix).astype(np.float64)
    predicted = matrix.sum(axis=0).astype(np.float64)
    support = matrix.sum(axis=1).astype(np.float64)
    precision = np.divide(hits, predicted, out=np.zeros_like(hits), where=predicted > 0)
    recall = np.divide(hits, support, out=np.zeros_like(hits), where=support > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(hits), where=total > 0)
    count = int(matrix.sum())
    return {
        "accuracy": float(hits.sum() / count) if count else 0.0,
        "macro_f1": float(f1.mean()) if len(names) else 0.0,
        "per_class": {
            name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for name, p, r, f, s in zip(names, precision, recall, f1, support)
        },
        "labels": list(names),
        "confusion_matrix": matrix.tolist(),
    }
