"""The training settings as one validated dataclass: `TrainingConfig`.

Each setting, its default and its one-line help are written once, here, as a field
and its metadata. The `train` command builds its flags from the fields
(`add_config_arguments`), `train` takes a `TrainingConfig`, and the run folder stores
it under "training" in `config.json`. Standard library only, so that
`keras-transformer train --help` imports neither Keras nor TensorFlow.

A new run takes the fields' defaults, the translator's, except where its task has its
own (`TASK_DEFAULTS`, `TrainingConfig.for_task`). Resuming: a flag given on the command
line overrides the stored value; a flag not given keeps the stored value
(`TrainingConfig.from_flags`). The settings that differ from the stored run are
printed, one line each (`TrainingConfig.differences`).

Example:
    >>> config = TrainingConfig(epochs=20, token_budget=2048)
    >>> config.replace(patience=3).patience
    3
"""

import argparse
import dataclasses

from keras_transformer.constants import BATCHINGS

DEFAULT_WARMUP_STEPS = 250  # why these values: keras_transformer/training/schedule.py
DEFAULT_SCALE = 0.7
MIXED_PRECISION_POLICIES = ("none", "mixed_bfloat16", "mixed_float16")
LR_DECAYS = ("rsqrt", "linear")  # after the warmup: keras_transformer/training/schedule.py
# How a batch's loss is scaled for its gradient (`losses.with_gradient_scale`): each batch
# weighs the same (its per-token mean), or each real token does, whatever its batch.
LOSS_WEIGHTINGS = ("batch", "token")
# A task's own defaults, where it trains better with another value than the fields'
# (which are the translator's). The classifier: the learning-rate scale 0.5 scored
# higher than 0.7 over two seeds (docs/experiments.md). A new run stores the values
# it takes, so resuming it keeps them.
TASK_DEFAULTS = {"classify": {"lr_scale": 0.5}}


def _save_freq(text):
    """`--save-freq`: "epoch" or a positive number of steps."""
    if text == "epoch":
        return "epoch"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'epoch' or a number of steps, got {text!r}") from None


def _setting(default, help, flag=None, parse=None, choices=None, check=None):
    """A field with its command-line help (`flag` defaults to the field's name with dashes).

    `check(value)` returns an error text for a bad value (None when it is fine).
    """
    metadata = {"help": help, "flag": flag, "parse": parse, "choices": choices, "check": check}
    return dataclasses.field(default=default, metadata=metadata)


def _positive_int(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return "a positive integer"
    return None


def _non_negative_int(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return "an integer >= 0"
    return None


def _positive_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return "a positive number"
    return None


def _non_negative_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        return "a finite number >= 0"
    return None


def _optional(check):
    return lambda value: None if value is None else check(value)


def _probability(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        return "a number in [0, 1)"
    return None


def _sampling_alpha(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return "a number in (0, 1]"
    return None


def _freq(value):
    if value == "epoch":
        return None
    return None if _positive_int(value) is None else "'epoch' or a positive integer"


def _one_of(choices):
    return lambda value: None if value in choices else f"one of {list(choices)}"


def _flag_or_none(value):
    return None if value is None or isinstance(value, bool) else "true, false or unset (None: by device)"


def _policy(value):
    if value is None or value in MIXED_PRECISION_POLICIES:
        return None
    return f"one of {list(MIXED_PRECISION_POLICIES)} or unset (None: by device)"


def _int(value):
    return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """How a run is trained (the model's shape is `BackboneConfig`'s).

    Every field's help is in its metadata and shows in `keras-transformer train --help`.
    """

    epochs: int = _setting(
        1000, "total epochs of the run (a time budget or early stopping usually ends it first)",
        check=_positive_int,
    )
    max_steps: int | None = _setting(
        None, "a step budget: stop once the optimizer has taken this many steps, counted over "
        "the whole run (unset: no limit), so that runs on different machines compare at the "
        "same step",
        check=_optional(_positive_int),
    )
    token_budget: int = _setting(
        4096, "most (padded) tokens per global batch: batches sized by tokens, not sentences, "
        "as in the Transformer paper (Vaswani et al., 2017)", flag="batch-tokens",
        check=_positive_int,
    )
    batching: str = _setting(
        "buckets", "how examples become batches: buckets (a fixed batch size per length "
        "bucket) or sorted (each epoch sorted by length and cut into full batches: less "
        "padding, so fewer wasted tokens a step; level with buckets in BLEU, "
        "docs/experiments.md)",
        choices=BATCHINGS, check=_one_of(BATCHINGS),
    )
    warmup_steps: int = _setting(
        DEFAULT_WARMUP_STEPS, "steps of linear learning-rate warmup (Vaswani et al., 2017); "
        "fewer for a short run, more for a large corpus", check=_positive_int,
    )
    lr_scale: float = _setting(
        DEFAULT_SCALE, "factor of the learning-rate schedule (Vaswani et al., 2017): the peak "
        "rate is scale × (d_model × warmup steps)^-0.5", check=_positive_number,
    )
    lr_decay: str = _setting(
        "rsqrt", "learning-rate decay after the warmup: rsqrt (the Transformer paper's) or "
        "linear (to 0 at --max-steps, which it needs: a fixed step budget's schedule, as BERT's)",
        choices=LR_DECAYS, check=_one_of(LR_DECAYS),
    )
    label_smoothing: float = _setting(
        0.1, "label smoothing ε of the loss (Szegedy et al., 2016)", check=_probability
    )
    loss_weighting: str = _setting(
        "token", "loss normalization, what weighs the same in the gradient: each batch (its "
        "mean over real tokens) or each real token (the token sum over --batch-tokens, so a "
        "fuller batch weighs more, as fairseq's per-token loss; for a classifier, each "
        "example); the loss shown is the mean either way",
        choices=LOSS_WEIGHTINGS, check=_one_of(LOSS_WEIGHTINGS),
    )
    subword_sampling: float | None = _setting(
        None, "subword regularization (Kudo, 2018): each epoch samples every training "
        "sentence's SentencePiece segmentation with this α in (0, 1] (unset: the most likely "
        "pieces)",
        check=_optional(_sampling_alpha),
    )
    word_dropout: float = _setting(
        0.0, "word dropout (Sennrich and Zhang, 2019), a regularizer for a small corpus: each "
        "token of the model's input text in a training batch (a "
        "translator's source, a language model's or classifier's text; never the labels) "
        "becomes UNK with this probability, drawn afresh each epoch (0: none)",
        check=_probability,
    )
    clipnorm: float | None = _setting(
        None, "gradient clipping by global norm (Pascanu et al., 2013), against loss spikes "
        "(unset: no clipping)", check=_optional(_positive_number),
    )
    weight_decay: float = _setting(
        0.0, "decoupled weight decay, AdamW (Loshchilov and Hutter, 2019), of the kernels and "
        "embeddings, a rate per unit of learning rate (0: none)", check=_non_negative_number,
    )
    jit_compile: bool | None = _setting(
        None, "compile the training step with XLA, faster on a GPU (unset: by device, on for "
        "a GPU)",
        flag="xla", check=_flag_or_none,
    )
    mixed_precision: str | None = _setting(
        None,
        "mixed-precision training (Micikevicius et al., 2018) as a Keras dtype policy; none is "
        "float32 (unset: by device, mixed_bfloat16 on a GPU or a CPU with bfloat16 "
        "instructions, else none)",
        choices=MIXED_PRECISION_POLICIES, check=_policy,
    )
    save_freq: int | str = _setting(
        200, "steps between step checkpoints and backups, from which a stopped or killed run "
        "resumes, or 'epoch' (every epoch end too)",
        parse=_save_freq, check=_freq,
    )
    keep_checkpoints: int = _setting(
        3, "step checkpoints kept (the newest), to resume from", check=_positive_int
    )
    keep_epoch_checkpoints: int = _setting(
        5, "checkpoints kept from the ends of epochs (the newest), for checkpoint averaging "
        "(Vaswani et al., 2017) by the `average` command and at the end of training",
        check=_non_negative_int,
    )
    patience: int = _setting(
        5, "early stopping: epochs without a lower validation loss before stopping (0: never)",
        check=_non_negative_int,
    )
    validation_batch_size: int = _setting(
        128, "sentences per validation batch (fewer for less memory)", check=_positive_int
    )
    seed: int = _setting(
        0, "seed of the initial weights, dropout and data order: a run is repeatable, and "
        "a second seed tells a real gain from chance", check=_int,
    )

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            problem = field.metadata["check"](value)
            if problem:
                raise ValueError(
                    f"Training setting {field.name} (--{flag_name(field)}) must be {problem}; "
                    f"received {value!r}."
                )
        if self.lr_decay == "linear" and (self.max_steps is None
                                          or self.max_steps <= self.warmup_steps):
            raise ValueError(
                "Training setting lr_decay (--lr-decay) linear decays to 0 at --max-steps, so "
                f"it needs --max-steps above --warmup-steps ({self.warmup_steps}); received "
                f"max_steps={self.max_steps!r}."
            )

    @property
    def gradient_denominator(self):
        """What a batch's loss sum is divided by for its gradient under --loss-weighting.

        None ("batch"): the batch's own count of real tokens (examples); the token
        budget ("token"): one number for every batch (`losses.with_gradient_scale`).
        """
        return self.token_budget if self.loss_weighting == "token" else None

    def to_dict(self):
        """The fields as a JSON-serialisable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def for_task(cls, task=None, **changes):
        """The defaults of a task's new run (`TASK_DEFAULTS`), with `changes` applied.

        Example:
            >>> TrainingConfig.for_task("classify").lr_scale
            0.5
        """
        return cls(**{**TASK_DEFAULTS.get(task, {}), **changes})

    @classmethod
    def from_dict(cls, values):
        """A config from a dict, e.g. a run folder's "training" entry.

        Keys that are not fields are refused with the list of the accepted ones.
        """
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"Unknown training settings {unknown}; accepted: {names}.")
        return cls(**values)

    def replace(self, **changes):
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def differences(self, other):
        """One line per field whose value differs from `other`'s, naming its flag.

        Example: `--epochs 30 (was 20)`.
        """
        return [
            f"--{flag_name(field)} {_show(getattr(self, field.name))} "
            f"(was {_show(getattr(other, field.name))})"
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != getattr(other, field.name)
        ]

    @classmethod
    def from_flags(cls, args, stored=None, task=None):
        """The config of parsed `train` flags: given flags override `stored`, the rest keep it.

        Args:
            args: an `argparse.Namespace` from a parser set up by
                `add_config_arguments` (a flag not given is None).
            stored: the run folder's config when resuming, None for a new run
                (flags not given then take the defaults of `task`, `for_task`).
            task: the task of a new run (None: the translator's defaults).
        """
        given = {
            field.name: getattr(args, field.name)
            for field in dataclasses.fields(cls)
            if getattr(args, field.name, None) is not None
        }
        return (stored or cls.for_task(task)).replace(**given)


def flag_name(field):
    """The command-line flag of a field, without the dashes (`token_budget` → `batch-tokens`)."""
    return field.metadata["flag"] or field.name.replace("_", "-")


def _show(value):
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _field_type(field):
    """The argparse `type` of a field: its parser, else from its default's type."""
    if field.metadata["parse"]:
        return field.metadata["parse"]
    if field.metadata["choices"]:
        return str
    return float if "float" in str(field.type) else int


def add_config_arguments(parser, config_class=None):
    """Adds one flag per `TrainingConfig` field to an argparse parser (or group).

    Every flag defaults to None, meaning "not given": a new run then takes the
    field's default, a resumed run its stored value. Booleans get `--x/--no-x`.

    Args:
        parser: an `argparse.ArgumentParser` or argument group.
        config_class: `TrainingConfig` (default) or a subclass.
    """
    for field in dataclasses.fields(config_class or TrainingConfig):
        flag = f"--{flag_name(field)}"
        per_task = "".join(
            f"; {task}: {_show(defaults[field.name])}"
            for task, defaults in sorted(TASK_DEFAULTS.items()) if field.name in defaults
        )
        help_text = f"{field.metadata['help']} (default: {_show(field.default)}{per_task})"
        if field.type == bool | None:
            parser.add_argument(
                flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag, dest=field.name, type=_field_type(field), default=None,
                choices=field.metadata["choices"], help=help_text,
                metavar=None if field.metadata["choices"] else flag_name(field).upper().replace("-", "_"),
            )
