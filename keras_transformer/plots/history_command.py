"""`keras-transformer plot-history`: a run's loss, accuracy and learning-rate curves.

    keras-transformer plot-history --run runs/zh-en -o history.png
"""

from keras_transformer.runs.folder import RunFolder


def add_arguments(parser):
    parser.add_argument("--run", required=True, help="run folder (reads its history.json)")
    parser.add_argument("--output", "-o", default="history.png", help="image file (default: history.png)")
    parser.add_argument("--dpi", type=int, default=100, help="resolution (default: 100)")


def run(args):
    from keras_transformer.plots.fonts import save_checked
    from keras_transformer.plots.history import history_figure

    records = RunFolder(args.run).history.read(required=True)
    figure = history_figure(records, title=f"{args.run}: {len(records)} epochs")
    save_checked(figure, args.output, dpi=args.dpi)
    print(f"training history ({len(records)} epochs): {args.output}")
    return 0
