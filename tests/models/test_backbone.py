"""The one backbone: its three shapes, their configs, and the heads built on it."""

import json

import keras
import numpy as np
import pytest

from keras_transformer.layers import DecoderBlock, EncoderBlock
from keras_transformer.models import (
    DECODER_ONLY,
    ENCODER_DECODER,
    ENCODER_ONLY,
    BackboneConfig,
    EncoderClassifier,
    LanguageModel,
    Seq2SeqTransformer,
    TransformerBackbone,
    preset,
)

TOKENS = np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")


def _config(shape, **settings):
    return preset("tiny", shape, vocab_size=30, **settings)


@pytest.mark.parametrize(
    "shape, inputs, outputs",
    [
        (ENCODER_DECODER, {"encoder_tokens", "decoder_tokens"}, {"decoder_sequence_output"}),
        (ENCODER_ONLY, {"encoder_tokens"}, {"encoder_sequence_output", "encoder_padding_mask"}),
        (DECODER_ONLY, {"decoder_tokens"}, {"decoder_sequence_output"}),
    ],
)
def test_each_shape_has_the_stacks_its_config_names(shape, inputs, outputs):
    backbone = TransformerBackbone(_config(shape))
    result = backbone({name: TOKENS for name in inputs})
    assert set(result) == outputs
    for name in outputs - {"encoder_padding_mask"}:
        assert tuple(result[name].shape) == (2, 4, 32)
    encoders = [layer for layer in backbone.layers if isinstance(layer, EncoderBlock)]
    decoders = [layer for layer in backbone.layers if isinstance(layer, DecoderBlock)]
    assert len(encoders) == (2 if "encoder_tokens" in inputs else 0)
    assert len(decoders) == (2 if "decoder_tokens" in inputs else 0)
    # A decoder cross-attends exactly when there is an encoder to attend to.
    assert all(block.has_cross_attention == bool(encoders) for block in decoders)


def test_a_shapes_config_has_no_field_of_a_stack_it_lacks():
    stored = {shape: _config(shape).to_dict() for shape in (ENCODER_DECODER, ENCODER_ONLY, DECODER_ONLY)}
    assert "encoder" not in stored[DECODER_ONLY] and "decoder" not in stored[ENCODER_ONLY]
    assert "share_vocabulary" in stored[ENCODER_DECODER]
    assert "share_vocabulary" not in stored[DECODER_ONLY]
    assert "share_vocabulary" not in stored[ENCODER_ONLY]
    assert "tie_output_embedding" not in stored[ENCODER_ONLY]
    for values in stored.values():  # the JSON of config.json reads back to the same config
        assert BackboneConfig.from_json(json.dumps(values)) == BackboneConfig.from_dict(values)


@pytest.mark.parametrize(
    "shape, settings, message",
    [
        (DECODER_ONLY, dict(num_encoder_layers=3), "no encoder"),
        (ENCODER_ONLY, dict(target_vocab_size=9), "no decoder"),
        (DECODER_ONLY, dict(share_vocabulary=True), "share_vocabulary"),
        (ENCODER_ONLY, dict(tie_output_embedding=False), "tie_output_embedding"),
        (ENCODER_DECODER, dict(d_ff=64), r"Unknown.*d_ff.*intermediate_dim"),
    ],
)
def test_a_setting_the_shape_cannot_take_is_refused_by_name(shape, settings, message):
    with pytest.raises(ValueError, match=message):
        _config(shape, **settings)


def test_a_preset_has_the_same_values_in_every_shape():
    def shared(config):  # the fields every shape has
        return {name: value for name, value in config.to_dict().items()
                if name not in ("encoder", "decoder", "share_vocabulary", "tie_output_embedding")}

    for name in ("tiny", "small", "base", "big"):
        full, encoder, decoder = (preset(name, shape) for shape in
                                  (ENCODER_DECODER, ENCODER_ONLY, DECODER_ONLY))
        assert shared(full) == shared(encoder) == shared(decoder)
        assert full.encoder == full.decoder == encoder.encoder == decoder.decoder


def test_window_and_vocabulary_settings_reach_every_stack_the_backbone_has():
    config = preset("tiny", window=3, vocab_size=21)
    assert config.encoder.windows() == config.decoder.windows() == [3, 3]
    assert config.encoder.vocab_size == config.decoder.vocab_size == 21
    backbone = TransformerBackbone(config.replace(decoder_window=[None, 2]))
    assert [block.self_attention.window for block in backbone.decoder_blocks] == [None, 2]
    assert [block.self_attention.window for block in backbone.encoder_blocks] == [3, 3]


def test_block_options_reach_the_layers_under_their_names():
    config = preset("tiny", DECODER_ONLY, vocab_size=30, intermediate_dim=48,
                    attention_activation="relu")
    block = TransformerBackbone(config).decoder_blocks[0]
    assert block.intermediate_dim == block.feed_forward.intermediate_dim == 48
    assert block.feed_forward.inner_dense.kernel.shape == (32, 48)
    assert block.self_attention.attention_activation == "relu"


@pytest.mark.parametrize(
    "head, shape, inputs",
    [
        (lambda backbone: Seq2SeqTransformer(backbone), ENCODER_DECODER,
         {"encoder_tokens": TOKENS, "decoder_tokens": TOKENS}),
        (lambda backbone: LanguageModel(backbone), DECODER_ONLY, TOKENS),
        (lambda backbone: EncoderClassifier(backbone, num_classes=3), ENCODER_ONLY, TOKENS),
    ],
)
def test_a_head_runs_on_the_backbone_it_is_given(head, shape, inputs):
    backbone = TransformerBackbone(_config(shape))
    model = head(backbone)
    assert model.backbone is backbone
    # Every weight of the backbone is the head's, the same variable, not a copy.
    head_weights = {id(weight) for weight in model.weights}
    assert {id(weight) for weight in backbone.weights} <= head_weights
    before = np.asarray(model(inputs))
    table = backbone.weights[0]
    table.assign(np.asarray(table) * 3.0)
    assert not np.allclose(np.asarray(model(inputs)), before)


def test_language_model_logits_are_the_backbones_output_through_the_tied_embedding():
    model = LanguageModel(_config(DECODER_ONLY, norm_first=True))
    sequence = model.backbone({"decoder_tokens": TOKENS})["decoder_sequence_output"]
    table = np.asarray(model.backbone.target_embedding.embeddings)
    np.testing.assert_allclose(np.asarray(model(TOKENS)), np.asarray(sequence) @ table.T, atol=1e-5)


@pytest.mark.parametrize("shape", [ENCODER_DECODER, ENCODER_ONLY, DECODER_ONLY])
def test_backbone_round_trips_through_config_and_keras_file(shape, tmp_path):
    keras.utils.set_random_seed(4)
    backbone = TransformerBackbone(_config(shape, norm_first=True, decoder_window=[2, None])
                                   if shape != ENCODER_ONLY else _config(shape, norm_first=True))
    inputs = {name: TOKENS for name in backbone.input}
    expected = backbone(inputs)
    clone = TransformerBackbone.from_config(backbone.get_config())
    assert clone.config == backbone.config
    clone.set_weights(backbone.get_weights())
    backbone.save(tmp_path / "backbone.keras")
    restored = keras.saving.load_model(tmp_path / "backbone.keras")
    assert isinstance(restored, TransformerBackbone) and restored.config == backbone.config
    for copy in (clone, restored):
        result = copy(inputs)
        for name, value in expected.items():
            np.testing.assert_allclose(np.asarray(result[name]), np.asarray(value), atol=1e-6)
