"""``tf.data`` pipelines from text to padded, token-budgeted batches, for each task.

Translation (``make_training_dataset``, ``make_eval_dataset``): every element is
``(features, labels)``::

    features = {"encoder_tokens": int32 (B, S), "decoder_tokens": int32 (B, T)}
    labels   = int32 (B, T)

with, for a target tokenized as ``y_1 .. y_n``::

    encoder_tokens = x_1 .. x_m               (source ids, no BOS/EOS)
    decoder_tokens = BOS y_1 .. y_n           (teacher-forcing input)
    labels         =     y_1 .. y_n EOS       (next token at each position)

padded with PAD_ID (0) to the longest row of the batch. Sources longer than
``max_source_length`` keep their first ``max_source_length`` ids; targets keep
their first ``max_target_length - 1`` ids, so ``T <= max_target_length`` and a
label row always ends in EOS. Tokenization runs in the TF graph.

Token budget: in a training batch, ``B * max(S, T) <= token_budget``, where
S and T are the padded widths of that batch. Two ways to get there
(``batching``): "buckets" gives each length bucket the batch size
``token_budget // (longest example the bucket admits)``; "sorted" sorts each
window of the stream by length and cuts it into full batches (`_batch_plan`).

The training pipelines read one pass of a stream of strings (a `tf.data.Dataset`,
`keras_transformer.data.streaming.pass_strings`), tokenize it in the graph and
batch it, holding at most a window of it; `epochs` strings the passes into the
endless stream `fit` reads, `steps_per_epoch` batches an epoch.

Language model (``make_lm_training_dataset``, ``make_lm_eval_dataset``): every
element is ``(tokens, labels)``, int32 (B, T) both: ``BOS y_1 .. y_n`` and
``y_1 .. y_n EOS`` (the target side of a translation pair), text truncated to
``max_length - 1`` ids.

Classifier (``make_classification_training_dataset``,
``make_classification_eval_dataset``): every element is ``(tokens, labels)``,
int32 (B, S) text ids (no BOS/EOS, truncated to ``max_length``) and int32 (B,)
class ids.

The training pipelines of all three batch by length under the same token budget
(`_batched`), and can apply word dropout to the model's input text
(`with_word_dropout`: the first tensor of each, as above, never the labels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.constants import BATCHINGS, BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.data.tokenizer import SubwordTokenizer

# The longest cmn.txt training sentences are 37 (zh) and 48 (en, with BOS)
# ids at the default vocabulary sizes, so 64 truncates nothing there.
DEFAULT_MAX_SOURCE_LENGTH = 64
DEFAULT_MAX_TARGET_LENGTH = 64
DEFAULT_TOKEN_BUDGET = 4096
# Buckets 8 ids wide. Narrower ones pad less (cmn.txt, budget 4096, `python -m bench
# training`: 94% of the target positions are real tokens at width 2, 73% at width 8)
# but learn worse: each bucket ends its epoch with a partial batch, and the many
# small batches of narrow buckets (one epoch: 14 of 78 under half full at width 2,
# 4 of 87 at width 8) cost more than the padding saves. Validation loss after ~250
# steps: 4.96 at width 2, 4.12 at width 8; at width 2 with partial batches dropped,
# 4.15 after only 177, so the small batches are the harm. (Each run:
# `keras_transformer.training.train(preset="small", epochs=4)` on cmn.txt with this
# width, the last with `drop_remainder=True`; val_loss from its history.json.)
DEFAULT_BUCKET_STEP = 8
# Tokenize this many sentences per op call: per-sentence calls are slow.
_TOKENIZE_BATCH = 1024
# "sorted" sorts this many examples at a time: the bundled corpus (25k training pairs,
# 33k with its dictionary entries) in one window, as a whole-epoch sort; memory does
# not grow with a larger corpus.
DEFAULT_SORT_WINDOW = 65536


def encode_source(
    tokenizer: SubwordTokenizer, strings: tf.Tensor, max_length: int
) -> tf.RaggedTensor:
    """Source sentences to encoder ids, truncated: the encoder's input format.

    Exporters should call this too, so that serving matches training.

    Args:
        tokenizer: The source tokenizer.
        strings: tf.string (B,).
        max_length: Most ids kept per sentence.

    Returns:
        int32 RaggedTensor (B, None), rows at most ``max_length`` long.
    """
    return tokenizer.tokenize(strings)[:, :max_length]


def encode_target(
    tokenizer: SubwordTokenizer, strings: tf.Tensor, max_length: int
) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Target sentences to shifted decoder inputs and labels.

    Args:
        tokenizer: The target tokenizer.
        strings: tf.string (B,).
        max_length: Length limit of decoder inputs and labels (>= 1).

    Returns:
        ``(decoder_tokens, labels)``, int32 RaggedTensors (B, None) with equal
        row lengths of at most ``max_length``: ``[BOS] + ids`` and ``ids + [EOS]``.
    """
    ids = tokenizer.tokenize(strings)[:, : max_length - 1]
    rows = ids.nrows()
    bos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], BOS_ID))
    eos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], EOS_ID))
    return tf.concat([bos, ids], axis=1), tf.concat([ids, eos], axis=1)


def round_up(length, step):
    """`length` rounded up to a multiple of `step` (an int, a NumPy array or a tensor).

    The width a batch is padded to under XLA (`pad_to_static_shapes`), which the
    sorted batches' plan counts too (`_batch_plan`).
    """
    return (length + step - 1) // step * step


def bucket_boundaries_for(max_length: int, step: int = DEFAULT_BUCKET_STEP) -> list[int]:
    """Evenly spaced bucket boundaries up to ``max_length``.

    Args:
        max_length: Longest example length, max(S, T) of one example.
        step: Width of each bucket.

    Returns:
        ``[step + 1, 2 * step + 1, ...]`` below ``max_length + 1``: bucket i
        holds lengths ``(i * step, (i + 1) * step]``, as
        ``bucket_by_sequence_length`` reads boundaries as exclusive upper ends.
    """
    return list(range(step + 1, max_length + 1, step))


def bucket_batch_sizes(
    boundaries: Sequence[int], max_length: int, token_budget: int
) -> list[int]:
    """Batch size per bucket so that ``B * max(S, T) <= token_budget``.

    Args:
        boundaries: Strictly increasing exclusive upper ends of the buckets,
            all at most ``max_length``.
        max_length: Longest example length; the last bucket's upper end.
        token_budget: Most (padded) tokens per batch.

    Returns:
        ``len(boundaries) + 1`` batch sizes.

    Raises:
        ValueError: If the boundaries are not increasing within
            ``[2, max_length]`` or the budget cannot hold the longest example.
    """
    boundaries = list(boundaries)
    if any(b <= a for a, b in zip(boundaries, boundaries[1:])) or (
        boundaries and (boundaries[0] < 2 or boundaries[-1] > max_length)
    ):
        raise ValueError(
            f"bucket boundaries must increase within [2, {max_length}], got {boundaries}"
        )
    if token_budget < max_length:
        raise ValueError(
            f"token_budget {token_budget} cannot hold one example of length {max_length}"
        )
    longest_per_bucket = [b - 1 for b in boundaries] + [max_length]
    return [token_budget // length for length in longest_per_bucket]


def _tokenized(
    pairs: tf.data.Dataset,
    source_tokenizer: SubwordTokenizer,
    target_tokenizer: SubwordTokenizer,
    max_source_length: int,
    max_target_length: int,
    batched: bool = False,
) -> tf.data.Dataset:
    """Dataset of (encoder (S,), decoder (T,), labels (T,)) int32 examples, in order.

    Args:
        pairs: (source, target) tf.string scalars.
        batched: the tokenized batches instead (ragged (N, None) each), as `_examples`.
    """
    if max_source_length < 1 or max_target_length < 1:
        raise ValueError("maximum lengths must be >= 1 (the target needs room for BOS/EOS)")

    def tokenize(source, target):
        encoder = encode_source(source_tokenizer, source, max_source_length)
        decoder, labels = encode_target(target_tokenizer, target, max_target_length)
        return encoder, decoder, labels

    return _examples(pairs, tokenize, batched)


def pairs_of(sources: Sequence[str], targets: Sequence[str]) -> tf.data.Dataset:
    """The (source, target) string dataset of two aligned lists (a held-out split, a test)."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(sources), dtype=tf.string), tf.constant(list(targets), dtype=tf.string)))


def _identity(*tensors):
    return tensors


def _to_model_inputs(encoder, decoder, labels):
    return {"encoder_tokens": encoder, "decoder_tokens": decoder}, labels


def make_training_dataset(
    pairs: tf.data.Dataset,
    source_tokenizer: SubwordTokenizer,
    target_tokenizer: SubwordTokenizer,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    max_source_length: int = DEFAULT_MAX_SOURCE_LENGTH,
    max_target_length: int = DEFAULT_MAX_TARGET_LENGTH,
    bucket_boundaries: Sequence[int] | None = None,
    seed: int = 0,
    batching: str = "buckets",
    width_step: int = 1,
    window: int = DEFAULT_SORT_WINDOW,
) -> tf.data.Dataset:
    """Token-budgeted, length-grouped batches of one pass over a stream of pairs.

    The pairs are tokenized in the graph as they come (nothing is cached: a pass
    holds at most a `window` of examples) and grouped by length ``max(S, T)`` so
    that batches carry little padding. Shuffling is the stream's
    (`streaming.pass_strings`); "sorted" shuffles its batches within a window too.

    Args:
        pairs: (source, target) tf.string scalars: one pass, in the order to batch.
        source_tokenizer: Tokenizer of the source language (a `SubwordTokenizer.sampling`
            one samples each segmentation: subword regularization).
        target_tokenizer: Tokenizer of the target language (likewise).
        token_budget: Bound on ``B * max(S, T)`` per batch (padded widths).
        max_source_length: Truncation length of encoder inputs.
        max_target_length: Truncation length of decoder inputs and labels.
        bucket_boundaries: Exclusive upper length ends of the buckets; None
            for :func:`bucket_boundaries_for` (steps of 8).
        seed: Seed of the batches' shuffle ("sorted").
        batching: "buckets" (``bucket_by_sequence_length``, fixed batch sizes per
            bucket) or "sorted" (each window of examples sorted by length and cut
            into full batches, `_sorted_batches`); one of `BATCHINGS`.
        width_step: "sorted" counts each length rounded up to a multiple of this
            (`_batch_plan`): under XLA, the widths `pad_to_static_shapes` pads to.
        window: "sorted": the examples sorted together.

    Returns:
        A dataset of ``({"encoder_tokens": int32 (B, S), "decoder_tokens":
        int32 (B, T)}, labels int32 (B, T))``.
    """
    dataset = _tokenized(
        pairs, source_tokenizer, target_tokenizer, max_source_length, max_target_length,
    )
    dataset = _batched(
        dataset,
        sequences=(0, 1),  # the labels are as long as the decoder tokens
        padding_values=(PAD_ID, PAD_ID, PAD_ID),
        max_length=max(max_source_length, max_target_length),
        token_budget=token_budget,
        batching=batching,
        width_step=width_step,
        bucket_boundaries=bucket_boundaries,
        seed=seed,
        window=window,
    )
    return dataset.map(_to_model_inputs)


def epochs(make_pass, first_epoch: int, steps: int) -> tf.data.Dataset:
    """The endless training stream: epoch after epoch, each `steps` batches.

    Epoch ``e`` is the first `steps` batches of ``make_pass(e)`` (the pass
    repeated if it has fewer), so every epoch has the same number of steps on every
    worker, and the batches of an epoch depend only on the seeds and ``e``: a run
    resumed at epoch ``e`` reads epoch ``e`` again from its start.

    Args:
        make_pass: epoch (int64 scalar tensor) -> a finite dataset of batches.
        first_epoch: the epoch the stream starts at.
        steps: batches per epoch (`steps_per_epoch`).
    """
    if steps < 1:
        raise ValueError(f"an epoch needs at least one step; received {steps}.")
    return tf.data.Dataset.range(first_epoch, 2**62).flat_map(
        lambda epoch: make_pass(epoch).repeat().take(steps))


def example_length_counts(batches: tf.data.Dataset, max_length: int) -> list[int]:
    """How many tokenized examples have each length, ``max`` over their sequences (0..max_length).

    Args:
        batches: tokenized batches, tuples whose RaggedTensors (N, None) are the sequences
            (`_tokenized(..., batched=True)` and its kind).
        max_length: the longest length.
    """
    def lengths(*parts):
        return tf.reduce_max(tf.stack([p.row_lengths() for p in parts if isinstance(p, tf.RaggedTensor)]), 0)

    counts = np.zeros(max_length + 1, np.int64)
    for batch in batches.map(lengths).as_numpy_iterator():
        counts += np.bincount(np.minimum(batch, max_length), minlength=max_length + 1)
    return counts.tolist()


def steps_per_epoch(length_counts, examples, token_budget, max_length, batching="buckets",
                    bucket_boundaries=None, width_step=1, window=DEFAULT_SORT_WINDOW):
    """The batches one pass over `examples` examples makes, from a sample's lengths.

    Args:
        length_counts: how many sampled examples have each length (`example_length_counts`).
        examples: the examples of a pass.
        token_budget, max_length, batching, bucket_boundaries, width_step, window: as
            `make_training_dataset`'s.

    Returns:
        The number of batches, at least 1: "buckets" fill each bucket's fixed batch
        size, "sorted" fills the budget with lengths rounded as `_batch_plan` rounds
        them, one partial batch per window.
    """
    counts = np.asarray(length_counts, np.float64)
    scale = examples / max(counts.sum(), 1)
    lengths = np.arange(len(counts))
    if batching == "sorted":
        padded = round_up(np.maximum(lengths, DEFAULT_BUCKET_STEP), width_step)
        tokens = float((counts * padded).sum()) * scale
        return max(1, math.ceil(tokens / token_budget) + math.ceil(examples / window))
    boundaries = bucket_boundaries_for(max_length) if bucket_boundaries is None else list(bucket_boundaries)
    sizes = bucket_batch_sizes(boundaries, max_length, token_budget)
    bucket = np.searchsorted(np.asarray(boundaries), lengths, side="right")
    per_bucket = np.bincount(bucket, weights=counts, minlength=len(sizes)) * scale
    return max(1, int(sum(math.ceil(n / size) for n, size in zip(per_bucket, sizes))))


def drop_words(
    tokens: tf.Tensor, rate: float, seed: tf.Tensor, first_text_id: int = EOS_ID + 1
) -> tf.Tensor:
    """Word dropout: each text token becomes UNK with probability ``rate``.

    The ids below ``first_text_id`` (padding, UNK, BOS, EOS and a tokenizer's tags)
    stay as they are, so a row keeps its length, its markers and its tags.

    Args:
        tokens: int (B, L) ids.
        rate: The probability, in [0, 1).
        seed: int (2,), the stateless seed of the draw.
        first_text_id: The lowest id of a text piece
            (`SubwordTokenizer.first_text_id`).

    Returns:
        The ids with the dropped tokens replaced by ``UNK_ID``, (B, L), same dtype.
    """
    dropped = tf.random.stateless_uniform(tf.shape(tokens), seed) < rate
    text = tokens >= first_text_id
    return tf.where(dropped & text, tf.constant(UNK_ID, tokens.dtype), tokens)


def with_word_dropout(
    dataset: tf.data.Dataset, rate: float, seed: int, first_text_id: int = EOS_ID + 1
) -> tf.data.Dataset:
    """`drop_words` on the model's input text of every batch: its first tensor (a
    translator's features: their "encoder_tokens").

    A regulariser for a small corpus (Sennrich and Zhang, 2019, "Revisiting
    Low-Resource Neural Machine Translation"): the model cannot lean on any one
    token being there. The labels, and the other tensors, are left as they are.
    Each iteration over the dataset (an epoch) draws anew; the sequence of draws
    is the same for the same seed. (Under `tf.distribute`, whose input rebatching
    splits each batch into the replicas' shares before this map, each share draws
    on its own: the same rate, not one device's draws.)

    Args:
        dataset: batches, tuples whose first item is int (B, L) ids or a translator's features.
        rate: The probability, in [0, 1); 0 returns ``dataset`` unchanged.
        seed: Seed of the draws.
        first_text_id: As `drop_words`'.
    """
    if not rate:
        return dataset
    draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)

    def drop(batch, draw):
        inputs, *rest = batch
        seed = tf.stack([draw, 0])
        if isinstance(inputs, dict):  # a translator's: the source is its input text
            inputs = {**inputs, "encoder_tokens": drop_words(inputs["encoder_tokens"], rate, seed,
                                                              first_text_id)}
        else:
            inputs = drop_words(inputs, rate, seed, first_text_id)
        return (inputs, *rest)

    return tf.data.Dataset.zip((dataset, draws)).map(drop)


def _batched(
    dataset, sequences, padding_values, max_length, token_budget, batching="buckets",
    width_step=1, bucket_boundaries=None, seed=0, window=DEFAULT_SORT_WINDOW,
):
    """Groups tokenized examples into token-budgeted batches.

    "buckets": ``bucket_by_sequence_length``, a fixed batch size per length bucket.
    "sorted": `_sorted_batches`, each window sorted by length and cut into full
    batches. Either way an example's length is that of its longest padded part and
    ``B * longest <= token_budget``.

    Args:
        dataset: tokenized examples (tuples of rank-1 tensors or scalars).
        sequences: the indices of an example's tensors that are padded sequences.
        padding_values: one per tensor of an example.
        max_length: longest example length.
        Others: as `make_training_dataset`'s.

    Returns:
        A dataset of tuples of padded (B, ...) tensors.

    Raises:
        ValueError: for an unknown `batching`, or a budget that cannot hold one
            example of `max_length`.
    """
    if batching not in BATCHINGS:
        raise ValueError(f"`batching` must be one of {BATCHINGS}; received {batching!r}.")
    if bucket_boundaries is None:
        bucket_boundaries = bucket_boundaries_for(max_length)
    # Also for "sorted": it refuses a budget that cannot hold one longest example.
    batch_sizes = bucket_batch_sizes(bucket_boundaries, max_length, token_budget)
    if batching == "sorted":
        return _sorted_batches(dataset, sequences, padding_values, token_budget, width_step, seed, window)
    return dataset.bucket_by_sequence_length(
        element_length_func=lambda *example: tf.reduce_max(
            tf.stack([tf.shape(example[i])[0] for i in sequences])
        ),
        bucket_boundaries=list(bucket_boundaries),
        bucket_batch_sizes=batch_sizes,
        padding_values=padding_values,
    )


def _batch_plan(widths, token_budget, shortest=DEFAULT_BUCKET_STEP, width_step=1):
    """The order and the batch sizes that cut length-sorted examples into full batches.

    Examples are sorted by their longest padded part, then by each part's length
    (a stable sort, so equal keys keep the shuffled order and a batch's members
    change from epoch to epoch), and cut greedily: a batch takes the next example
    while ``B * longest <= token_budget``, so every batch but the last is full.

    Lengths up to `shortest` count as `shortest`: a batch holds at most
    ``token_budget // shortest`` rows, as the narrowest bucket does, and the
    shortest examples stay in shuffled order among themselves. Sorted exactly,
    they made batches of 1,000-2,000 rows of nothing but one- and two-piece
    dictionary words (the bundled CC-CEDICT pairs, 30% of a zh-en run's
    examples), and the `small` preset's training diverged at its peak learning
    rate (validation loss 4.69 at step 140, 6.20 at step 210).

    The budget counts each batch's longest length rounded up to a multiple of
    `width_step`: under XLA every batch is padded to such a width L and to
    ``token_budget // L`` rows (`pad_to_static_shapes`), so its rows must fit
    those, and XLA compiles one shape per width.

    Args:
        widths: int64 (P, N), the length of each padded part (P) of each example (N).
        token_budget: most padded tokens per batch.
        shortest: the length up to which examples count as equally long.
        width_step: the multiple the budget rounds a batch's longest length up to.

    Returns:
        ``(order, sizes)``: int64 (N,) the examples' sorted order and int64 (K,) the
        sizes of the K consecutive batches it is cut into.
    """
    widths = np.maximum(widths, shortest)
    longest = widths.max(axis=0)
    # np.lexsort sorts by its last key first.
    order = np.lexsort((*widths[::-1], longest)) if longest.size else np.zeros(0, np.int64)
    padded = round_up(longest, width_step)
    sizes, count = [], 0
    for length in padded[order]:
        if count and (count + 1) * length > token_budget:
            sizes.append(count)
            count = 0
        count += 1
    if count:
        sizes.append(count)
    return order.astype(np.int64), np.array(sizes, np.int64)


def _sorted_batches(dataset, sequences, padding_values, token_budget, width_step, seed, window):
    """Sorts each window of (shuffled) examples by length and cuts it into full batches.

    Length buckets with a fixed batch size each leave padding inside a bucket's
    width and a partial batch per bucket at each pass's end. Here each window of
    the stream is sorted by length (`_batch_plan`), so a batch's examples have
    nearly equal lengths in every padded part, and every batch of a window but
    one is full; the window's batches are then shuffled. (Length-sorted,
    token-bounded batches, as fairseq and OpenNMT-tf make them from a buffer.)

    Args:
        dataset: shuffled tokenized examples (tuples of rank-1 tensors or scalars).
        window: examples sorted together.
        Others: as `_batched`'s.

    Returns:
        A dataset of tuples of padded (B, ...) tensors.
    """

    def split(*columns):
        widths = tf.stack([columns[i].row_lengths() for i in sequences])
        order, sizes = tf.numpy_function(
            lambda lengths: _batch_plan(lengths, token_budget, width_step=width_step),
            [widths],
            (tf.int64, tf.int64),
            stateful=False,
        )
        order.set_shape([None])
        sizes.set_shape([None])
        return tuple(
            tf.RaggedTensor.from_row_lengths(tf.gather(column, order), sizes) for column in columns
        )

    def pad(*columns):
        return tuple(
            column.to_tensor(default_value=value) if isinstance(column, tf.RaggedTensor) else column
            for column, value in zip(columns, padding_values)
        )

    def window_batches(*columns):
        batches = tf.data.Dataset.from_tensor_slices(split(*columns))
        return batches.shuffle(window, seed=seed)

    return dataset.ragged_batch(window).flat_map(window_batches).map(pad)


def make_eval_dataset(
    sources: Sequence[str],
    targets: Sequence[str],
    source_tokenizer: SubwordTokenizer,
    target_tokenizer: SubwordTokenizer,
    batch_size: int = 64,
    max_source_length: int = DEFAULT_MAX_SOURCE_LENGTH,
    max_target_length: int = DEFAULT_MAX_TARGET_LENGTH,
) -> tf.data.Dataset:
    """Fixed-size batches in the given order, for evaluation (a held-out split, cached).

    Args:
        sources: Source sentences.
        targets: Target sentences, aligned with ``sources``.
        source_tokenizer: Tokenizer of the source language.
        target_tokenizer: Tokenizer of the target language.
        batch_size: Examples per batch (the last batch may be smaller).
        max_source_length: Truncation length of encoder inputs.
        max_target_length: Truncation length of decoder inputs and labels.

    Returns:
        A dataset of ``({"encoder_tokens": int32 (B, S), "decoder_tokens":
        int32 (B, T)}, labels int32 (B, T))``; batch i holds examples
        ``i * batch_size`` to ``(i + 1) * batch_size - 1``.
    """
    dataset = _tokenized(
        pairs_of(sources, targets), source_tokenizer, target_tokenizer,
        max_source_length, max_target_length,
    ).cache()
    dataset = dataset.padded_batch(batch_size, padding_values=(PAD_ID, PAD_ID, PAD_ID))
    return dataset.map(_to_model_inputs).prefetch(tf.data.AUTOTUNE)


def _examples(strings, encode, batched=False):
    """Dataset of `encode(batch of strings)`'s examples, tokenized in batches, in order
    (`batched`: the batches themselves, their sequences ragged)."""
    batches = strings.batch(_TOKENIZE_BATCH).map(encode, num_parallel_calls=tf.data.AUTOTUNE,
                                                  deterministic=True)
    if batched:
        return batches
    return (
        batches
        .unbatch()
        # unbatch leaves rank-1 RaggedTensorSpecs, which padded_batch rejects;
        # passing them through a map makes them plain (None,) tensors.
        .map(_identity)
    )


def _lm_examples(texts, tokenizer, max_length, batched=False):
    """Dataset of (tokens (T,), labels (T,)) int32 language-model examples, in order.

    Args:
        texts: a dataset of tf.string scalars.
    """
    if max_length < 2:
        raise ValueError(f"max_length must be >= 2 (BOS or EOS and one id); received {max_length}")
    return _examples(texts, lambda batch: encode_target(tokenizer, batch, max_length), batched)


def make_lm_training_dataset(
    texts: tf.data.Dataset,
    tokenizer: SubwordTokenizer,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    max_length: int = DEFAULT_MAX_TARGET_LENGTH,
    seed: int = 0,
    batching: str = "buckets",
    width_step: int = 1,
) -> tf.data.Dataset:
    """Token-budgeted, length-grouped language-model batches of one pass over a stream of texts.

    Args:
        texts: tf.string scalars, one example each: one pass, in the order to batch.
        tokenizer: The run's tokenizer.
        token_budget: Bound on ``B * T`` per batch (padded width).
        max_length: Most ids per row (BOS or EOS included).
        seed, batching, width_step: As `make_training_dataset`'s.

    Returns:
        A dataset of ``(tokens int32 (B, T), labels int32 (B, T))``.
    """
    return _batched(
        _lm_examples(texts, tokenizer, max_length),
        sequences=(0,),  # the labels are as long as the tokens
        padding_values=(PAD_ID, PAD_ID),
        max_length=max_length, token_budget=token_budget, batching=batching,
        width_step=width_step, seed=seed,
    )


def make_lm_eval_dataset(
    texts: Sequence[str],
    tokenizer: SubwordTokenizer,
    batch_size: int = 64,
    max_length: int = DEFAULT_MAX_TARGET_LENGTH,
) -> tf.data.Dataset:
    """Fixed-size language-model batches in text order: ``(tokens, labels)`` int32 (B, T)."""
    strings = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), dtype=tf.string))
    dataset = _lm_examples(strings, tokenizer, max_length).cache()
    return dataset.padded_batch(batch_size, padding_values=(PAD_ID, PAD_ID)).prefetch(tf.data.AUTOTUNE)


def _classification_examples(examples, tokenizer, max_length, batched=False):
    """Dataset of (tokens (S,), label ()) int32 classifier examples, in order.

    Args:
        examples: (text tf.string, class id int32) scalars.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1; received {max_length}")
    return _examples(examples, lambda batch, ids: (encode_source(tokenizer, batch, max_length), ids),
                     batched)


def make_classification_training_dataset(
    examples: tf.data.Dataset,
    tokenizer: SubwordTokenizer,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    max_length: int = DEFAULT_MAX_SOURCE_LENGTH,
    seed: int = 0,
    batching: str = "buckets",
    width_step: int = 1,
) -> tf.data.Dataset:
    """Token-budgeted, length-grouped classifier batches of one pass over a stream.

    Args:
        examples: (text tf.string, class id int32) scalars: one pass, in the order to batch.
        tokenizer: The run's tokenizer.
        token_budget: Bound on ``B * S`` per batch (padded width).
        max_length: Most ids per text.
        seed, batching, width_step: As `make_training_dataset`'s.

    Returns:
        A dataset of ``(tokens int32 (B, S), labels int32 (B,))``.
    """
    return _batched(
        _classification_examples(examples, tokenizer, max_length),
        sequences=(0,),
        padding_values=(PAD_ID, 0),  # the label is a scalar: nothing of it is padded
        max_length=max_length, token_budget=token_budget, batching=batching,
        width_step=width_step, seed=seed,
    )


def make_classification_eval_dataset(
    texts: Sequence[str],
    class_ids: Sequence[int],
    tokenizer: SubwordTokenizer,
    batch_size: int = 64,
    max_length: int = DEFAULT_MAX_SOURCE_LENGTH,
) -> tf.data.Dataset:
    """Fixed-size classifier batches in text order: ``(tokens (B, S), labels (B,))`` int32."""
    if len(texts) != len(class_ids):
        raise ValueError(f"{len(texts)} texts but {len(class_ids)} labels")
    examples = tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(texts), dtype=tf.string), tf.constant(list(class_ids), dtype=tf.int32)))
    dataset = _classification_examples(examples, tokenizer, max_length).cache()
    return dataset.padded_batch(batch_size, padding_values=(PAD_ID, 0)).prefetch(tf.data.AUTOTUNE)
