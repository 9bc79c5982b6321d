"""`python -m bench [names...]`: runs the benchmarks, prints one table, writes JSON.

Each benchmark measures ours beside its baseline in the same process, so the ratios
hold on any machine; absolute numbers are labelled with the machine in the JSON.

Examples:
    python -m bench                      # everything, full size (2-core CPU: ~45-50 min)
    python -m bench --quick              # everything, small sizes (a few minutes)
    python -m bench training attention   # some of them
    python -m bench profile              # where a training step's time goes (on request only)
    python -m bench kernels              # the decoding step's kernel choices (on request only)
    python -m bench decoding export --xla off    # decoding as TF Serving runs it (graph mode)
    python -m bench generation --xla off --preset tiny  # language-model generation, cached vs not
    python -m bench data --sizes 28k,1M          # streamed corpora of 28k and 1M pairs
    python -m bench ceiling training decoding --preset base \\
        --mixed-precision mixed_bfloat16 --xla          # bench/gpu.sh, on a GPU
"""

import argparse
import importlib
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from bench.common import Results  # noqa: E402
from bench.common import machine  # noqa: E402
from bench.common import THREAD_POOLS  # noqa: E402
from bench.common import use_threads  # noqa: E402
from keras_transformer.data.corpus import add_pair_arguments  # noqa: E402
from keras_transformer.data.corpus import pair_files  # noqa: E402

BENCHMARKS = [
    "ceiling", "training", "step", "epochs", "attention", "decoding", "generation", "export", "serving",
    "data",
]
# Run only when named: explanations of the training and decoding numbers, not comparisons.
ON_REQUEST = ["profile", "kernels"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="name",
                        help=f"any of {BENCHMARKS + ON_REQUEST} (default: {BENCHMARKS})")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repeats: checks that everything runs")
    parser.add_argument("--preset", default="small",
                        help="model preset of training, attention, decoding and generation "
                        "(default small)")
    parser.add_argument("--mixed-precision", default="none",
                        choices=["none", "mixed_bfloat16", "mixed_float16"],
                        help="Keras dtype policy of the models and layers (default none)")
    parser.add_argument("--xla", nargs="?", const="on", default="both",
                        choices=["both", "on", "off"],
                        help="jit_compile: both (default), on (the flag alone) or off")
    parser.add_argument("--token-budget", type=int, default=4096,
                        help="our training pipeline's tokens per batch (default 4096)")
    parser.add_argument("--baseline-batch-size", type=int, default=64,
                        help="sentences per batch of the training baselines (the tutorial's 64)")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed training steps per design (default 12, --quick 3; profile: 8)")
    parser.add_argument("--run", default=None, metavar="DIR",
                        help="export: a trained translator run whose formats (SavedModel "
                             "float32/int8/bfloat16, CTranslate2) are compared (default: "
                             "runs/zh-en when it exists)")
    parser.add_argument("--serving-preset", default="small",
                        help="model preset of the serving benchmark (default small)")
    for name, (_, help_text) in THREAD_POOLS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=0, metavar="N",
                            help=f"TensorFlow's {help_text} (default 0: TensorFlow's choice)")
    parser.add_argument("--sizes", default=None, metavar="LIST",
                        help="data: comma-separated corpus sizes of 28k, 1M, 10M (default: all; "
                        "--quick: 28k)")
    parser.add_argument("--output", default="bench/results/latest.json")
    # The same corpus options as `keras-transformer train` and `evaluate`, from one reader.
    add_pair_arguments(parser, data_help="the training, export and serving benchmarks' corpus "
                       "(default: the bundled data/cmn-eng/cmn.txt, zh→en)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHMARKS + ON_REQUEST]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {BENCHMARKS + ON_REQUEST}")
    if args.sizes is not None:
        from bench.data import SIZES

        args.sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
        if not args.sizes or any(size not in SIZES for size in args.sizes):
            parser.error(f"--sizes takes a comma-separated list of {list(SIZES)}; received {args.sizes}")
    for name in THREAD_POOLS:
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0; received "
                         f"{getattr(args, name)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        pairs = pair_files(args, default_languages=("zh", "en"))
    except ValueError as error:
        raise SystemExit(f"python -m bench: error: {error}") from None
    from bench.training import use_corpus

    use_corpus(pairs)
    use_threads(vars(args))
    options = {
        "quick": args.quick,
        "preset": args.preset,
        "mixed_precision": args.mixed_precision,
        "xla": args.xla,
        "token_budget": args.token_budget,
        "baseline_batch_size": args.baseline_batch_size,
        "steps": args.steps,
        "serving_preset": args.serving_preset,
        "run": args.run,
        "sizes": args.sizes,
        **{name: getattr(args, name) for name in THREAD_POOLS},
        "data": pairs.describe() if pairs else "data/cmn-eng/cmn.txt (zh→en)",
    }
    results = Results(options)
    started = time.time()
    for name in args.names or BENCHMARKS:
        print(f"running {name} ...", flush=True)
        begin = time.time()
        importlib.import_module(f"bench.{name}").run(results, quick=args.quick)
        print(f"  {name}: {time.time() - begin:.0f} s", flush=True)
    print()
    print(f"machine: {machine()}")
    print(f"options: {options}")
    print(results.table())
    command = ["python -m bench", *(sys.argv[1:] if argv is None else argv)]
    results.save(args.output, {"seconds": round(time.time() - started, 1),
                               "command": " ".join(command)})
    print(f"\nwritten {args.output}")


if __name__ == "__main__":
    main()
