"""The in-memory input of a translation run: the baseline of `bench data`, and the split
`bench training` trains on. Never part of the package, whose runs stream their corpus
(`keras_transformer.data.streaming`).

- `split_pairs`: the whole corpus read into lists, pairs grouped by union-find over
  shared (normalized) source and target sentences, each group's part from SHA-256
  of its smallest source.
- `make_training_dataset`: lists of strings tokenized once and cached in memory,
  the whole corpus shuffled each epoch, batched by the package's `_batched`
  ("buckets": `bucket_by_sequence_length`; "sorted": the whole epoch one window of
  `_batch_plan`).
"""

import dataclasses
import hashlib
import unicodedata

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.data.pipeline import DEFAULT_MAX_SOURCE_LENGTH
from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
from keras_transformer.data.pipeline import DEFAULT_TOKEN_BUDGET
from keras_transformer.data.pipeline import _batched
from keras_transformer.data.pipeline import _to_model_inputs
from keras_transformer.data.pipeline import _tokenized
from keras_transformer.data.pipeline import pairs_of


@dataclasses.dataclass(frozen=True)
class CorpusSplit:
    train: list
    validation: list
    test: list


def normalize_for_grouping(text):
    """NFKC, case folded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def group_pairs(pairs):
    """For each pair, the index of the first pair of its group (connected through a shared
    normalized source or target sentence)."""
    parent = list(range(len(pairs)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_seen = {}
    for index, pair in enumerate(pairs):
        for key in (("s", normalize_for_grouping(pair.source)), ("t", normalize_for_grouping(pair.target))):
            other = first_seen.setdefault(key, index)
            root_a, root_b = find(index), find(other)
            if root_a != root_b:
                parent[max(root_a, root_b)] = min(root_a, root_b)
    return [find(i) for i in range(len(pairs))]


def split_pairs(pairs, validation_fraction=0.05, test_fraction=0.05, seed=0):
    """The parts of a list of `SentencePair`s: groups (`group_pairs`) to a part by the hash
    of their smallest normalized source."""
    groups = group_pairs(pairs)
    group_key = {}
    for pair, group in zip(pairs, groups):
        key = normalize_for_grouping(pair.source)
        if group not in group_key or key < group_key[group]:
            group_key[group] = key

    def part(key):
        digest = hashlib.sha256(f"{seed}\x00{key}".encode("utf-8")).digest()
        u = int.from_bytes(digest[:8], "big") / 2.0**64
        return 1 if u < validation_fraction else 2 if u < validation_fraction + test_fraction else 0

    part_of = {group: part(key) for group, key in group_key.items()}
    parts = ([], [], [])
    for pair, group in zip(pairs, groups):
        parts[part_of[group]].append(pair)
    return CorpusSplit(*parts)


def make_training_dataset(sources, targets, source_tokenizer, target_tokenizer,
                          token_budget=DEFAULT_TOKEN_BUDGET,
                          max_source_length=DEFAULT_MAX_SOURCE_LENGTH,
                          max_target_length=DEFAULT_MAX_TARGET_LENGTH,
                          seed=0, batching="buckets", width_step=1):
    """Epochs of token-budgeted batches of lists held in memory: tokenized once and cached,
    the whole corpus shuffled anew each iteration (each epoch)."""
    examples = _tokenized(pairs_of(sources, targets), source_tokenizer, target_tokenizer,
                          max_source_length, max_target_length).cache()
    examples = examples.shuffle(max(len(sources), 1), seed=seed, reshuffle_each_iteration=True)
    batches = _batched(examples, sequences=(0, 1), padding_values=(PAD_ID, PAD_ID, PAD_ID),
                       max_length=max(max_source_length, max_target_length),
                       token_budget=token_budget, batching=batching, width_step=width_step,
                       seed=seed, window=max(len(sources), 1))
    return batches.map(_to_model_inputs).prefetch(tf.data.AUTOTUNE)
