"""`keras-transformer translate`: in process from a run folder, or through a server.

    keras-transformer translate --run runs/zh-en "我们来试试。"
    keras-transformer translate --run runs/zh-en --input sentences.txt --beam 4 --n-best 2
    keras-transformer translate --server http://127.0.0.1:8501 --model zh_en "我们来试试。"

Sentences come from the arguments, or from `--input FILE` (`-` for stdin), one per
line, or one column of a TSV (`--src zh` for the Tatoeba layout, `--src-column N`);
translations are printed one per line with their scores (tab-separated). A run's
model uses its default weights (the average training wrote, else the best) unless
`--weights` says otherwise.
"""

import sys

from keras_transformer.arguments import add_weights_argument
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.data.corpus import add_source_arguments


def add_arguments(parser):
    parser.add_argument("texts", nargs="*", help="sentences to translate")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="translate in process with this run folder's model")
    source.add_argument("--server", help="a TF Serving endpoint: http://host:8501 or host:8500")
    source.add_argument("--ctranslate2", metavar="DIR",
                        help="a CTranslate2 folder (export --format ctranslate2), searched "
                             "with --beam, --alpha and --coverage")
    parser.add_argument("--model", default="zh_en", help="served model name (with --server)")
    add_source_arguments(parser)
    add_weights_argument(parser)
    parser.add_argument("--beam", type=int, default=DEFAULT_BEAM_WIDTH,
                        help=f"beam width; 1 = greedy (default: {DEFAULT_BEAM_WIDTH})")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help="length-penalty exponent, 0 or more; higher favours longer "
                             f"translations (default: {DEFAULT_ALPHA})")
    parser.add_argument("--coverage", type=float,
                        help="weight of beam search's coverage penalty, 0 or more; higher keeps "
                             "a translation going until its attention has covered the source "
                             f"(default: {DEFAULT_COVERAGE}; 0: none; --run)")
    parser.add_argument("--max-length", type=int, default=None, help="cap on output subwords")
    parser.add_argument("--n-best", type=int, default=1, help="hypotheses to print per sentence")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--xla", action="store_true", help="compile decoding with XLA (--run)")


def _read_sentences(args):
    from keras_transformer.data.corpus import read_sources
    from keras_transformer.data.corpus import source_column

    texts = list(args.texts)
    column = source_column(args)
    if column is not None and not args.input:
        raise ValueError("--src/--src-column choose a column of --input; give --input FILE.")
    if args.input:
        texts += read_sources(args.input, column)
    if not texts:
        raise ValueError("nothing to translate: give sentences as arguments or --input FILE")
    return texts


def _in_process_translator(args):
    import tensorflow as tf

    from keras_transformer.tasks.translator import Translator

    if args.n_best > args.beam:
        raise ValueError(f"--n-best ({args.n_best}) cannot exceed --beam ({args.beam})")
    translator = Translator.from_preset(args.run, weights=args.weights)
    module = translator.translation_module(
        args.beam, args.alpha, DEFAULT_COVERAGE if args.coverage is None else args.coverage,
        args.max_length, jit_compile=args.xla)

    def translate(batch):
        result = module.translate_n_best(tf.constant(batch))
        return result["translations"].numpy(), result["scores"].numpy()

    return translate


def _ctranslate2_translator(args):
    import numpy as np

    from keras_transformer.evaluation.translators import CTranslate2Translator

    if args.weights or args.xla:
        raise ValueError("--weights and --xla belong to --run; a CTranslate2 folder holds its "
                         "own weights and runs in CTranslate2.")
    if args.n_best > args.beam:
        raise ValueError(f"--n-best ({args.n_best}) cannot exceed --beam ({args.beam})")
    translator = CTranslate2Translator(
        args.ctranslate2, beam_width=args.beam, alpha=args.alpha,
        coverage=DEFAULT_COVERAGE if args.coverage is None else args.coverage)

    def translate(batch):
        translations, scores = translator(batch, n_best=args.n_best)
        return np.array(translations, dtype=object), np.array(scores)

    return translate


def _server_translator(args):
    if args.weights:
        raise ValueError("--weights belongs to --run; a served model holds its own weights.")
    if args.coverage is not None:
        raise ValueError("--coverage belongs to --run; a served model searches with the "
                         "coverage penalty it was exported with (export --coverage).")
    from keras_transformer.serving.client import ServingClient

    client = ServingClient(args.server, args.model)

    def translate(batch):
        inputs = {"text": [text.encode("utf-8") for text in batch]}
        if args.n_best > 1:
            result = client.predict(inputs, signature_name="translate_n_best")
            return result["translations"], result["scores"]
        result = client.predict(inputs)
        return result["translation"][:, None], result["score"][:, None]

    return translate


def run(args):
    from tqdm import tqdm

    texts = _read_sentences(args)
    if args.run:
        translate = _in_process_translator(args)
    elif args.ctranslate2:
        translate = _ctranslate2_translator(args)
    else:
        translate = _server_translator(args)
    show_progress = len(texts) > args.batch_size
    with tqdm(total=len(texts), disable=not show_progress, file=sys.stderr, unit="sent") as bar:
        for start in range(0, len(texts), args.batch_size):
            batch = texts[start : start + args.batch_size]
            translations, scores = translate(batch)
            for row in range(len(batch)):
                for rank in range(min(args.n_best, translations.shape[1])):
                    text = translations[row, rank]
                    text = text.decode("utf-8") if isinstance(text, bytes) else text
                    prefix = f"{start + row}\t{rank + 1}\t" if args.n_best > 1 else ""
                    print(f"{prefix}{text}\t{scores[row, rank]:.4f}", flush=not show_progress)
            bar.update(len(batch))
