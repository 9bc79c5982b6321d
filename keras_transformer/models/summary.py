"""`keras-transformer summary`: print a preset's layers and parameter count."""

from keras_transformer.models.config import PRESETS


def add_arguments(parser):
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    parser.add_argument("--source-vocab-size", type=int, default=8000)
    parser.add_argument("--target-vocab-size", type=int, default=8000)


def run(args):
    from keras_transformer.models.transformer import build_transformer

    model = build_transformer(
        args.preset,
        source_vocab_size=args.source_vocab_size,
        target_vocab_size=args.target_vocab_size,
    )
    model.summary(expand_nested=True)  # the backbone's layers too
