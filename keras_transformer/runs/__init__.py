"""Floor 3: the run folder that `train` writes and the other commands read.

One idea a module:

- `folder`: where each file is, the run's config (read one way: `RunFolder(path).config`)
  and each task's data files (splits, tokenizers, labels) — `RunFolder`;
- `checkpoints`: rotated checkpoints, the backup training resumes from, best and
  final weights — `CheckpointStore` (`RunFolder.checkpoints`);
- `history`: one record per epoch — `History` (`RunFolder.history`);
- `weights`: which weights a command uses, and averaging epoch checkpoints —
  `choose_weights` (`RunFolder.weights`), `average_checkpoints`, `Weights`;
- `loading`: the model with chosen weights and its tokenizers — `load_run`, `Run`;
- `average_command`: `keras-transformer average`.

Every module imports only the standard library at import time (the command line
reads them before it decides to load TensorFlow).

Example:
    >>> from keras_transformer.runs import RunFolder, load_run  # doctest: +SKIP
    >>> RunFolder("runs/zh-en").weights("best").path  # doctest: +SKIP
    'runs/zh-en/best.weights.h5'
    >>> run = load_run("runs/zh-en")  # doctest: +SKIP
"""

from keras_transformer.runs.folder import RunFolder
from keras_transformer.runs.loading import Run
from keras_transformer.runs.loading import load_run
from keras_transformer.runs.weights import Weights

__all__ = ["Run", "RunFolder", "Weights", "load_run"]
