"""Token ids fixed across tokenizers, models, decoding and export, and the search's
defaults every command and the export share (no imports: the command line reads them
before it loads TensorFlow)."""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2  # start of sequence: the first decoder input token.
EOS_ID = 3  # end of sequence: decoding stops when it is produced.

# Beam search: width K, GNMT's length-penalty exponent α and coverage-penalty weight β
# (`decoding.SequenceSearch`). α 0.6 scores as well as 1.0 on the validation split, and
# β 0.2 (GNMT's) keeps or raises BLEU on five trained models' validation and test splits
# (docs/experiments.md).
DEFAULT_BEAM_WIDTH = 4
DEFAULT_ALPHA = 0.6
DEFAULT_COVERAGE = 0.2

# Rows (sentences x beam width) each row group of a batch must get before
# `SequenceSearch` splits it: below that, a step is mostly per-op overhead, which
# groups only repeat (`python -m bench kernels`; docs/experiments.md, "Speed").
MIN_GROUP_ROWS = 16

# How training examples are grouped into token-budgeted batches
# (`keras_transformer.data.pipeline`): a fixed batch size per length bucket (the
# default), or each epoch sorted by length and cut into full batches.
BATCHINGS = ("buckets", "sorted")

# The tasks a run trains, as config.json's "task" names them, and the one `train`
# takes when none is given.
TASKS = ("translate", "lm", "classify")
DEFAULT_TASK = "translate"
