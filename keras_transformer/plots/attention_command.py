"""`keras-transformer plot-attention`: a translation's attention as a grid of heatmaps.

    keras-transformer plot-attention --run runs/zh-en "机器学习很有趣。" -o attention.png
    keras-transformer plot-attention --run runs/zh-en "机器学习很有趣。" --kind encoder -o enc.png
    keras-transformer plot-attention --saved-model export/zh_en "机器学习很有趣。" -o attention.png
"""

import os
import sys

from keras_transformer.arguments import add_weights_argument
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.plots.attention import KINDS


def add_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="run folder (the model is rebuilt with the weights --weights names)")
    source.add_argument(
        "--saved-model", help="exported translator (version folder, or model base: latest version)"
    )
    parser.add_argument("text", help="the sentence to translate")
    parser.add_argument("--output", "-o", default="attention.png", help="image file (default: attention.png)")
    parser.add_argument(
        "--kind", choices=KINDS, default="cross",
        help="cross (output × input), encoder or decoder self-attention (default: cross)",
    )
    parser.add_argument("--beam", type=int, help=f"beam width of the run's model (default: {DEFAULT_BEAM_WIDTH})")
    add_weights_argument(parser)
    parser.add_argument("--dpi", type=int, default=100, help="resolution (default: 100)")


def run(args):
    from keras_transformer.plots import attention
    from keras_transformer.plots.fonts import save_checked

    if not args.text.strip():
        raise ValueError("Give a non-empty sentence to translate.")
    if args.beam is not None and args.beam < 1:
        raise ValueError(f"--beam must be a positive integer; received {args.beam}.")
    if args.saved_model:
        from keras_transformer.evaluation.translators import load_saved_model

        if args.beam is not None or args.weights:
            raise ValueError("--beam and --weights belong to --run; an export keeps its own.")
        _, loaded = load_saved_model(args.saved_model)
        maps = attention.from_saved_model(loaded, args.text, kind=args.kind)
    else:
        from keras_transformer.evaluation.translators import translation_module
        from keras_transformer.runs.loading import load_run

        if not os.path.isdir(args.run):
            raise FileNotFoundError(f"{args.run} does not exist: train a run first.")
        run_ = load_run(args.run, weights=args.weights, task="translate", command="plot-attention")
        module = translation_module(run_, beam_width=args.beam or DEFAULT_BEAM_WIDTH)
        maps = attention.from_module(module, args.text, kind=args.kind)
    figure = attention.attention_figure(maps)
    missing = save_checked(figure, args.output, dpi=args.dpi)
    print(f"translation: {maps.translation}")
    print(f"{maps.kind} attention, {maps.layers} layers × {maps.heads} heads: {args.output}")
    if missing:
        print(f"warning: {len(missing)} characters have no glyph in the font: {missing[0]}", file=sys.stderr)
    return 0
