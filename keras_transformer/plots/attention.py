"""Attention maps of one translation, drawn as a grid of heatmaps (layers × heads).

Shape notation: N layers, H heads, S source pieces, T output pieces (the last
is the end-of-sentence piece "</s>").

Kinds of map:
    cross     (N, H, T, S): what each output piece attended to in the input.
    encoder   (N, H, S, S): encoder self-attention over the input pieces.
    decoder   (N, H, T, T): decoder self-attention; row t predicts output piece t
              and its columns are the decoder inputs "<s>", piece 1 .. piece T-1.

The maps come from a run folder's model in process (`from_module`, all three
kinds) or from an export's "attention" signature (`from_saved_model`, which holds
the cross-attention only).

Example:
    >>> maps = from_module(module, "机器学习很有趣。")  # doctest: +SKIP
    >>> figure = attention_figure(maps)  # doctest: +SKIP
    >>> save_checked(figure, "attention.png")  # doctest: +SKIP
"""

import dataclasses

import numpy as np

from keras_transformer.plots.fonts import cjk_font_family

KINDS = ("cross", "encoder", "decoder")
BOS_PIECE = "<s>"
# Output keys an export's "attention" signature may carry for each kind.
SIGNATURE_KEYS = {
    "cross": "cross_attention",
    "encoder": "encoder_attention",
    "decoder": "decoder_attention",
}
_CELL_INCHES = 0.3
_MIN_PANEL_INCHES = 1.6


@dataclasses.dataclass
class AttentionMaps:
    """One sentence's attention of one kind.

    Attributes:
        kind: "cross", "encoder" or "decoder".
        text: the input sentence.
        translation: the model's translation.
        weights: (N, H, rows, columns) float array.
        row_pieces: the query pieces (output pieces, or input pieces for "encoder").
        column_pieces: the key pieces (input pieces, or decoder inputs for "decoder").
    """

    kind: str
    text: str
    translation: str
    weights: np.ndarray
    row_pieces: list
    column_pieces: list

    @property
    def layers(self):
        return self.weights.shape[0]

    @property
    def heads(self):
        return self.weights.shape[1]


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"Unknown attention kind {kind!r}; choose one of {', '.join(KINDS)}.")


def _strings(row):
    return [value.decode("utf-8") for value in row.tolist()]


def _first_sentence(outputs, text):
    """(source pieces, target pieces, translation) of row 0 of an attention output."""
    source_length = int(outputs["source_lengths"].numpy()[0])
    target_length = int(outputs["target_lengths"].numpy()[0])
    if source_length == 0:
        raise ValueError(f"Nothing to plot: {text!r} has no input pieces.")
    source_pieces = _strings(outputs["source_pieces"].numpy()[0])[:source_length]
    target_pieces = _strings(outputs["target_pieces"].numpy()[0])[:target_length]
    translation = outputs["translation"].numpy()[0].decode("utf-8")
    return source_pieces, target_pieces, translation


def _maps(kind, text, translation, weights, source_pieces, target_pieces):
    rows = {"cross": target_pieces, "encoder": source_pieces, "decoder": target_pieces}[kind]
    columns = {
        "cross": source_pieces,
        "encoder": source_pieces,
        "decoder": [BOS_PIECE] + target_pieces[:-1],
    }[kind]
    weights = np.asarray(weights, dtype=np.float32)[:, :, : len(rows), : len(columns)]
    return AttentionMaps(kind, text, translation, weights, list(rows), list(columns))


def from_module(module, text, kind="cross"):
    """The attention of `module`'s translation of `text`.

    Args:
        module: a `keras_transformer.export.TranslationModule`.
        text: one sentence.
        kind: "cross", "encoder" or "decoder".

    Returns:
        An `AttentionMaps`.
    """
    import tensorflow as tf

    from keras_transformer.constants import BOS_ID

    _check_kind(kind)
    outputs = module.attention(tf.constant([text], tf.string))
    source_pieces, target_pieces, translation = _first_sentence(outputs, text)
    if kind == "cross":
        weights = outputs["cross_attention"].numpy()[0]
    else:
        # The same teacher-forced pass the signature ran, asked for its self-attention.
        tokenizer = module.target_tokenizer
        piece_ids = {tokenizer.id_to_piece(i): i for i in range(tokenizer.vocab_size)}
        labels = [piece_ids[piece] for piece in target_pieces]
        source = module.encode_text(tf.constant([text], tf.string))[:, : len(source_pieces)]
        decoder = tf.constant([[BOS_ID] + labels[:-1]], tf.int32)
        maps = module.model.attention_weights(source, decoder)
        weights = np.asarray(maps[f"{kind}_self"])[0]
    return _maps(kind, text, translation, weights, source_pieces, target_pieces)


def from_saved_model(loaded, text, kind="cross"):
    """The attention of an export's translation of `text` (its "attention" signature).

    Args:
        loaded: an object from `tf.saved_model.load`.
        text: one sentence.
        kind: "cross"; "encoder"/"decoder" only if the export returns them.

    Returns:
        An `AttentionMaps`.
    """
    import tensorflow as tf

    _check_kind(kind)
    if "attention" not in loaded.signatures:
        raise ValueError("This export has no attention signature; plot from the run folder (--run).")
    signature = loaded.signatures["attention"]
    key = SIGNATURE_KEYS[kind]
    if key not in signature.structured_outputs:
        raise ValueError(
            f"This export's attention signature returns no {kind} attention (only "
            f"{', '.join(sorted(k for k in signature.structured_outputs if k.endswith('attention')))}); "
            "plot it from the run folder (--run)."
        )
    outputs = signature(text=tf.constant([text], tf.string))
    source_pieces, target_pieces, translation = _first_sentence(outputs, text)
    return _maps(kind, text, translation, outputs[key].numpy()[0], source_pieces, target_pieces)


def attention_figure(maps, title=None):
    """A grid of heatmaps, one panel per layer (row) and head (column).

    Rows of each panel are labelled with `maps.row_pieces`, columns with
    `maps.column_pieces`, in a font that draws Chinese; the labels show on the
    outer panels (the inner ones share them). All panels share one colour scale,
    0 to the largest weight, shown by a colour bar.

    Args:
        maps: an `AttentionMaps`.
        title: figure title (default: the kind, the sentence and its translation).

    Returns:
        A `matplotlib.figure.Figure` on an Agg canvas.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    family = cjk_font_family()
    text_options = {"fontfamily": family, "parse_math": False}
    layers, heads, rows, columns = maps.weights.shape
    panel_width = max(_MIN_PANEL_INCHES, _CELL_INCHES * columns)
    panel_height = max(_MIN_PANEL_INCHES, _CELL_INCHES * rows)
    figure = Figure(
        figsize=(heads * panel_width + 2.0, layers * panel_height + 1.5), layout="constrained"
    )
    FigureCanvasAgg(figure)
    axes = figure.subplots(layers, heads, squeeze=False, sharex=True, sharey=True)
    # One colour scale for every panel, from 0 to the largest weight, so panels compare.
    top = float(np.nanmax(maps.weights)) if maps.weights.size else 1.0
    top = top if top > 0 else 1.0
    image = None
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            image = ax.imshow(
                maps.weights[layer, head], cmap="viridis", vmin=0.0, vmax=top,
                aspect="auto", interpolation="nearest",
            )
            ax.set_xticks(range(columns), maps.column_pieces, rotation=90, **text_options)
            ax.set_yticks(range(rows), maps.row_pieces, **text_options)
            ax.tick_params(labelsize=8, labelbottom=layer == layers - 1, labelleft=head == 0)
            if layer == 0:
                ax.set_title(f"head {head + 1}", fontsize=10)
            if head == 0:
                ax.set_ylabel(f"layer {layer + 1}", fontsize=10)
    figure.colorbar(image, ax=axes, shrink=min(1.0, 4.0 / max(layers, 1)), label="attention weight")
    if title is None:
        title = f"{maps.kind} attention: {maps.text}  →  {maps.translation}"
    figure.suptitle(title, **text_options)
    return figure
