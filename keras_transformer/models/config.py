"""The backbone's hyper-parameters as dataclasses, with named presets.

A `BackboneConfig` holds what every block shares (widths, heads, dropout, norms,
positions) and one `StackConfig` per stack the backbone has: an encoder, a
decoder, or both. A shape's unused stack is None, so a decoder-only language
model has no encoder fields at all.

Imports neither Keras nor TensorFlow: the command line reads the presets and
checks a configuration before deciding to load either.
"""

import dataclasses
import json

from keras_transformer.ops import checks
from keras_transformer.ops.choices import ACTIVATIONS
from keras_transformer.ops.choices import ATTENTION_ACTIVATIONS
from keras_transformer.ops.choices import POSITIONAL_KINDS

# The three shapes of a backbone, by the stacks it has.
ENCODER_DECODER = "encoder-decoder"
ENCODER_ONLY = "encoder-only"
DECODER_ONLY = "decoder-only"
SHAPES = (ENCODER_DECODER, ENCODER_ONLY, DECODER_ONLY)

DEFAULT_VOCAB_SIZE = 8000


@dataclasses.dataclass(frozen=True)
class StackConfig:
    """One stack of blocks: the encoder's or the decoder's.

    Label smoothing, the learning rate and batching are training settings
    (`keras_transformer.training.config.TrainingConfig`), not the model's.

    Attributes:
        num_layers: N, blocks in the stack.
        vocab_size: V, token ids 0 .. V-1 (0 = padding) its embedding reads; the
            decoder's is also the output vocabulary.
        window: local self-attention window (None = global): an int for every
            block, or a list with one entry (int or None) per block.
    """

    num_layers: int
    vocab_size: int = DEFAULT_VOCAB_SIZE
    window: object = None

    def __post_init__(self):
        checks.check_positive_int("num_layers", self.num_layers)
        checks.check_positive_int("vocab_size", self.vocab_size)
        if isinstance(self.window, list):  # stored as a tuple: the config is frozen
            object.__setattr__(self, "window", tuple(self.window))
        self.windows()  # validates `window`

    def windows(self):
        """The local-attention window of each block (None = global)."""
        if self.window is None or isinstance(self.window, int):
            windows = [self.window] * self.num_layers
        elif isinstance(self.window, tuple) and len(self.window) == self.num_layers:
            windows = list(self.window)
        else:
            raise ValueError(
                f"`window` must be None, a positive int, or a list of {self.num_layers} "
                f"entries (one per block); received window={self.window!r}."
            )
        for window in windows:
            checks.check_optional_positive_int("window", window)
        return windows

    def to_dict(self):
        values = dataclasses.asdict(self)
        if isinstance(self.window, tuple):
            values["window"] = list(self.window)
        return values


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
    """Hyper-parameters of a `TransformerBackbone`: encoder–decoder, encoder-only or
    decoder-only, by which of `encoder` and `decoder` are given.

    Attributes:
        encoder: the encoder's `StackConfig` (or its dict), None for a decoder-only
            backbone.
        decoder: the decoder's `StackConfig` (or its dict), None for an
            encoder-only backbone. With an encoder, its blocks cross-attend to it.
        d_model: model width M.
        num_heads: attention heads H (d_model must divide by it).
        intermediate_dim: F, the feed-forward hidden width.
        dropout: residual and embedding dropout.
        attention_dropout: dropout on attention weights.
        activation_dropout: dropout on the feed-forward hidden layer (not in the paper).
        activation: feed-forward activation, one of `ACTIVATIONS` (relu, gelu, silu).
        norm_first: pre-LN (True) or the paper's post-LN (False).
        layer_norm_epsilon: LayerNormalization epsilon.
        max_length: longest sequence the positional table holds.
        positional_encoding: "sinusoidal" or "learned".
        attention_activation: "softmax" (the paper) or "relu": the function that
            turns attention scores into weights; an activation, not a layer
            normalization.
        share_vocabulary: encoder–decoder only: one embedding matrix for both
            stacks (a joint vocabulary; the vocabulary sizes must be equal).
        tie_output_embedding: with a decoder: the decoder's embedding is also the
            output projection.
    """

    encoder: StackConfig = None
    decoder: StackConfig = None
    d_model: int = 512
    num_heads: int = 8
    intermediate_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation: str = "relu"
    norm_first: bool = False
    layer_norm_epsilon: float = 1e-6
    max_length: int = 256
    positional_encoding: str = "sinusoidal"
    attention_activation: str = "softmax"
    share_vocabulary: bool = False
    tie_output_embedding: bool = True

    def __post_init__(self):
        for name in ("encoder", "decoder"):
            stack = getattr(self, name)
            if isinstance(stack, dict):
                object.__setattr__(self, name, StackConfig(**stack))
            elif stack is not None and not isinstance(stack, StackConfig):
                raise ValueError(
                    f"`{name}` must be a StackConfig, a dict of its fields or None; "
                    f"received {type(stack).__name__}."
                )
        if self.encoder is None and self.decoder is None:
            raise ValueError("A backbone needs an `encoder`, a `decoder` or both; received neither.")
        for name in ("d_model", "num_heads", "intermediate_dim", "max_length"):
            checks.check_positive_int(name, getattr(self, name))
        checks.check_divisible("d_model", self.d_model, "num_heads", self.num_heads)
        checks.check_rate("dropout", self.dropout)
        checks.check_rate("attention_dropout", self.attention_dropout)
        checks.check_rate("activation_dropout", self.activation_dropout)
        checks.check_choice("activation", self.activation, ACTIVATIONS)
        checks.check_choice("positional_encoding", self.positional_encoding, POSITIONAL_KINDS)
        checks.check_choice("attention_activation", self.attention_activation, ATTENTION_ACTIVATIONS)
        if self.share_vocabulary:
            if self.shape != ENCODER_DECODER:
                raise ValueError(
                    f"`share_vocabulary=True` needs an encoder and a decoder; this backbone is "
                    f"{self.shape}."
                )
            if self.encoder.vocab_size != self.decoder.vocab_size:
                raise ValueError(
                    "`share_vocabulary=True` needs equal vocabulary sizes; received "
                    f"encoder vocab_size={self.encoder.vocab_size} and "
                    f"decoder vocab_size={self.decoder.vocab_size}."
                )
        if not self.tie_output_embedding and self.decoder is None:
            raise ValueError(
                "`tie_output_embedding` is a decoder's setting; an encoder-only backbone has "
                "no output projection."
            )

    @property
    def shape(self):
        """ENCODER_DECODER, ENCODER_ONLY or DECODER_ONLY."""
        if self.encoder is None:
            return DECODER_ONLY
        return ENCODER_ONLY if self.decoder is None else ENCODER_DECODER

    def to_dict(self):
        """The fields as plain values; those the shape does not use are left out."""
        values = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in ("encoder", "decoder")
        }
        for name in ("encoder", "decoder"):
            if getattr(self, name) is not None:
                values[name] = getattr(self, name).to_dict()
        if self.shape != ENCODER_DECODER:
            del values["share_vocabulary"]
        if self.decoder is None:
            del values["tie_output_embedding"]
        return values

    @classmethod
    def from_dict(cls, values):
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"Unknown BackboneConfig fields {unknown}; accepted: {sorted(known)}."
            )
        return cls(**values)

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))

    def setting(self, name):
        """The value of a field or of a flat `STACK_SETTINGS` name (of the first stack
        it sets that the backbone has)."""
        if name not in STACK_SETTINGS:
            return getattr(self, name)
        stack_names, field = STACK_SETTINGS[name]
        stacks = [getattr(self, stack) for stack in stack_names if getattr(self, stack) is not None]
        return getattr(stacks[0], field) if stacks else None

    def replace(self, **changes):
        """A copy with `changes`: fields, or the flat `SETTINGS` of the stacks."""
        stack_changes = {"encoder": {}, "decoder": {}}
        given = {"encoder": [], "decoder": []}  # the settings' names, for errors
        fields = {}
        for name, value in changes.items():
            if name not in STACK_SETTINGS:
                fields[name] = value
                continue
            stack_names, field = STACK_SETTINGS[name]
            if len(stack_names) > 1:  # every stack the backbone has
                stack_names = [stack for stack in stack_names if getattr(self, stack) is not None]
            for stack_name in stack_names:
                if getattr(self, stack_name) is None:
                    raise ValueError(
                        f"`{name}` sets the {stack_name}'s {field}; this backbone is "
                        f"{self.shape} (no {stack_name})."
                    )
                stack_changes[stack_name][field] = value
                given[stack_name].append(f"`{name}`")
        unknown = sorted(set(fields) - {field.name for field in dataclasses.fields(self)})
        if unknown:
            raise ValueError(
                f"Unknown BackboneConfig settings {unknown}; accepted: {sorted(SETTINGS)}."
            )
        stacks = {}
        for stack_name, values in stack_changes.items():
            if values:
                try:
                    stacks[stack_name] = dataclasses.replace(getattr(self, stack_name), **values)
                except ValueError as error:
                    raise ValueError(
                        f"{', '.join(given[stack_name])} (the {stack_name}'s): {error}"
                    ) from None
        return dataclasses.replace(self, **{**stacks, **fields})


# Flat names of the stacks' fields, so that presets, `replace` and the command line's flags
# set them in one word: name → (the stacks it sets, the `StackConfig` field). A name of
# both stacks sets every stack the backbone has.
STACK_SETTINGS = {
    "vocab_size": (("encoder", "decoder"), "vocab_size"),
    "window": (("encoder", "decoder"), "window"),
    "num_encoder_layers": (("encoder",), "num_layers"),
    "num_decoder_layers": (("decoder",), "num_layers"),
    "source_vocab_size": (("encoder",), "vocab_size"),
    "target_vocab_size": (("decoder",), "vocab_size"),
    "encoder_window": (("encoder",), "window"),
    "decoder_window": (("decoder",), "window"),
}

# What `preset` and `BackboneConfig.replace` accept.
SETTINGS = (
    *(field.name for field in dataclasses.fields(BackboneConfig)
      if field.name not in ("encoder", "decoder")),
    *STACK_SETTINGS,
)

PRESETS = {
    # For tests: trains in seconds on a CPU.
    "tiny": dict(
        num_layers=2, d_model=32, num_heads=2, intermediate_dim=64, dropout=0.0, max_length=64,
    ),
    # For the CPU demo: sized so that a 25-minute run on 2 cores learns the bundled
    # corpus (docs/results.md: the measured BLEU). the intermediate width is 2·d_model rather than
    # the paper's 4·d_model: a step costs 0.8x, and the steps that buys score higher in 25 minutes.
    # Dropout 0.3, not 0.1: where 25 minutes buy 2,000 steps, the model learns what the
    # corpus teaches by step 1,200 and overfits after, unless dropout slows it. SiLU, not
    # ReLU: a step costs about 1.05x, the validation loss is lower at every epoch, and
    # 25-minute runs score +0.46 test BLEU and +0.13 validation BLEU over two seeds. The
    # runs behind each choice: docs/experiments.md.
    "small": dict(
        num_layers=3, d_model=256, num_heads=4, intermediate_dim=512, dropout=0.3,
        max_length=128, activation="silu",
    ),
    # The paper's base and big models (Table 3).
    "base": dict(
        num_layers=6, d_model=512, num_heads=8, intermediate_dim=2048, dropout=0.1, max_length=256,
    ),
    "big": dict(
        num_layers=6, d_model=1024, num_heads=16, intermediate_dim=4096, dropout=0.3,
        max_length=256,
    ),
}


def preset(name, shape=ENCODER_DECODER, **settings):
    """The `BackboneConfig` of a named preset in `shape`, with `settings` applied.

    A preset sets every stack's `num_layers` and the shared fields; the stacks of
    `shape` are built with `DEFAULT_VOCAB_SIZE` unless a setting names theirs.

    Args:
        name: "tiny", "small", "base" or "big".
        shape: ENCODER_DECODER (the default), ENCODER_ONLY or DECODER_ONLY.
        **settings: `BackboneConfig` fields, or the flat `STACK_SETTINGS`
            (`num_encoder_layers`, `source_vocab_size`, `decoder_window`, ...).

    Example:
        >>> preset("tiny", source_vocab_size=100, target_vocab_size=100).d_model
        32
        >>> preset("tiny", DECODER_ONLY, target_vocab_size=100).encoder is None
        True
    """
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; accepted: {sorted(PRESETS)}.")
    checks.check_choice("shape", shape, SHAPES)
    values = dict(PRESETS[name])
    stack = StackConfig(num_layers=values.pop("num_layers"))
    config = BackboneConfig(
        encoder=None if shape == DECODER_ONLY else stack,
        decoder=None if shape == ENCODER_ONLY else stack,
        **values,
    )
    return config.replace(**settings) if settings else config
