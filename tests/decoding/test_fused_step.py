"""The search's one-token step (fused kernels, per-layer caches, prepared masks) against
the layers' own cached path (`reference_decoding`), and the checkpoint layout it must
not change."""

import numpy as np
import keras
import pytest

from keras_transformer.constants import BOS_ID
from keras_transformer.decoding import SequenceSearch
from keras_transformer.decoding.loop import next_token_log_probs
from keras_transformer.layers import MultiHeadSelfAttention
from keras_transformer.models import build_transformer
from reference_decoding import decode_step
from reference_decoding import init_cache

# Weights of a 1+1-layer tiny model as saved before the fused decoding step (issue 18,
# listed from commit 6f5a13a): .weights.h5 checkpoints are read by these paths.
EARLIER_LAYOUT = [
    ('source_embedding/embeddings', (16, 32)),
    ('target_embedding/embeddings', (16, 32)),
    ('encoder_block_0/self_attention/query/kernel', (32, 2, 16)),
    ('encoder_block_0/self_attention/query/bias', (2, 16)),
    ('encoder_block_0/self_attention/key/kernel', (32, 2, 16)),
    ('encoder_block_0/self_attention/key/bias', (2, 16)),
    ('encoder_block_0/self_attention/value/kernel', (32, 2, 16)),
    ('encoder_block_0/self_attention/value/bias', (2, 16)),
    ('encoder_block_0/self_attention/attention_output/kernel', (2, 16, 32)),
    ('encoder_block_0/self_attention/attention_output/bias', (32,)),
    ('encoder_block_0/self_attention_norm/gamma', (32,)),
    ('encoder_block_0/self_attention_norm/beta', (32,)),
    ('encoder_block_0/feed_forward/inner_dense/kernel', (32, 64)),
    ('encoder_block_0/feed_forward/inner_dense/bias', (64,)),
    ('encoder_block_0/feed_forward/output_dense/kernel', (64, 32)),
    ('encoder_block_0/feed_forward/output_dense/bias', (32,)),
    ('encoder_block_0/feed_forward_norm/gamma', (32,)),
    ('encoder_block_0/feed_forward_norm/beta', (32,)),
    ('decoder_block_0/self_attention/query/kernel', (32, 2, 16)),
    ('decoder_block_0/self_attention/query/bias', (2, 16)),
    ('decoder_block_0/self_attention/key/kernel', (32, 2, 16)),
    ('decoder_block_0/self_attention/key/bias', (2, 16)),
    ('decoder_block_0/self_attention/value/kernel', (32, 2, 16)),
    ('decoder_block_0/self_attention/value/bias', (2, 16)),
    ('decoder_block_0/self_attention/attention_output/kernel', (2, 16, 32)),
    ('decoder_block_0/self_attention/attention_output/bias', (32,)),
    ('decoder_block_0/self_attention_norm/gamma', (32,)),
    ('decoder_block_0/self_attention_norm/beta', (32,)),
    ('decoder_block_0/cross_attention/query/kernel', (32, 2, 16)),
    ('decoder_block_0/cross_attention/query/bias', (2, 16)),
    ('decoder_block_0/cross_attention/key/kernel', (32, 2, 16)),
    ('decoder_block_0/cross_attention/key/bias', (2, 16)),
    ('decoder_block_0/cross_attention/value/kernel', (32, 2, 16)),
    ('decoder_block_0/cross_attention/value/bias', (2, 16)),
    ('decoder_block_0/cross_attention/attention_output/kernel', (2, 16, 32)),
    ('decoder_block_0/cross_attention/attention_output/bias', (32,)),
    ('decoder_block_0/cross_attention_norm/gamma', (32,)),
    ('decoder_block_0/cross_attention_norm/beta', (32,)),
    ('decoder_block_0/feed_forward/inner_dense/kernel', (32, 64)),
    ('decoder_block_0/feed_forward/inner_dense/bias', (64,)),
    ('decoder_block_0/feed_forward/output_dense/kernel', (64, 32)),
    ('decoder_block_0/feed_forward/output_dense/bias', (32,)),
    ('decoder_block_0/feed_forward_norm/gamma', (32,)),
    ('decoder_block_0/feed_forward_norm/beta', (32,)),
]


def _tokens(rng, batch, length, vocab, lengths=None):
    tokens = rng.integers(4, vocab, size=(batch, length)).astype("int32")
    for row, real in enumerate(lengths or []):
        tokens[row, real:] = 0
    return tokens


def test_variable_paths_and_shapes_are_those_of_earlier_checkpoints():
    model = build_transformer(
        "tiny", source_vocab_size=16, target_vocab_size=16, num_encoder_layers=1,
        num_decoder_layers=1,
    )
    assert [(w.path, tuple(w.shape)) for w in model.weights] == EARLIER_LAYOUT


def test_earlier_weights_file_loads_and_decodes_alike(tmp_path):
    # A checkpoint written by one model loads into a fresh one by path, and the
    # fused search of both gives the same tokens.
    keras.utils.set_random_seed(1)
    saved = build_transformer("tiny", source_vocab_size=30, target_vocab_size=30)
    saved.save_weights(tmp_path / "model.weights.h5")
    keras.utils.set_random_seed(2)
    loaded = build_transformer("tiny", source_vocab_size=30, target_vocab_size=30)
    loaded.load_weights(tmp_path / "model.weights.h5")
    source = _tokens(np.random.default_rng(0), 3, 6, 30, lengths=[6, 2, 4])
    np.testing.assert_array_equal(
        SequenceSearch(saved, max_length=8).beam_search(source)["tokens"],
        SequenceSearch(loaded, max_length=8).beam_search(source)["tokens"],
    )


@pytest.mark.parametrize(
    "overrides",
    [{}, {"norm_first": True}, {"window": 2}, {"attention_activation": "relu"}, {"activation": "silu"},
     {"share_vocabulary": True, "source_vocab_size": 50}, {"tie_output_embedding": False}],
)
@pytest.mark.parametrize(
    "grow, transpose_output_table",
    [(False, True), (True, True), (False, False)],
    # XLA's layout: preallocated caches, the tied table multiplied with transpose_b.
    ids=["preallocated", "growing", "xla"],
)
def test_fused_token_step_gives_the_logits_and_caches_of_the_layer_path(
    overrides, grow, transpose_output_table
):
    keras.utils.set_random_seed(3)
    model = build_transformer(
        "tiny", **{"source_vocab_size": 40, "target_vocab_size": 50, **overrides}
    )
    rng = np.random.default_rng(3)
    source = _tokens(rng, 2, 7, model.config.encoder.vocab_size, lengths=[7, 3])
    target = _tokens(rng, 2, 6, model.config.decoder.vocab_size)
    encoder_outputs, encoder_mask = model.encode(source)
    # The layers' path: separate query/key/value projections, per-layer caches.
    self_caches, cross_caches = init_cache(model, encoder_outputs, max_length=8)
    cache, state = model.start_decoding(encoder_outputs, encoder_mask, max_length=8, grow=grow,
                                        transpose_output_table=transpose_output_table)
    assert state["output_transposed"] == (model.config.tie_output_embedding
                                          and not transpose_output_table)
    for index in range(6):
        expected, self_caches = decode_step(
            model, target[:, index : index + 1], index, self_caches, cross_caches, encoder_mask
        )
        logits, cache = model.decode_token(target[:, index], index, cache, state)
        np.testing.assert_allclose(logits, np.asarray(expected)[:, 0], atol=1e-5)
        # A growing cache holds exactly the positions decoded so far.
        assert cache[0].shape[3] == (index + 1 if grow else 8)
    assert len(cache) == len(self_caches)
    for layer_cache, layer_path_cache in zip(cache, self_caches):
        # (2, B, H, L, D) here, (B, 2, H, L, D) on the layers' path.
        expected_cache = np.transpose(layer_path_cache, (1, 0, 2, 3, 4))
        if grow:
            expected_cache = expected_cache[:, :, :, :6]
        np.testing.assert_allclose(layer_cache, expected_cache, atol=1e-5)
    cross_caches = model.row_inputs(state)["cross_caches"]
    for block, cross_cache in zip(model.backbone.decoder_blocks, cross_caches):
        separate = block.cross_attention.compute_key_value(encoder_outputs)
        np.testing.assert_allclose(np.stack(cross_cache, axis=1), separate, atol=1e-6)


@pytest.mark.parametrize("grow", [False, True], ids=["preallocated", "growing"])
def test_a_step_reports_the_last_blocks_cross_attention_averaged_over_heads(grow):
    # What beam search's coverage penalty adds up: the teacher-forced pass's weights.
    keras.utils.set_random_seed(6)
    model = build_transformer("tiny", source_vocab_size=40, target_vocab_size=50)
    assert len(model.backbone.decoder_blocks) == 2
    rng = np.random.default_rng(6)
    source = _tokens(rng, 2, 7, 40, lengths=[7, 3])
    target = _tokens(rng, 2, 5, 50)
    expected = np.asarray(model.attention_weights(source, target)["cross"])[:, -1].mean(axis=1)
    encoder_outputs, encoder_mask = model.encode(source)
    cache, state = model.start_decoding(encoder_outputs, encoder_mask, max_length=8, grow=grow)
    for index in range(5):
        plain_logits, _ = model.decode_token(target[:, index], index, cache, state)
        logits, cache, attention = model.decode_token(
            target[:, index], index, cache, state, return_cross_attention=True
        )
        np.testing.assert_allclose(logits, plain_logits, atol=1e-6)
        np.testing.assert_allclose(attention, expected[:, index], atol=1e-5)
        np.testing.assert_allclose(np.asarray(attention)[1, 3:], 0.0)  # padding: none


def test_fused_kernel_equals_the_separate_projections():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 5, 32)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=4, causal=True)
    layer.build(x.shape)
    kernel, bias = layer.fused_kernel(("query", "key", "value"))
    fused = np.asarray(keras.ops.matmul(x, kernel) + bias).reshape(3, 5, 3, 4, 8)
    scale = 1 / np.sqrt(8)  # the query part carries the attention's 1/√D
    np.testing.assert_allclose(fused[:, :, 0], np.asarray(layer.query_dense(x)) * scale, atol=1e-6)
    np.testing.assert_allclose(fused[:, :, 1], layer.key_dense(x), atol=1e-6)
    np.testing.assert_allclose(fused[:, :, 2], layer.value_dense(x), atol=1e-6)


def test_beam_search_reorders_every_layer_cache_with_its_beam():
    # Each hypothesis must keep its own cache in every layer through the gathers,
    # which the scores check: they equal teacher-forced scores of the hypotheses.
    keras.utils.set_random_seed(5)
    model = build_transformer("tiny", source_vocab_size=30, target_vocab_size=30)
    source = _tokens(np.random.default_rng(5), 4, 6, 30, lengths=[6, 3, 5, 2])
    never = 1000
    result = SequenceSearch(model, max_length=7, beam_width=3, alpha=0.0, coverage=0.0,
                            eos_id=never).beam_search(source, max_new_tokens=7)
    tokens = np.asarray(result["tokens"])
    for beam in range(3):
        # With no end token, scores are the plain sums of the hypotheses' log-probabilities.
        decoder = np.concatenate([np.full((4, 1), BOS_ID, "int32"), tokens[:, beam, :-1]], axis=1)
        logits = model({"encoder_tokens": source, "decoder_tokens": decoder})
        log_probs = np.asarray(next_token_log_probs(logits))
        expected = np.take_along_axis(log_probs, tokens[:, beam, :, None], -1)[..., 0].sum(-1)
        np.testing.assert_allclose(result["scores"][:, beam], expected, atol=1e-3)


@pytest.mark.parametrize("grow", [False, True], ids=["preallocated", "growing"])
def test_a_step_on_row_groups_gives_the_whole_batchs_logits_caches_and_attention(grow):
    # Rows 0-1 and 2-4 run through the blocks as two groups with their own caches;
    # the output projection and the cross-attention report join them again.
    keras.utils.set_random_seed(8)
    model = build_transformer("tiny", source_vocab_size=40, target_vocab_size=50)
    rng = np.random.default_rng(8)
    source = _tokens(rng, 5, 7, 40, lengths=[7, 3, 5, 2, 6])
    target = _tokens(rng, 5, 4, 50)
    encoder_outputs, encoder_mask = model.encode(source)
    whole_cache, whole_state = model.start_decoding(encoder_outputs, encoder_mask, 8, grow=grow)
    cache, state = model.start_decoding(encoder_outputs, encoder_mask, 8, grow=grow,
                                        group_sizes=[2, 3])
    layers = len(whole_cache)
    assert [c.shape[1] for c in cache] == [2] * layers + [3] * layers
    parents = np.array([1, 1, 4, 2, 2], "int32")  # each row's parent in its own group
    for index in range(4):
        expected, whole_cache, expected_attention = model.decode_token(
            target[:, index], index, whole_cache, whole_state, return_cross_attention=True)
        logits, cache, attention = model.decode_token(
            target[:, index], index, cache, state, return_cross_attention=True)
        np.testing.assert_allclose(logits, expected, atol=1e-5)
        np.testing.assert_allclose(attention, expected_attention, atol=1e-6)
        # As beam search moves hypotheses, group by group.
        whole_cache = model.reorder_cache(whole_cache, parents, whole_state)
        cache = model.reorder_cache(cache, parents, state)
    for layer, whole_layer_cache in enumerate(whole_cache):
        joined = np.concatenate([cache[layer], cache[layers + layer]], axis=1)
        np.testing.assert_allclose(joined, whole_layer_cache, atol=1e-5)


@pytest.mark.parametrize("method", ["greedy", "beam_search"])
def test_a_step_attends_by_eigens_batched_matmul_not_onednns_or_the_fused_softmax(method):
    # Through oneDNN a batched matmul (BatchMatMulV2) or softmax on one query's tiny
    # rows costs tens of microseconds of thread hand-offs (bench/README.md): the step
    # runs BatchMatMulV3, TensorFlow's own kernel, twice per attention.
    from bench.decoding import step_op_counts

    keras.utils.set_random_seed(0)
    model = build_transformer("tiny", source_vocab_size=30, target_vocab_size=30)
    counts = step_op_counts(SequenceSearch(model, max_length=7), method)
    assert counts["BatchMatMulV2"] == counts["Softmax"] == 0, counts
    assert counts["BatchMatMulV3"] == 2 * 2 * model.config.decoder.num_layers, counts
    # One exp(log_softmax) per attention (self and cross, per layer), one for the vocabulary.
    assert counts["LogSoftmax"] == 2 * model.config.decoder.num_layers + 1, counts


@pytest.mark.parametrize("method", ["greedy", "beam_search"])
def test_a_silu_step_writes_sigmoid_through_tanh_which_onednn_does_not_fuse(method):
    # x·sigmoid(x) becomes one _MklSwish kernel, as slow as the layer's matmul on a
    # step's few rows (bench/README.md): the step spells SiLU through tanh.
    from bench.decoding import step_op_counts

    keras.utils.set_random_seed(0)
    model = build_transformer("tiny", source_vocab_size=30, target_vocab_size=30,
                              activation="silu")
    counts = step_op_counts(SequenceSearch(model, max_length=7), method)
    assert counts["Sigmoid"] == 0, counts
    assert counts["Tanh"] == model.config.decoder.num_layers, counts
