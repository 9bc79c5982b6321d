"""Choosing a `tf.distribute` strategy from the command line.

* `default`: the current (single-device) strategy.
* `mirrored`: synchronous data parallelism over the local GPUs (all of them, or the
  given devices); one replica per device, gradients all-reduced each step.
* `multi-worker`: `MultiWorkerMirroredStrategy`, one process per machine, the
  cluster read from the `TF_CONFIG` environment variable.

Strategies must be created before TensorFlow runs anything else (a multi-worker
strategy needs to configure the runtime's collective ops first), so the trainer
calls `make_strategy` first thing.
"""

import json
import os

STRATEGIES = ("default", "mirrored", "multi-worker")


def make_strategy(kind="default", devices=None):
    """Returns the `tf.distribute.Strategy` named `kind`.

    Args:
        kind: one of `STRATEGIES`.
        devices: for "mirrored", a list of device names (e.g. `["/gpu:0", "/gpu:1"]`
            or logical CPUs `["/cpu:0", "/cpu:1"]`); None for all local GPUs
            (or the CPU when there is none).

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: for an unknown kind, devices with a non-mirrored strategy, or
            "multi-worker" without a usable `TF_CONFIG`.

    Example:
        >>> strategy = make_strategy("mirrored", devices=["/cpu:0"])  # doctest: +SKIP
        >>> with strategy.scope():  # doctest: +SKIP
        ...     model = build_transformer("tiny")
    """
    import tensorflow as tf

    if kind not in STRATEGIES:
        raise ValueError(f"Unknown strategy {kind!r}; accepted: {list(STRATEGIES)}.")
    if devices and kind != "mirrored":
        raise ValueError(f"`devices` only applies to the mirrored strategy; received {kind!r}.")
    if kind == "default":
        return tf.distribute.get_strategy()
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy(devices=list(devices) if devices else None)
    cluster = tf_config()
    if not cluster.get("cluster") or "task" not in cluster:
        raise ValueError(
            "The multi-worker strategy reads its cluster from the TF_CONFIG environment "
            'variable, e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}; TF_CONFIG is '
            f"{'not set' if not cluster else 'missing cluster or task'}."
        )
    return tf.distribute.MultiWorkerMirroredStrategy()


def tf_config():
    """The parsed `TF_CONFIG` environment variable ({} when unset)."""
    text = os.environ.get("TF_CONFIG", "").strip()
    if not text:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON: {error}") from None


def is_chief(strategy=None):
    """Whether this process should write the run folder's shared files.

    True for single-process strategies, for the "chief" task, and for worker 0 of
    a cluster without a chief. Other workers must still take part in saving (the
    variables are synchronised), but into a private folder.
    """
    resolver = getattr(strategy, "cluster_resolver", None) if strategy is not None else None
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def worker_name(strategy=None):
    """"chief" for the chief, else `<task_type>-<task_id>` (a folder name)."""
    if is_chief(strategy):
        return "chief"
    resolver = strategy.cluster_resolver
    return f"{resolver.task_type}-{resolver.task_id}"


def worker_share(strategy=None):
    """`(index, count)`: this process's share of the training stream among the workers of
    a multi-worker cluster (the chief first, then the workers by index); `(0, 1)` for
    single-process strategies."""
    resolver = getattr(strategy, "cluster_resolver", None) if strategy is not None else None
    if resolver is None or not getattr(resolver, "task_type", None):
        return 0, 1
    spec = resolver.cluster_spec().as_dict()
    chiefs, workers = len(spec.get("chief", [])), len(spec.get("worker", []))
    if resolver.task_type == "chief":
        return 0, chiefs + workers
    return chiefs + resolver.task_id, chiefs + workers
