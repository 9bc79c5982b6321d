"""The training baselines: the TensorFlow tutorial's Transformer and a KerasHub one.

Shape notation: B batch, S source length, T target length, M d_model, V vocabulary.

Both take the same inputs as our model, `{"encoder_tokens": (B, S), "decoder_tokens":
(B, T)}` int32 with 0 as padding, return float32 logits (B, T, V), and train with
the tutorial's masked loss and masked accuracy.

1. `tutorial_transformer`: the design of the TensorFlow tutorial "Neural machine
   translation with a Transformer and Keras" (tensorflow.org/text/tutorials/
   transformer), layer for layer: `PositionalEmbedding` (Embedding with
   `mask_zero=True`, ×√M, sinusoidal table), post-LN blocks built from
   `keras.layers.MultiHeadAttention` (`GlobalSelfAttention`, `CausalSelfAttention`
   with `use_causal_mask=True`, `CrossAttention`), `FeedForward`, an untied output
   `Dense`, padding masks carried by Keras masking. One deliberate change: the
   tutorial passes `key_dim=d_model`, which makes every head as wide as the model
   (H times the attention projections of a standard Transformer); here
   `key_dim = d_model / num_heads`, so the baseline has the same sizes as ours.
2. `kerashub_transformer`: `keras_hub.layers.TokenAndPositionEmbedding` +
   `TransformerEncoder` / `TransformerDecoder` (post-LN, their default), as in
   KerasHub's English-to-Spanish translation example, with explicit padding masks.

`tutorial_batches` is the tutorial's input pipeline: shuffle(20000), batch(64)
sentences, tokenize, truncate to MAX_TOKENS, pad each batch to its longest row
(`RaggedTensor.to_tensor()`); no bucketing. Under XLA the widths are rounded up to
a multiple of 8 (what our own XLA path does), so that only a few shapes compile.
"""

import numpy as np

MAX_TOKENS = 128  # the tutorial's truncation length
BATCH_SIZE = 64  # the tutorial's sentences per batch
BUFFER_SIZE = 20000  # the tutorial's shuffle buffer


# --------------------------------------------------------------- the tutorial's data


def tutorial_batches(sources, targets, source_tokenizer, target_tokenizer, max_source_length,
                     max_target_length, seed=0, batch_size=BATCH_SIZE, multiple=None,
                     fixed_length=None):
    """The tutorial's `make_batches`: fixed batches of 64 padded to their longest row.

    Token content equals our pipeline's (`encode_source`/`encode_target`): only the
    batching differs. With `multiple`, each batch's source and target widths are
    rounded up to a multiple of it (for XLA, which compiles once per shape; the
    tutorial itself has no such step).
    With `fixed_length`, every batch is padded to that width instead (the
    "padded to a fixed length" design that issue 3 names as its baseline).
    """
    import tensorflow as tf

    from keras_transformer.data.pipeline import encode_source
    from keras_transformer.data.pipeline import encode_target

    source_length = min(max_source_length, MAX_TOKENS)
    target_length = min(max_target_length, MAX_TOKENS + 1)

    def round_up(tensor):
        if fixed_length is not None:
            return tf.pad(tensor, [[0, 0], [0, fixed_length - tf.shape(tensor)[1]]])
        if multiple is None:
            return tensor
        width = tf.shape(tensor)[1]
        return tf.pad(tensor, [[0, 0], [0, (width + multiple - 1) // multiple * multiple - width]])

    def prepare_batch(source, target):
        encoder = encode_source(source_tokenizer, source, source_length)
        decoder, labels = encode_target(target_tokenizer, target, target_length)
        return (
            {"encoder_tokens": round_up(encoder.to_tensor()),
             "decoder_tokens": round_up(decoder.to_tensor())},
            round_up(labels.to_tensor()),
        )

    return (
        tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))
        .shuffle(BUFFER_SIZE, seed=seed)
        .batch(batch_size)
        .map(prepare_batch, tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def masked_loss(label, pred):
    """The tutorial's loss: cross-entropy averaged over non-padding labels."""
    import keras
    import tensorflow as tf

    mask = label != 0
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    loss = loss_object(label, pred)
    mask = tf.cast(mask, dtype=loss.dtype)
    loss *= mask
    return tf.reduce_sum(loss) / tf.reduce_sum(mask)


def masked_accuracy(label, pred):
    """The tutorial's metric: arg-max accuracy over non-padding labels."""
    import tensorflow as tf

    pred = tf.argmax(pred, axis=2)
    label = tf.cast(label, pred.dtype)
    match = (label == pred) & (label != 0)
    return tf.reduce_sum(tf.cast(match, tf.float32)) / tf.reduce_sum(
        tf.cast(label != 0, tf.float32))


# -------------------------------------------------------------- the tutorial's model


def _positional_encoding(length, depth):
    depth = depth / 2
    positions = np.arange(length)[:, np.newaxis]
    depths = np.arange(depth)[np.newaxis, :] / depth
    angle_rads = positions * (1 / (10000**depths))
    return np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1).astype(np.float32)


def tutorial_transformer(config):
    """The tutorial's `Transformer` at the sizes of a encoder–decoder `BackboneConfig`."""
    import keras
    import tensorflow as tf

    class PositionalEmbedding(keras.layers.Layer):
        def __init__(self, vocab_size, d_model):
            super().__init__()
            self.d_model = d_model
            self.embedding = keras.layers.Embedding(vocab_size, d_model, mask_zero=True)
            self.pos_encoding = tf.constant(_positional_encoding(length=2048, depth=d_model))

        def compute_mask(self, *args, **kwargs):
            return self.embedding.compute_mask(*args, **kwargs)

        def call(self, x):
            length = tf.shape(x)[1]
            x = self.embedding(x)
            x *= tf.math.sqrt(tf.cast(self.d_model, x.dtype))
            return x + tf.cast(self.pos_encoding[tf.newaxis, :length, :], x.dtype)

    class BaseAttention(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__()
            self.mha = keras.layers.MultiHeadAttention(**kwargs)
            self.layernorm = keras.layers.LayerNormalization()
            self.add = keras.layers.Add()

    class CrossAttention(BaseAttention):
        def call(self, x, context):
            attn_output = self.mha(query=x, key=context, value=context)
            return self.layernorm(self.add([x, attn_output]))

    class GlobalSelfAttention(BaseAttention):
        def call(self, x):
            attn_output = self.mha(query=x, value=x, key=x)
            return self.layernorm(self.add([x, attn_output]))

    class CausalSelfAttention(BaseAttention):
        def call(self, x):
            attn_output = self.mha(query=x, value=x, key=x, use_causal_mask=True)
            return self.layernorm(self.add([x, attn_output]))

    class FeedForward(keras.layers.Layer):
        def __init__(self, d_model, dff, dropout_rate=0.1):
            super().__init__()
            self.seq = keras.Sequential([
                keras.layers.Dense(dff, activation="relu"),
                keras.layers.Dense(d_model),
                keras.layers.Dropout(dropout_rate),
            ])
            self.add = keras.layers.Add()
            self.layer_norm = keras.layers.LayerNormalization()

        def call(self, x):
            return self.layer_norm(self.add([x, self.seq(x)]))

    class EncoderLayer(keras.layers.Layer):
        def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
            super().__init__()
            self.self_attention = GlobalSelfAttention(
                num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate)
            self.ffn = FeedForward(d_model, dff, dropout_rate)

        def call(self, x):
            return self.ffn(self.self_attention(x))

    class Encoder(keras.layers.Layer):
        def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
            super().__init__()
            self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
            self.enc_layers = [
                EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                             dropout_rate=dropout_rate)
                for _ in range(num_layers)]
            self.dropout = keras.layers.Dropout(dropout_rate)

        def call(self, x):
            x = self.dropout(self.pos_embedding(x))
            for layer in self.enc_layers:
                x = layer(x)
            return x

    class DecoderLayer(keras.layers.Layer):
        def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
            super().__init__()
            key_dim = d_model // num_heads
            self.causal_self_attention = CausalSelfAttention(
                num_heads=num_heads, key_dim=key_dim, dropout=dropout_rate)
            self.cross_attention = CrossAttention(
                num_heads=num_heads, key_dim=key_dim, dropout=dropout_rate)
            self.ffn = FeedForward(d_model, dff, dropout_rate)

        def call(self, x, context):
            x = self.causal_self_attention(x=x)
            x = self.cross_attention(x=x, context=context)
            return self.ffn(x)

    class Decoder(keras.layers.Layer):
        def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
            super().__init__()
            self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
            self.dropout = keras.layers.Dropout(dropout_rate)
            self.dec_layers = [
                DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                             dropout_rate=dropout_rate)
                for _ in range(num_layers)]

        def call(self, x, context):
            x = self.dropout(self.pos_embedding(x))
            for layer in self.dec_layers:
                x = layer(x, context)
            return x

    class Transformer(keras.Model):
        def __init__(self, *, num_layers, d_model, num_heads, dff, input_vocab_size,
                     target_vocab_size, dropout_rate=0.1):
            super().__init__()
            self.encoder = Encoder(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                   dff=dff, vocab_size=input_vocab_size,
                                   dropout_rate=dropout_rate)
            self.decoder = Decoder(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                   dff=dff, vocab_size=target_vocab_size,
                                   dropout_rate=dropout_rate)
            # float32 logits under a mixed policy, as the mixed-precision guide does.
            self.final_layer = keras.layers.Dense(target_vocab_size, dtype="float32")

        def call(self, inputs):
            context = self.encoder(inputs["encoder_tokens"])
            x = self.decoder(inputs["decoder_tokens"], context)
            logits = self.final_layer(x)
            try:
                # Drop the keras mask, so it doesn't scale the losses/metrics.
                del logits._keras_mask
            except AttributeError:
                pass
            return logits

    if config.encoder.num_layers != config.decoder.num_layers:
        raise ValueError("The tutorial's model has as many encoder as decoder layers.")
    return Transformer(
        num_layers=config.encoder.num_layers, d_model=config.d_model,
        num_heads=config.num_heads, dff=config.intermediate_dim,
        input_vocab_size=config.encoder.vocab_size,
        target_vocab_size=config.decoder.vocab_size, dropout_rate=config.dropout)


# -------------------------------------------------------------------- KerasHub model


def kerashub_transformer(config, sequence_length):
    """An encoder-decoder from KerasHub's layers at the sizes of a encoder–decoder `BackboneConfig`.

    Raises:
        ImportError: when keras-hub is not installed.
    """
    import keras
    import keras_hub

    encoder_tokens = keras.Input(shape=(None,), dtype="int32", name="encoder_tokens")
    decoder_tokens = keras.Input(shape=(None,), dtype="int32", name="decoder_tokens")
    encoder_mask = keras.ops.not_equal(encoder_tokens, 0)
    decoder_mask = keras.ops.not_equal(decoder_tokens, 0)
    x = keras_hub.layers.TokenAndPositionEmbedding(
        config.encoder.vocab_size, sequence_length, config.d_model)(encoder_tokens)
    for _ in range(config.encoder.num_layers):
        x = keras_hub.layers.TransformerEncoder(
            intermediate_dim=config.intermediate_dim, num_heads=config.num_heads,
            dropout=config.dropout)(x, padding_mask=encoder_mask)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        config.decoder.vocab_size, sequence_length, config.d_model)(decoder_tokens)
    for _ in range(config.decoder.num_layers):
        y = keras_hub.layers.TransformerDecoder(
            intermediate_dim=config.intermediate_dim, num_heads=config.num_heads,
            dropout=config.dropout)(
            y, x, decoder_padding_mask=decoder_mask, encoder_padding_mask=encoder_mask)
    logits = keras.layers.Dense(config.decoder.vocab_size, dtype="float32")(y)
    return keras.Model({"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
                       logits, name="kerashub_transformer")
