"""`python -m bench [names...]`: runs the benchmarks, prints one table, writes JSON.

Each benchmark measures ours beside its baseline in the same process, so the ratios
hold on any machine; absolute numbers are labelled with the machine in the JSON.
"""

import argparse
import importlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from bench.common import Results  # noqa: E402
from bench.common import machine  # noqa: E402

BENCHMARKS = ["decoding"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=BENCHMARKS, help=f"any of {BENCHMARKS}")
    parser.add_argument("--output", default="bench/results/latest.json")
    args = parser.parse_args()
    results = Results()
    started = time.time()
    for name in args.names:
        print(f"running {name} ...", flush=True)
        importlib.import_module(f"bench.{name}").run(results)
    print()
    print(f"machine: {machine()}")
    print(results.table())
    results.save(args.output, {"seconds": round(time.time() - started, 1)})
    print(f"\nwritten {args.output}")


if __name__ == "__main__":
    main()
