"""The one backbone of every model: embeddings, positions and block stacks.

Encoder–decoder (the translator), encoder-only (the classifier) or decoder-only
(the language model), by the stacks its `BackboneConfig` has. The task heads
(`Seq2SeqTransformer`, `LanguageModel`, `EncoderClassifier`) add the output
projection or the pooled classifier on top.

Shape notation: B batch, S encoder length, T decoder length, M model width.
In the layer names, "source" is what the encoder reads and "target" what the
decoder reads (and, through its tied embedding, predicts).
"""

import keras

from keras_transformer.layers.decoder import DecoderBlock
from keras_transformer.layers.encoder import EncoderBlock
from keras_transformer.layers.normalization import LayerNormalization
from keras_transformer.layers.padding_mask import PaddingMask
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.models.config import BackboneConfig
from keras_transformer.models.incremental import DecoderStack


def _token_embedding(config, vocab_size, tie_weights, name):
    """A `ReversibleEmbedding` (V, M), its reverse pass the output projection when tied."""
    return keras.layers.ReversibleEmbedding(
        vocab_size,
        config.d_model,
        tie_weights=tie_weights,
        # The paper's N(0, M^-1/2) initialisation pairs with the √M input scaling.
        embeddings_initializer=keras.initializers.RandomNormal(stddev=config.d_model**-0.5),
        name=name,
    )


def _block_options(config, window):
    """The `EncoderBlock`/`DecoderBlock` arguments a config sets, for one block's window."""
    return dict(
        num_heads=config.num_heads,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        layer_norm_epsilon=config.layer_norm_epsilon,
        window=window,
        attention_activation=config.attention_activation,
    )


def _output_norm(config, name):
    """The LayerNormalization after a pre-LN stack; None for post-LN."""
    if not config.norm_first:
        return None
    return LayerNormalization(epsilon=config.layer_norm_epsilon, name=name)


def _positions(config, name):
    return PositionalEncoding(
        max_length=config.max_length, kind=config.positional_encoding, name=name
    )


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerBackbone(keras.Model):
    """Token embeddings + positions → encoder blocks and/or decoder blocks, as a
    functional Keras model; the task heads are built on it.

    With an encoder and a decoder, the decoder blocks cross-attend to the
    encoder's output; a decoder alone is causal (GPT-style); an encoder alone is
    bidirectional (BERT-style). Pre-LN stacks (`norm_first`) end in a
    LayerNormalization.

    Inputs: a dict with "encoder_tokens" (B, S) int32 when there is an encoder
    and "decoder_tokens" (B, T) int32 when there is a decoder; 0 is padding.

    Outputs: a dict of the last stack's: with a decoder, "decoder_sequence_output"
    (B, T, M); an encoder alone, "encoder_sequence_output" (B, S, M) and
    "encoder_padding_mask" (B, S) booleans (True for real tokens). An
    encoder–decoder's encoder output is `encode`'s, as decoding reads it; left out
    of the outputs, the graph orders the layers (and so the weights) as the
    checkpoints of `tests/decoding/test_fused_step.py` list them.

    The layers are attributes, for the heads and for decoding one token at a
    time: `source_embedding`, `source_positions`, `encoder_blocks`,
    `encoder_output_norm` (None in post-LN); `target_embedding`,
    `target_positions`, `decoder_blocks`, `decoder_output_norm`; a stack the
    shape lacks has None and [] there. With `share_vocabulary` the two
    embeddings are one layer ("shared_embedding").

    Args:
        config: a `BackboneConfig` (or its dict).
        **kwargs: `keras.Model` arguments such as `name`.

    Example:
        >>> backbone = TransformerBackbone(preset("tiny", DECODER_ONLY, target_vocab_size=50))
        >>> backbone({"decoder_tokens": keras.ops.ones((2, 7), "int32")})[
        ...     "decoder_sequence_output"].shape
        (2, 7, 32)
    """

    def __init__(self, config, **kwargs):
        if isinstance(config, dict):
            config = BackboneConfig.from_dict(config)
        encoder, decoder = config.encoder, config.decoder
        source_embedding = target_embedding = None
        if encoder is not None:
            source_embedding = _token_embedding(
                config,
                encoder.vocab_size,
                # Only a shared embedding is also the output projection; an encoder's
                # own is never reversed and must not carry an unused projection matrix.
                tie_weights=config.tie_output_embedding or not config.share_vocabulary,
                name="shared_embedding" if config.share_vocabulary else "source_embedding",
            )
        if decoder is not None:
            target_embedding = (
                source_embedding
                if config.share_vocabulary
                else _token_embedding(
                    config,
                    decoder.vocab_size,
                    tie_weights=config.tie_output_embedding,
                    name="target_embedding",
                )
            )
        has_encoder, has_decoder = encoder is not None, decoder is not None
        # The layers first (as KerasHub's backbones), so that the functional graph below
        # is built by `encode` and `decode`, the very code decoding runs.
        self.config = config
        # Assigned in the order of the graph's layers, which `weights` follows.
        self.source_embedding = source_embedding
        self.target_embedding = target_embedding
        self.source_mask = PaddingMask(name="encoder_padding_mask") if has_encoder else None
        self.source_positions = _positions(config, "source_positions") if has_encoder else None
        self.source_dropout = (
            keras.layers.Dropout(config.dropout, name="source_embedding_dropout")
            if has_encoder else None
        )
        self.encoder_blocks = [
            EncoderBlock(**_block_options(config, window), name=f"encoder_block_{i}")
            for i, window in enumerate(encoder.windows() if has_encoder else [])
        ]
        self.encoder_output_norm = (
            _output_norm(config, "encoder_output_norm") if has_encoder else None
        )
        self.target_mask = PaddingMask(name="decoder_padding_mask") if has_decoder else None
        self.target_positions = _positions(config, "target_positions") if has_decoder else None
        self.target_dropout = (
            keras.layers.Dropout(config.dropout, name="target_embedding_dropout")
            if has_decoder else None
        )
        self.decoder_blocks = [
            DecoderBlock(
                **_block_options(config, window),
                cross_attention=has_encoder,
                name=f"decoder_block_{i}",
            )
            for i, window in enumerate(decoder.windows() if has_decoder else [])
        ]
        self.decoder_output_norm = (
            _output_norm(config, "decoder_output_norm") if has_decoder else None
        )

        inputs, outputs = {}, {}
        encoder_outputs = encoder_mask = None
        if has_encoder:
            inputs["encoder_tokens"] = keras.Input(
                shape=(None,), dtype="int32", name="encoder_tokens"
            )
            encoder_outputs, encoder_mask = self.encode(inputs["encoder_tokens"])
            if not has_decoder:
                outputs["encoder_sequence_output"] = encoder_outputs
                outputs["encoder_padding_mask"] = encoder_mask
        if has_decoder:
            inputs["decoder_tokens"] = keras.Input(
                shape=(None,), dtype="int32", name="decoder_tokens"
            )
            outputs["decoder_sequence_output"] = self.decode(
                inputs["decoder_tokens"], encoder_outputs, encoder_mask
            )
        super().__init__(inputs=inputs, outputs=outputs, **{"name": "backbone", **kwargs})

    def encode(self, encoder_tokens, training=None):
        """Runs the encoder: (B, S) ids → ((B, S, M) outputs, (B, S) padding mask)."""
        encoder_mask = self.source_mask(encoder_tokens)
        x = self.source_positions(self.source_embedding(encoder_tokens))
        x = self.source_dropout(x, training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=encoder_mask, training=training)
        if self.encoder_output_norm is not None:
            x = self.encoder_output_norm(x)
        return x, encoder_mask

    def decode(self, decoder_tokens, encoder_outputs=None, encoder_padding_mask=None,
               training=None):
        """Runs the decoder on whole prefixes: (B, T) ids → (B, T, M), after the
        final norm in pre-LN. `encoder_outputs` (B, S, M) and `encoder_padding_mask`
        (B, S) come from `encode` when there is an encoder."""
        decoder_mask = self.target_mask(decoder_tokens)
        x = self.target_positions(self.target_embedding(decoder_tokens))
        x = self.target_dropout(x, training=training)
        for block in self.decoder_blocks:
            if self.config.encoder is not None:
                x = block(
                    x,
                    encoder_outputs,
                    decoder_padding_mask=decoder_mask,
                    encoder_padding_mask=encoder_padding_mask,
                    training=training,
                )
            else:
                x = block(x, decoder_padding_mask=decoder_mask, training=training)
        if self.decoder_output_norm is not None:
            x = self.decoder_output_norm(x)
        return x

    @property
    def decoder_stack(self):
        """The decoder's layers as a `DecoderStack` (what `decode_token` runs)."""
        return DecoderStack(
            embedding=self.target_embedding,
            positions=self.target_positions,
            blocks=self.decoder_blocks,
            output_norm=self.decoder_output_norm,
            num_heads=self.config.num_heads,
            d_model=self.config.d_model,
        )

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)
