"""Floor 4: training a translator, language model or classifier with `model.fit` into a resumable run folder.

Modules: `losses` (masked, label-smoothed cross-entropy; masked token accuracy),
`schedule` (warmup-then-rsqrt learning rate), `strategy` (tf.distribute from the
command line), `config` (`TrainingConfig`: every training setting, its default and
help), `callbacks` (backup, checkpoints, best weights, time budget, history),
`tasks` (per task: data, tokenizers, datasets, loss and metrics),
`trainer` (`train`, `prepare_run`, `compile_model`), `command` (`keras-transformer
train`). Names load lazily so that `--help` does not import TensorFlow.
"""

from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "MaskedSparseCategoricalCrossentropy": "losses",
    "MaskedTokenAccuracy": "losses",
    "smoothed_cross_entropy": "losses",
    "TransformerSchedule": "schedule",
    "STRATEGIES": "strategy",
    "make_strategy": "strategy",
    "is_chief": "strategy",
    "TrainingConfig": "config",
    "RunBackup": "callbacks",
    "Checkpoints": "callbacks",
    "BestWeights": "callbacks",
    "TrainingBudget": "callbacks",
    "RunHistory": "callbacks",
    "make_callbacks": "callbacks",
    "TrainResult": "trainer",
    "compile_model": "trainer",
    "make_optimizer": "trainer",
    "prepare_run": "trainer",
    "train": "trainer",
    "Task": "tasks",
    "task_for": "tasks",
    "MaskedPerplexity": "losses",
    "ClassificationCrossEntropy": "losses",
    "MacroF1": "losses",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
