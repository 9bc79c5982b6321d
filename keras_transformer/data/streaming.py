"""Corpora of any size, read as streams: the files, the split rule, one pass over a shard.

A corpus is one or many UTF-8 files (glob patterns; a ``.gz`` file is read
through gzip) in one of the layouts `train` reads (`Layout`): tab-separated
columns (a translator's source and target, a classifier's label and text, a
language model's text column), whole lines (a language model's text), or two
line-aligned file lists (a translator's sources and targets). Nothing here holds
the corpus in memory: `scan` reads it once, in batches, keeping only bounded
samples, and `pass_strings` is a `tf.data` pipeline of one pass.

The split rule (`SplitRule`), decided pair by pair while reading:

- the *group key* of an example is its normalized source sentence (a
  translator's) or its normalized text (a language model's, a classifier's):
  Unicode NFKC with case folding (`tensorflow_text.case_fold_utf8`), runs of
  whitespace made one space, ends stripped (`normalize`);
- ``u``, a number in [0, 1), is SipHash of the key keyed by the split seed
  (`tf.strings.to_hash_bucket_strong`), so it depends on nothing but the key and
  the seed: not on the files' order, their sharding or the other examples;
- ``u < validation_below``: validation; ``validation_fraction <= u < test_below``:
  test; anything else: training. The two bounds are the fractions, lowered
  (`scan`) until each held-out part has at most ``max_held_out`` examples: the
  smallest ``u`` of the part are kept, the rest train.

Examples with the same key (duplicates under normalization, and every
translation of one source sentence) have the same ``u``, so they are never on
two sides. (A grouping over the whole corpus also joins pairs that share only a
target sentence; a per-pair rule cannot, so two sources with one translation may
sit on two sides.)

Every pass (`pass_strings`) reads the files in an order shuffled by the epoch,
interleaved, keeps the examples of the part asked for (and of the worker's
shard) and shuffles them in a bounded buffer.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os

from keras_transformer.data.corpus import LabelledFile
from keras_transformer.data.corpus import PairFiles
from keras_transformer.data.corpus import TextFile

# The hash is taken into [0, 2**53): a float64 holds every value exactly.
_HASH_BUCKETS = 2**53
# Examples read (and parsed) per batch while scanning and streaming.
_READ_BATCH = 4096
# Files read at once by a pass (more mix better; each holds a read buffer).
_CYCLE_LENGTH = 4
# The examples a pass shuffles among: a window of the stream, so memory does not grow
# with the corpus; the bundled corpus (28k pairs) fits in one, a whole-corpus shuffle.
DEFAULT_SHUFFLE_BUFFER = 65536
# Held-out examples kept per part (validation, test): validation then takes seconds.
DEFAULT_MAX_HELD_OUT = 2000
# Training examples a new run samples for its tokenizers and its length statistics.
DEFAULT_VOCAB_SAMPLE = 200_000
PARTS = ("train", "validation", "test")
_GLOB_CHARACTERS = "*?["


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a corpus's files read as examples.

    Attributes:
        groups: the files, sorted; each group is one file, or (aligned files) the
            source file and its target file.
        columns: for each field of an example, its 0-based tab-separated column,
            or None for the whole line (of the group's file of that index when a
            group has two files).
        names: each field's name in messages ("source sentence", "label", ...).
        key: the index of the field whose normalized form is the group key.
    """

    groups: tuple[tuple[str, ...], ...]
    columns: tuple[int | None, ...]
    names: tuple[str, ...]
    key: int

    @property
    def aligned(self):
        return len(self.groups[0]) == 2

    @property
    def needed_columns(self):
        return max((c for c in self.columns if c is not None), default=-1) + 1

    def describe_files(self):
        """A JSON-ready record of every file: absolute path, size and SHA-256."""
        return [file_record(path) for group in self.groups for path in group]


def expand(pattern):
    """The files a path or glob pattern names, sorted.

    Raises:
        FileNotFoundError: for a path that does not exist or a pattern that matches nothing.
        ValueError: for a folder.
    """
    pattern = os.fspath(pattern)
    if any(c in pattern for c in _GLOB_CHARACTERS) and not os.path.exists(pattern):
        paths = sorted(p for p in glob.glob(pattern) if not os.path.isdir(p))
        if not paths:
            raise FileNotFoundError(f"{pattern} matches no file.")
        return paths
    if not os.path.exists(pattern):
        raise FileNotFoundError(f"{pattern} does not exist.")
    if os.path.isdir(pattern):
        raise ValueError(f"{pattern} is a folder; pass a file of sentences (or a glob such as {pattern}/*.gz).")
    return [pattern]


def layout_of(data):
    """The `Layout` of a `PairFiles`, a `TextFile` or a `LabelledFile` (paths may be globs)."""
    if isinstance(data, PairFiles):
        names = ("source sentence", "target sentence")
        if data.target_path is not None:
            sources, targets = expand(data.path), expand(data.target_path)
            if len(sources) != len(targets):
                raise ValueError(
                    f"{data.path} names {len(sources)} files but {data.target_path} names "
                    f"{len(targets)}; aligned files pair up one to one, in sorted order."
                )
            return Layout(tuple(zip(sources, targets)), (None, None), names, 0)
        columns = (data.source_column, data.target_column)
        if min(columns) < 0 or columns[0] == columns[1]:
            raise ValueError(f"columns must be distinct and >= 0, got {columns[0]} and {columns[1]}")
        return Layout(tuple((p,) for p in expand(data.path)), columns, names, 0)
    if isinstance(data, TextFile):
        if data.column is not None and data.column < 0:
            raise ValueError(f"--column must be >= 0; received {data.column}.")
        return Layout(tuple((p,) for p in expand(data.path)), (data.column,), ("text",), 0)
    if isinstance(data, LabelledFile):
        columns = (data.label_column, data.text_column)
        if min(columns) < 0 or columns[0] == columns[1]:
            raise ValueError(
                "--label-column and --text-column must be distinct and >= 0; received "
                f"{columns[0]} and {columns[1]}."
            )
        return Layout(tuple((p,) for p in expand(data.path)), columns, ("label", "text"), 1)
    raise TypeError(f"Unknown corpus description {type(data).__name__}.")


def file_record(path):
    """{"path", "size", "sha256"} of a file (read in chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 22), b""):
            digest.update(chunk)
    return {"path": os.path.abspath(path), "size": os.path.getsize(path), "sha256": digest.hexdigest()}


def check_unchanged(records, run_dir):
    """Refuses, in one line, a corpus whose files differ from those a run recorded.

    Raises:
        ValueError: naming the first file that is missing or whose size or hash changed.
    """
    for record in records:
        path = record["path"]
        if not os.path.exists(path):
            problem = "is missing"
        elif os.path.getsize(path) != record["size"]:
            problem = f"has {os.path.getsize(path)} bytes, not the {record['size']} recorded"
        elif file_record(path)["sha256"] != record["sha256"]:
            problem = "has changed (its SHA-256 differs from the one recorded)"
        else:
            continue
        raise ValueError(
            f"{run_dir} streams its training data from {path}, which {problem}; restore the "
            "file, or train a new run on the new data."
        )


def normalize(strings):
    """The group key of each string: NFKC with case folding, whitespace runs as one space.

    Args:
        strings: tf.string (N,).

    Returns:
        tf.string (N,).
    """
    import tensorflow as tf
    import tensorflow_text as text

    return tf.strings.strip(tf.strings.regex_replace(text.case_fold_utf8(strings), r"\s+", " "))


def unit_hash(keys, seed, stream=0):
    """A stable number in [0, 1) per key: SipHash keyed by (seed, stream); float64 (N,)."""
    import tensorflow as tf

    buckets = tf.strings.to_hash_bucket_strong(keys, _HASH_BUCKETS, key=[int(seed), int(stream)])
    return tf.cast(buckets, tf.float64) / float(_HASH_BUCKETS)


@dataclasses.dataclass(frozen=True)
class SplitRule:
    """Which part an example goes to, from its key's hash ``u`` (see the module docstring).

    Attributes:
        seed: the split seed (the hash key).
        validation_fraction: ``u`` below it is the validation part.
        test_fraction: ``u`` in ``[validation_fraction, validation_fraction + test_fraction)``
            is the test part.
        validation_below: the lowered bound of validation (at most the fraction).
        test_below: the lowered upper bound of test (at most the sum of the fractions).
    """

    seed: int = 0
    validation_fraction: float = 0.05
    test_fraction: float = 0.05
    validation_below: float | None = None
    test_below: float | None = None

    def __post_init__(self):
        if (self.validation_fraction < 0 or self.test_fraction < 0
                or self.validation_fraction + self.test_fraction >= 1):
            raise ValueError(
                "fractions must be >= 0 and leave some training data, got "
                f"validation={self.validation_fraction}, test={self.test_fraction}"
            )

    @property
    def bounds(self):
        """(validation upper bound, test lower bound, test upper bound)."""
        end = self.validation_fraction + self.test_fraction
        return (self.validation_fraction if self.validation_below is None else self.validation_below,
                self.validation_fraction, end if self.test_below is None else self.test_below)

    def parts(self, u):
        """0 (train), 1 (validation) or 2 (test) for each ``u``: int32 (N,) from float64 (N,)."""
        import tensorflow as tf

        validation_below, test_from, test_below = self.bounds
        validation = u < validation_below
        test = (u >= test_from) & (u < test_below)
        return tf.where(validation, 1, tf.where(test, 2, 0))

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        return cls(**values)


# -- reading lines into examples ------------------------------------------------------------------

def _read_file(path):
    import tensorflow as tf

    compression = tf.where(tf.strings.regex_full_match(path, r".*\.gz"), "GZIP", "")
    return tf.data.TextLineDataset(path, compression_type=compression)


_END = "\x00end"  # after the last line of each aligned file: a missing partner shows


def _group_batches(layout):
    """A function from a group's paths (tf.string (F,)) to a dataset of its lines in batches.

    Each element is ``(first, lines)``: the 1-based number of the batch's first line and
    tf.string (N, F) lines, one column per file of the group. Lines are read in batches
    from the start: `tf.data` costs microseconds per element and step, which per line
    would make reading slower than parsing.
    """
    import tensorflow as tf

    def read(paths):
        if layout.aligned:
            sides = [_read_file(paths[i]).concatenate(tf.data.Dataset.from_tensors(_END)).batch(_READ_BATCH)
                     for i in range(2)]
            batches = tf.data.Dataset.zip(tuple(sides)).map(_aligned_rows)
        else:
            batches = _read_file(paths[0]).batch(_READ_BATCH).map(lambda lines: lines[:, None])
        return batches.enumerate().map(lambda index, lines: (index * _READ_BATCH + 1, lines))

    return read


def _aligned_rows(sources, targets):
    """The rows of two aligned files' batches, the shorter padded with `_END` (a line with
    no partner), without the rows where both files ended."""
    import tensorflow as tf

    rows = tf.maximum(tf.size(sources), tf.size(targets))  # the shorter side ended
    sides = [tf.pad(side, [[0, rows - tf.size(side)]], constant_values=_END) for side in (sources, targets)]
    lines = tf.stack(sides, axis=1)
    return tf.boolean_mask(lines, tf.logical_not(tf.reduce_all(lines == _END, axis=1)))


def _first_lines(batches, count):
    """Batches ``(index, first, lines)`` (a file group's index and `_group_batches`' batch)
    cut after `count` lines in all."""
    import tensorflow as tf

    def cut(read, element):
        index, first, lines = element
        kept = tf.clip_by_value(count - read, 0, tf.shape(lines, tf.int64)[0])
        return read + kept, (read, index, first, lines[:kept])

    return (batches.scan(tf.constant(0, tf.int64), cut)
            .take_while(lambda read, index, first, lines: read < count)
            .map(lambda read, index, first, lines: (index, first, lines)))


# Problem codes of `_parse`: 0 fine, else what is wrong with the line.
_TOO_FEW_COLUMNS, _NOT_UTF8, _NO_PARTNER, _EMPTY = 1, 2, 3, 4


def _parse(layout, lines):
    """Fields and problems of a batch of lines.

    Args:
        lines: tf.string (N, F), one line per file of a group.

    Returns:
        ``(fields, problem)``: a tuple of tf.string (N,) stripped fields, and int32
        (N,): 0, or a problem code (`_EMPTY + i` for an empty field i).
    """
    import tensorflow as tf

    lines = tf.strings.regex_replace(lines, "^\ufeff", "")
    valid = tf.reduce_all(
        tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="replace") == lines, axis=1)
    problem = tf.where(valid, 0, _NOT_UTF8)
    if layout.aligned:
        fields = tuple(tf.strings.strip(lines[:, i]) for i in range(2))
        unpaired = tf.reduce_any(lines == _END, axis=1)
        problem = tf.where(unpaired, _NO_PARTNER, problem)
    else:
        line = lines[:, 0]
        needed = layout.needed_columns
        if needed:
            cells = tf.strings.split(line, "\t")
            counts = tf.cast(cells.row_lengths(), tf.int32)
            dense = cells.to_tensor("", shape=[None, needed])
            problem = tf.where((problem == 0) & (counts < needed), _TOO_FEW_COLUMNS, problem)
        fields = tuple(tf.strings.strip(line if c is None else dense[:, c]) for c in layout.columns)
    for index, field in enumerate(fields):
        problem = tf.where((problem == 0) & (tf.strings.length(field) == 0), _EMPTY + index, problem)
    return fields, problem


def _describe_problem(layout, code, path, number, columns_found):
    where = f"{path}: line {number}"
    if code == _TOO_FEW_COLUMNS:
        return (f"{where}: expected at least {layout.needed_columns} tab-separated columns, "
                f"found {columns_found}")
    if code == _NOT_UTF8:
        return f"{where}: not valid UTF-8; the corpus must be UTF-8 text"
    if code == _NO_PARTNER:
        return f"{where}: has no partner line in the aligned file (the files differ in line count)"
    return f"{where}: {layout.names[code - _EMPTY]} is empty"


# -- one scan of a new run's corpus ----------------------------------------------------------------

class _Smallest:
    """The examples of the smallest keys seen, at most `limit`, keeping ties together.

    `below` falls to the smallest key not kept once more than `limit` were offered,
    so the kept examples are exactly those with key < `below`, whatever the order
    they came in. Candidates gather in NumPy arrays, batch by batch, and are cut back
    to `limit` by a partition when they reach twice as many: no Python work per example.
    """

    def __init__(self, limit, below):
        self.limit = limit
        self.below = below
        self.chunks = []  # (keys (N,), fields: a tuple of (N,) arrays of UTF-8 bytes)
        self.size = 0

    def offer(self, keys, fields, mask):
        """Offers the examples where `mask` holds: keys float (N,), fields a tuple of (N,) arrays."""
        import numpy as np

        chosen = np.flatnonzero(mask & (keys < self.below))
        if chosen.size:
            self.chunks.append((keys[chosen], tuple(field[chosen] for field in fields)))
            self.size += chosen.size
            if self.size > 2 * self.limit:
                self._cut()

    def _cut(self):
        import numpy as np

        if not self.chunks:
            return
        keys = np.concatenate([chunk[0] for chunk in self.chunks])
        fields = tuple(np.concatenate(parts) for parts in zip(*(chunk[1] for chunk in self.chunks)))
        if keys.size > self.limit:
            self.below = min(self.below, float(np.partition(keys, self.limit)[self.limit]))
            kept = np.flatnonzero(keys < self.below)
            keys, fields = keys[kept], tuple(field[kept] for field in fields)
        self.chunks, self.size = [(keys, fields)], keys.size

    def __len__(self):
        self._cut()
        return self.size

    def sorted(self):
        """The kept examples (tuples of str) by increasing key, ties by their text: no order
        of reading shows."""
        self._cut()
        if not self.chunks:
            return []
        keys, fields = self.chunks[0]
        rows = list(zip(*fields))
        order = sorted(range(len(rows)), key=lambda i: (keys[i], rows[i]))
        return [tuple(value.decode("utf-8") for value in rows[i]) for i in order]


@dataclasses.dataclass
class Scan:
    """What one pass over a new run's corpus found.

    Attributes:
        rule: the `SplitRule`, its bounds lowered to the caps.
        validation: the validation examples (tuples of field strings), by key hash.
        test: the test examples, likewise.
        sample: up to `sample_size` training examples, those of the smallest
            sampling hash (independent of the split's), by that hash.
        train_examples: the number of training examples.
        lines: the number of examples read.
        labels: the distinct values of field 0 (a classifier's labels), sorted; or None.
    """

    rule: SplitRule
    validation: list
    test: list
    sample: list
    train_examples: int
    lines: int
    labels: list | None


def scan(layout, rule, max_held_out=DEFAULT_MAX_HELD_OUT, sample_size=DEFAULT_VOCAB_SAMPLE,
         max_examples=None, collect_labels=False):
    """Reads a new run's corpus once: checks every line, splits, caps and samples.

    Args:
        layout: the corpus's `Layout`.
        rule: the `SplitRule` (its fractions and seed; the bounds are found here).
        max_held_out: most examples kept in validation and in test each.
        sample_size: most training examples sampled (for the tokenizers).
        max_examples: read only the first this many examples, in file order (None: all).
        collect_labels: record the distinct values of field 0.

    Returns:
        A `Scan`.

    Raises:
        ValueError: naming the file and line of the first malformed line, or for a
            corpus without lines.
    """
    import numpy as np
    import tensorflow as tf

    groups = tf.constant([list(group) for group in layout.groups])
    read = _group_batches(layout)
    batches = (tf.data.Dataset.from_tensor_slices((tf.range(len(layout.groups)), groups))
               .flat_map(lambda index, paths: read(paths).map(
                   lambda first, lines: (index, first, lines))))
    if max_examples is not None:
        batches = _first_lines(batches, max_examples)
    validation_to, test_from, test_to = rule.bounds
    train_from = rule.validation_fraction + rule.test_fraction
    validation = _Smallest(max_held_out, validation_to)
    test_keys = _Smallest(max_held_out, test_to)
    sample = _Smallest(sample_size, 2.0)
    # The heaps' bounds, read by the parsing in the graph: only candidates come to Python.
    # (A batch parsed ahead reads older, larger bounds: more candidates, the same heaps.)
    bounds = tf.Variable([validation_to, test_to, 2.0], dtype=tf.float64, trainable=False)

    def parse(index, first, lines):
        fields, problem = _parse(layout, lines)
        key = normalize(fields[layout.key])
        u, v = unit_hash(key, rule.seed, 0), unit_hash(key, rule.seed, 1)
        limits = bounds.read_value()
        offered = ((u < limits[0]) | ((u >= test_from) & (u < limits[1]))
                   | ((u >= train_from) & (v < limits[2])))
        rows = tf.where(offered)[:, 0]
        bad = tf.concat([tf.where(problem != 0)[:1, 0], tf.constant([-1], tf.int64)], 0)[0]
        columns = tf.size(tf.strings.split(lines[tf.maximum(bad, 0), 0], "\t"))
        labels = tf.unique(fields[0]).y if collect_labels else tf.constant([], tf.string)
        return (index, first, tf.size(u), bad, tf.gather(problem, tf.maximum(bad, 0)), columns,
                tuple(tf.gather(field, rows) for field in fields), tf.gather(u, rows),
                tf.gather(v, rows), labels)

    parsed = batches.map(parse, num_parallel_calls=2, deterministic=True).prefetch(2)
    count, labels = 0, set()
    for (index, first, size, bad, problem, columns, fields, u, v,
         batch_labels) in parsed.as_numpy_iterator():
        if bad >= 0:
            raise ValueError(_describe_problem(layout, int(problem), layout.groups[index][0],
                                               int(first + bad), int(columns)))
        count += int(size)
        labels.update(batch_labels.tolist())
        validation.offer(u, fields, u < validation_to)
        test_keys.offer(u, fields, (u >= test_from) & (u < test_to))
        sample.offer(v, fields, u >= train_from)
        bounds.assign([validation.below, test_keys.below, sample.below])
    if not count:
        raise ValueError(f"{layout.groups[0][0]}: line 1: the corpus has no lines")
    held_out = len(validation) + len(test_keys)  # (cut back to the caps: their bounds final)
    capped = dataclasses.replace(rule, validation_below=validation.below, test_below=test_keys.below)
    return Scan(
        rule=capped,
        validation=validation.sorted(),
        test=test_keys.sorted(),
        sample=sample.sorted(),
        train_examples=count - held_out,
        lines=count,
        labels=sorted(label.decode("utf-8") for label in labels) if collect_labels else None,
    )


# -- one pass of the training stream ---------------------------------------------------------------

def pass_strings(layout, rule, epoch, seed=0, part="train", shard=0, num_shards=1,
                 shuffle_buffer=DEFAULT_SHUFFLE_BUFFER, max_examples=None):
    """One pass over a part of the corpus: a `tf.data.Dataset` of examples (tuples of strings).

    The files are read in an order shuffled by (`seed`, `epoch`), `_CYCLE_LENGTH` at
    a time, and the examples shuffled in a buffer of `shuffle_buffer`. With
    `max_examples`, only the first that many lines in file order are read, so the
    files are read one after the other.

    Sharding (`num_shards` workers): with at least as many file groups as workers,
    worker `shard` reads the groups `shard`, `shard + num_shards`, ...; otherwise
    every worker reads every file and keeps the examples whose key hashes (a third
    hash, keyed by the split seed) to its shard. Either way the workers' shares are
    disjoint and together are the part.

    Args:
        layout: the corpus's `Layout`.
        rule: the run's `SplitRule`.
        epoch: the epoch (an int or a scalar int64 tensor): it seeds the order.
        seed: the run's data seed.
        part: "train", "validation" or "test".
        shard: this worker's index.
        num_shards: the number of workers.
        shuffle_buffer: examples shuffled among (0: no shuffling).
        max_examples: as `scan`'s.

    Returns:
        A dataset of tuples of tf.string scalars, one per field of the layout.
    """
    import tensorflow as tf

    import tensorflow as tf

    wanted = PARTS.index(part)
    groups = list(layout.groups)
    by_file = num_shards > 1 and len(groups) >= num_shards and max_examples is None
    if by_file:
        groups = groups[shard::num_shards]
    seed = epoch_seed(epoch, seed)
    paths = tf.constant([list(group) for group in groups])
    read = _group_batches(layout)
    if max_examples is None:
        order = tf.random.experimental.stateless_shuffle(tf.range(len(groups)), seed=tf.stack([seed, -1]))
        files = tf.data.Dataset.from_tensor_slices(tf.gather(paths, order))
        batches = files.interleave(read, cycle_length=min(_CYCLE_LENGTH, len(groups)),
                                   num_parallel_calls=min(_CYCLE_LENGTH, len(groups)),
                                   deterministic=True)
    else:
        numbered = tf.data.Dataset.from_tensor_slices(paths).flat_map(read).map(
            lambda first, lines: (0, first, lines))
        batches = _first_lines(numbered, max_examples).map(lambda index, first, lines: (first, lines))

    def keep(first, lines):
        fields, _ = _parse(layout, lines)
        key = normalize(fields[layout.key])
        kept = rule.parts(unit_hash(key, rule.seed, 0)) == wanted
        if num_shards > 1 and not by_file:
            kept &= tf.strings.to_hash_bucket_strong(key, num_shards, key=[rule.seed, 2]) == shard
        return tuple(tf.boolean_mask(field, kept) for field in fields)

    examples = batches.map(keep, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
    return shuffled(examples, shuffle_buffer, seed) if shuffle_buffer else examples


def epoch_seed(epoch, seed=0):
    """The int64 seed of an epoch's order (`epoch` an int or a scalar tensor)."""
    import tensorflow as tf

    return tf.cast(epoch, tf.int64) * 1_000_003 + seed


def shuffled(examples, window, seed):
    """The examples shuffled within consecutive windows of `window`, by a stateless seed.

    (`Dataset.shuffle` takes no seed computed in the graph, and an epoch's seed is.)
    A corpus no longer than a window is shuffled whole.

    Args:
        examples: a dataset of tuples of scalars.
        window: examples shuffled together.
        seed: int64 scalar tensor.
    """
    import tensorflow as tf

    def shuffle(index, batch):
        rows = tf.shape(tf.nest.flatten(batch)[0])[0]
        order = tf.random.experimental.stateless_shuffle(tf.range(rows), seed=tf.stack([seed, index]))
        return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda t: tf.gather(t, order), batch))

    return examples.batch(window).enumerate().flat_map(shuffle)


# -- what a run records, and its stream back ------------------------------------------------------

def layout_record(layout):
    """config.json's record of a `Layout`: its files (path, size, SHA-256, by group) and columns."""
    return {
        "files": [[file_record(path) for path in group] for group in layout.groups],
        "columns": list(layout.columns),
        "fields": list(layout.names),
        "key_field": layout.key,
    }


def layout_from_record(data):
    """The `Layout` a run recorded (`layout_record`): the files it was prepared from, no others."""
    return Layout(tuple(tuple(record["path"] for record in group) for group in data["files"]),
                  tuple(data["columns"]), tuple(data["fields"]), data["key_field"])


def stream_of(run_dir, data, config, static_shapes=False, num_shards=1):
    """The `Layout`, `SplitRule` and steps per epoch of a run's training stream.

    Args:
        run_dir: the `RunFolder` (for messages).
        data: its config.json's "data".
        config: the `TrainingConfig` (token budget, batching).
        static_shapes: batches padded for XLA (their widths count in the budget).
        num_shards: workers; each takes its share of the examples and of the budget.

    Raises:
        ValueError: in one line, when a recorded file is missing or changed.
    """
    from keras_transformer.data.fitting import training_width_step
    from keras_transformer.data.pipeline import steps_per_epoch

    if "files" not in data:
        raise ValueError(
            f"{run_dir.path} records no corpus files to stream its training data from (config.json "
            '"data" has no "files"); train a new run.'
        )
    check_unchanged([record for group in data["files"] for record in group], run_dir.path)
    max_length = data.get("max_length") or max(data["max_source_length"], data["max_target_length"])
    steps = steps_per_epoch(
        data["length_counts"], data["split_sizes"]["train"] / num_shards,
        config.token_budget // num_shards, max_length, config.batching,
        width_step=training_width_step(static_shapes),
    )
    return layout_from_record(data), SplitRule.from_dict(data["split"]), steps


def dictionary_strings(path, epoch, seed=0, shard=0, num_shards=1):
    """A pass over a run's dictionary entries (source<TAB>target lines), shuffled by the epoch."""
    import tensorflow as tf

    lines = tf.data.TextLineDataset(path)
    if num_shards > 1:
        lines = lines.shard(num_shards, shard)
    pairs = lines.map(lambda line: tuple(tf.unstack(tf.strings.split(line, "\t", maxsplit=1)[:2], 2)))
    return shuffled(pairs, DEFAULT_SHUFFLE_BUFFER, epoch_seed(epoch, seed) + 1)


def mixed(first, second, first_count, second_count, epoch, seed=0):
    """Two streams drawn from in proportion to their sizes, so the second spreads over the pass."""
    import tensorflow as tf

    share = second_count / max(first_count + second_count, 1)
    draw_seed = epoch_seed(epoch, seed) + 2
    choices = tf.data.Dataset.range(2**62).map(
        lambda i: tf.cast(tf.random.stateless_uniform([], tf.stack([draw_seed, i])) < share, tf.int64))
    return tf.data.Dataset.choose_from_datasets([first, second], choices, stop_on_empty_dataset=False)
