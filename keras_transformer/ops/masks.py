"""The one place where attention masks are made.

Shape notation: B batch, T queries, S keys.

A padding mask is (B, L) booleans, True for real tokens. An attention mask is
(B, T, S) booleans, True where query t may attend to key s. Every block builds its
attention mask with `compute_attention_mask`, which combines padding, causality and
a local window with a logical AND.
"""

from keras import ops

from keras_transformer.constants import PAD_ID


def padding_mask(token_ids, pad_id=PAD_ID):
    """Returns the (B, L) boolean mask that is True where `token_ids != pad_id`."""
    return ops.not_equal(token_ids, pad_id)


def resolve_padding_mask(padding_mask=None, keras_mask=None):
    """The padding mask a block uses: the explicit one if given, else the Keras mask
    its input carries (e.g. from `Embedding(mask_zero=True)`), else None.

    Args:
        padding_mask: optional explicit (B, L) booleans, True for real tokens.
        keras_mask: optional (B, L) Keras mask of the same input.

    Returns:
        (B, L) booleans or None.
    """
    mask = keras_mask if padding_mask is None else padding_mask
    return None if mask is None else ops.cast(mask, "bool")


def compute_attention_mask(
    query_length,
    key_length,
    query_padding_mask=None,
    key_padding_mask=None,
    causal=False,
    window=None,
    query_offset=0,
    attention_mask=None,
):
    """Combines padding, causal and window constraints into one attention mask.

    Query t sits at absolute position `query_offset + t`, key s at position s, so the
    same helper serves a full pass (offset 0) and a cached decoding step (offset = the
    cache index, keys = the whole preallocated cache: keys not yet written lie in the
    future and the causal constraint hides them).

    Args:
        query_length: T, a Python int or scalar tensor.
        key_length: S, a Python int or scalar tensor.
        query_padding_mask: optional (B, T) booleans, True for real queries.
        key_padding_mask: optional (B, S) booleans, True for real keys.
        causal: if True, query position i sees only key positions j <= i.
        window: optional int w; query position i sees only keys with |i - j| <= w.
        query_offset: absolute position of the first query (int or scalar tensor).
        attention_mask: optional explicit (B, T, S) booleans, ANDed with the rest.

    Returns:
        A (B or 1, T, S) boolean tensor, or None when nothing is masked.
    """
    mask = None

    def combine(current, new):
        return new if current is None else ops.logical_and(current, new)

    if causal or window is not None:
        query_positions = ops.arange(query_length, dtype="int32") + ops.cast(
            query_offset, "int32"
        )
        key_positions = ops.arange(key_length, dtype="int32")
        distance = query_positions[:, None] - key_positions[None, :]  # (T, S): i - j
        if causal:
            mask = combine(mask, ops.greater_equal(distance, 0)[None])
        if window is not None:
            mask = combine(mask, ops.less_equal(ops.abs(distance), window)[None])
    if key_padding_mask is not None:
        mask = combine(mask, ops.cast(key_padding_mask, "bool")[:, None, :])
    if query_padding_mask is not None:
        mask = combine(mask, ops.cast(query_padding_mask, "bool")[:, :, None])
    if attention_mask is not None:
        mask = combine(mask, ops.cast(attention_mask, "bool"))
    return mask
