import numpy as np
import keras
import pytest

from keras_transformer.models import BackboneConfig, build_transformer, preset


def _tiny(**overrides):
    return build_transformer("tiny", source_vocab_size=40, target_vocab_size=50, **overrides)


def _tokens(rng, batch, length, vocab, lengths=None):
    tokens = rng.integers(4, vocab, size=(batch, length)).astype("int32")
    if lengths is not None:
        tokens[np.arange(length)[None, :] >= np.asarray(lengths)[:, None]] = 0
    return tokens


@pytest.mark.parametrize("norm_first", [False, True])
def test_future_decoder_tokens_do_not_change_earlier_logits(norm_first):
    rng = np.random.default_rng(0)
    model = _tiny(norm_first=norm_first)
    source = _tokens(rng, 2, 7, 40)
    target = _tokens(rng, 2, 6, 50)
    logits = np.asarray(model({"encoder_tokens": source, "decoder_tokens": target}))
    changed = target.copy()
    changed[:, 4:] = _tokens(rng, 2, 2, 50)
    changed_logits = np.asarray(model({"encoder_tokens": source, "decoder_tokens": changed}))
    np.testing.assert_allclose(changed_logits[:, :4], logits[:, :4], atol=1e-5)
    assert not np.allclose(changed_logits[:, 4:], logits[:, 4:], atol=1e-3)


def test_extra_padding_on_either_input_does_not_change_real_logits():
    rng = np.random.default_rng(1)
    model = _tiny()
    source = _tokens(rng, 3, 6, 40, lengths=[6, 4, 2])
    target = _tokens(rng, 3, 5, 50, lengths=[5, 3, 1])
    logits = np.asarray(model({"encoder_tokens": source, "decoder_tokens": target}))
    padded_source = np.pad(source, [(0, 0), (0, 5)])
    padded_target = np.pad(target, [(0, 0), (0, 4)])
    padded = np.asarray(
        model({"encoder_tokens": padded_source, "decoder_tokens": padded_target})
    )
    real = target != 0
    np.testing.assert_allclose(padded[:, :5][real], logits[real], atol=1e-5)
    # Encoder padding alone, too.
    source_only = np.asarray(model({"encoder_tokens": padded_source, "decoder_tokens": target}))
    np.testing.assert_allclose(source_only[real], logits[real], atol=1e-5)

def test_model_round_trips_through_config_and_keras_file(tmp_path):
    rng = np.random.default_rng(2)
    model = _tiny(positional_encoding="learned", tie_output_embedding=False,
                  encoder_window=[3, None], decoder_window=[2, None])
    inputs = {"encoder_tokens": _tokens(rng, 2, 7, 40), "decoder_tokens": _tokens(rng, 2, 5, 50)}
    expected = np.asarray(model(inputs))

    clone = model.__class__.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(inputs), expected, atol=1e-6)

    model.save(tmp_path / "model.keras")
    restored = keras.saving.load_model(tmp_path / "model.keras")
    assert restored.config == model.config
    np.testing.assert_allclose(restored(inputs), expected, atol=1e-6)


@pytest.mark.parametrize("shared", [False, True])
def test_shared_vocabulary_uses_one_embedding(shared):
    model = build_transformer(
        "tiny", source_vocab_size=30, target_vocab_size=30, share_vocabulary=shared
    )
    embeddings = [w for w in model.weights if "embeddings" in w.path]
    assert len(embeddings) == (1 if shared else 2)


@pytest.mark.parametrize("grow", [False, True], ids=["preallocated", "growing"])
def test_one_token_steps_equal_the_full_decoder_pass(grow):
    rng = np.random.default_rng(3)
    model = _tiny()
    source = _tokens(rng, 2, 7, 40, lengths=[7, 3])
    target = _tokens(rng, 2, 6, 50)
    full = np.asarray(model({"encoder_tokens": source, "decoder_tokens": target}))
    encoder_outputs, encoder_mask = model.encode(source)
    cache, state = model.start_decoding(encoder_outputs, encoder_mask, max_length=8, grow=grow)
    steps = []
    for index in range(6):
        logits, cache = model.decode_token(target[:, index], index, cache, state)
        steps.append(np.asarray(logits)[:, None])
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-4)


def test_mixed_bfloat16_forward_is_finite_and_close_to_float32():
    rng = np.random.default_rng(4)
    inputs = {"encoder_tokens": _tokens(rng, 2, 9, 40), "decoder_tokens": _tokens(rng, 2, 7, 50)}
    model32 = _tiny()
    expected = np.asarray(model32(inputs))
    keras.config.set_dtype_policy("mixed_bfloat16")
    model16 = _tiny()
    model16.set_weights(model32.get_weights())
    logits = model16(inputs)
    assert logits.dtype == "float32"
    logits = np.asarray(logits)
    assert np.all(np.isfinite(logits))
    # bf16 keeps ~3 significant digits; logits of a tiny model are O(1).
    assert np.max(np.abs(logits - expected)) < 0.1 * max(1.0, np.max(np.abs(expected)))


def test_presets_match_the_paper():
    base, big = preset("base"), preset("big")
    assert (base.encoder.num_layers, base.decoder.num_layers, base.d_model, base.num_heads,
            base.intermediate_dim, base.dropout) == (6, 6, 512, 8, 2048, 0.1)
    assert (big.encoder.num_layers, big.decoder.num_layers, big.d_model, big.num_heads,
            big.intermediate_dim, big.dropout) == (6, 6, 1024, 16, 4096, 0.3)


def test_small_preset_feed_forwards_compute_silu_and_the_papers_presets_relu():
    # The demo's recipe (docs/experiments.md); the paper's base and big keep ReLU.
    probe = keras.ops.convert_to_tensor(np.linspace(-3.0, 3.0, 13, dtype="float32"))
    for name, expected in (("small", keras.activations.silu), ("base", keras.activations.relu)):
        model = build_transformer(name, source_vocab_size=40, target_vocab_size=50)
        blocks = [layer for layer in model.backbone.layers if hasattr(layer, "feed_forward")]
        assert len(blocks) == model.config.encoder.num_layers + model.config.decoder.num_layers
        for block in blocks:
            np.testing.assert_allclose(
                keras.ops.convert_to_numpy(block.feed_forward.activation(probe)),
                keras.ops.convert_to_numpy(expected(probe)), rtol=1e-6,
            )


def test_feed_forward_hidden_dropout_follows_activation_dropout_not_dropout():
    # The paper drops out sub-layer outputs only; the hidden layer's rate is its own.
    for activation_dropout in (0.0, 0.2):
        config = preset("tiny", dropout=0.3, activation_dropout=activation_dropout)
        model = build_transformer(config)
        blocks = [layer for layer in model.backbone.layers if hasattr(layer, "feed_forward")]
        assert blocks and all(b.dropout == 0.3 for b in blocks)
        assert all(b.feed_forward.dropout == activation_dropout for b in blocks)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=30, num_heads=4), r"d_model.*divisible.*num_heads.*d_model=30"),
        (dict(d_model=0), r"d_model.*positive.*d_model=0"),
        (dict(num_heads=-1), r"num_heads.*positive"),
        (dict(dropout=-0.1), r"dropout"),
        (dict(activation_dropout=1.0), r"activation_dropout"),
        (dict(decoder_window=[1, 2, 3]), r"window"),
        (dict(intermediate_dim=0), r"intermediate_dim"),
        (dict(attention_activation="sigmoid"), r"attention_activation"),
        (dict(share_vocabulary=True, source_vocab_size=10, target_vocab_size=12), "share_vocabulary"),
    ],
)
def test_bad_config_values_are_rejected_with_the_argument_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        BackboneConfig.from_dict(preset("tiny").to_dict()).replace(**overrides)


def test_unknown_preset_lists_the_accepted_names():
    with pytest.raises(ValueError, match="base.*big.*small.*tiny"):
        build_transformer("huge")


def test_summary_names_every_layer():
    lines = []
    _tiny().summary(expand_nested=True, print_fn=lambda line, **_: lines.append(line))
    text = "\n".join(lines)
    for name in ("encoder_block_1", "decoder_block_1", "source_positions", "logits"):
        assert name in text
    assert "lambda" not in text.lower()
