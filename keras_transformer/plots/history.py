"""Training curves of a run folder: loss, accuracy and learning rate.

Training (`keras_transformer.training.callbacks.RunHistory`) appends one record
per epoch to the run's history (read with `keras_transformer.runs.history.History.read`):

    {"epoch": 0, "step": 212, "train_seconds": 95.1, "learning_rate": 0.00041,
     "loss": 6.2, "masked_accuracy": 0.12, "val_loss": 5.4, "val_masked_accuracy": 0.19}

Each metric gets a panel with its training curve and, when recorded, its
validation curve ("val_" + name); the learning rate gets its own panel. The
x axis is the optimizer step at the end of each epoch (the epoch when a record
has no step). Non-finite values are stored as null and left as gaps.

Example:
    >>> figure = history_figure(RunFolder("runs/zh-en").history.read(required=True))  # doctest: +SKIP
    >>> save_checked(figure, "history.png")  # doctest: +SKIP
"""

import math

# Record fields that are not curves.
_NOT_CURVES = ("epoch", "step", "train_seconds")
LEARNING_RATE = "learning_rate"


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def curve_names(records):
    """The names of the curves in `records`, in first-seen order."""
    names = []
    for record in records:
        for key, value in record.items():
            if key in _NOT_CURVES or key in names:
                continue
            if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
                names.append(key)
    return names


def panels(names):
    """Groups curve names into panels: [(title, [names])], learning rate last."""
    grouped, seen = [], set()
    for name in names:
        if name in seen or name == LEARNING_RATE:
            continue
        base = name[len("val_"):] if name.startswith("val_") else name
        members = [n for n in (base, f"val_{base}") if n in names]
        seen.update(members)
        grouped.append((base.replace("_", " "), members))
    if LEARNING_RATE in names:
        grouped.append(("learning rate", [LEARNING_RATE]))
    return grouped


def history_figure(records, title=None):
    """Loss, accuracy and learning-rate panels of a run's epoch records.

    Every curve is a `Line2D` whose gid is its history.json key ("loss",
    "val_loss", "learning_rate", ...) and whose label says training or validation.

    Args:
        records: the list from `History.read`.
        title: figure title.

    Returns:
        A `matplotlib.figure.Figure` on an Agg canvas.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = curve_names(records)
    if not names:
        raise ValueError("The history holds no curves (no loss, accuracy or learning rate).")
    use_steps = all(isinstance(record.get("step"), int) for record in records)
    x = [record["step"] if use_steps else record.get("epoch", index) for index, record in enumerate(records)]
    grouped = panels(names)
    figure = Figure(figsize=(5.0 * len(grouped), 4.0), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(grouped), squeeze=False)[0]
    for ax, (panel_title, members) in zip(axes, grouped):
        for name in members:
            label = "validation" if name.startswith("val_") else "training"
            if name == LEARNING_RATE:
                label = "learning rate"
            ax.plot(
                x, [_number(record.get(name)) for record in records], marker="o", markersize=3,
                label=label, gid=name,
            )
        ax.set_title(panel_title)
        ax.set_xlabel("optimizer step (end of each epoch)" if use_steps else "epoch")
        ax.grid(alpha=0.3)
        ax.legend()
        if members == [LEARNING_RATE]:
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    figure.suptitle(title or f"training history ({len(records)} epochs)")
    return figure
