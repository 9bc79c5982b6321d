"""`export --format ctranslate2`: a translator run as a CTranslate2 model folder.

CTranslate2 (OpenNMT's C++ inference engine; the optional extra `ctranslate2`) runs
a Transformer described by its `TransformerSpec`. This module is the one place that
reads our translator's weights for it, through the layer objects (so a renamed
config field or layer is a one-place fix here), and fills the spec through
CTranslate2's public Python converter API (`ctranslate2.converters.Converter`).

Layout of the folder (`<base>/<name>/ctranslate2-<quantization>/`: a non-numeric
name, which TF Serving and our server skip beside the SavedModel versions):
    model.bin, config.json, shared_vocabulary or source/target_vocabulary.json
                                     CTranslate2's model, its weights quantized
    source.model, target.model       the SentencePiece models
    manifest.json                    what the translator needs: the source prefix,
                                     the source and output length caps (the search's
                                     settings are the translator's, per call)

What CTranslate2's spec cannot represent is refused with one line: a local
attention window, ReLU-normalised attention, RMS normalisation, a logit soft cap.
"""

import json
import os
import shutil

import numpy as np

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import UNK_ID

# CTranslate2's weight types offered by `export --ct2-quantization` (its CPU ones).
CTRANSLATE2_QUANTIZATIONS = ("int8", "int8_float32", "int8_bfloat16", "bfloat16", "float32")
MANIFEST_FILE = "manifest.json"
FORMAT = "ctranslate2"
# Our activations' names in CTranslate2's `Activation` enum (Keras' "gelu" is the
# exact, erf-based one, CTranslate2's GELU; "silu" is its SWISH).
_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}


def ctranslate2_folder(base, name, quantization):
    """`<base>/<name>/ctranslate2-<quantization>`: where `export --format ctranslate2` writes."""
    return os.path.join(base, name, f"{FORMAT}-{quantization}")


def is_ctranslate2_folder(path):
    """Whether `path` is a CTranslate2 model folder written by this module."""
    return os.path.isfile(os.path.join(path, "model.bin")) and os.path.isfile(
        os.path.join(path, MANIFEST_FILE))


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError as error:
        raise ValueError(
            "the CTranslate2 format needs the optional package: pip install "
            "'keras-transformer[ctranslate2]' (ctranslate2==4.8.5)"
        ) from error
    return ctranslate2


def _array(tensor):
    return np.asarray(tensor, dtype=np.float32)


def _activation_name(function):
    import keras

    return keras.activations.serialize(function)


def check_representable(model):
    """Raises `ValueError` (one line) unless CTranslate2's TransformerSpec can run `model`."""
    layers = model.backbone
    blocks = layers.encoder_blocks + layers.decoder_blocks
    windows = sorted({block.window for block in blocks if block.window is not None})
    if windows:
        raise ValueError(
            f"CTranslate2 cannot represent a local attention window (this model's: "
            f"{', '.join(map(str, windows))}); export it as a SavedModel instead."
        )
    attention_activations = {block.attention_activation for block in blocks} - {"softmax"}
    if attention_activations:
        raise ValueError(
            f"CTranslate2 cannot represent {'/'.join(sorted(attention_activations))} attention "
            "(softmax only); export it as a SavedModel instead."
        )
    activations = {_activation_name(block.activation) for block in blocks}
    unknown = sorted(activations - set(_ACTIVATIONS))
    if unknown:
        raise ValueError(f"CTranslate2 has no {', '.join(unknown)} activation here "
                         f"(accepted: {', '.join(_ACTIVATIONS)}).")
    if len({block.norm_first for block in blocks}) != 1:
        raise ValueError("CTranslate2 needs every layer pre-norm or every layer post-norm.")
    norms = [getattr(block, name) for block in blocks
             for name in ("self_attention_norm", "feed_forward_norm")]
    if any(norm.rms_scaling for norm in norms):
        raise ValueError("CTranslate2's Transformer here takes layer normalization, not RMS "
                         "scaling; export it as a SavedModel instead.")
    for embedding in (layers.source_embedding, layers.target_embedding):
        if embedding.logit_soft_cap is not None:
            raise ValueError("CTranslate2's TransformerSpec has no logit soft cap; export it "
                             "as a SavedModel instead.")
        if embedding.quantization_mode is not None:
            raise ValueError("convert the float model: CTranslate2 quantizes it itself "
                             "(--ct2-quantization).")


def _set_norm(spec, norm):
    spec.gamma = _array(norm.gamma)
    spec.beta = (np.zeros_like(spec.gamma) if norm.beta is None else _array(norm.beta))


def _set_linear(spec, kernels, biases):
    """A CTranslate2 linear layer (out, in) from our (in, ...) kernels side by side."""
    flat = [_array(kernel).reshape(kernel.shape[0], -1) for kernel in kernels]
    spec.weight = np.concatenate(flat, axis=1).T.copy()
    if all(bias is not None for bias in biases):
        spec.bias = np.concatenate([_array(bias).reshape(-1) for bias in biases])


def _set_projection(spec, projections):
    _set_linear(spec, [p.kernel for p in projections], [p.bias for p in projections])


def _merge_projection(spec, projection):
    kernel = _array(projection.kernel)  # (H, D, M)
    _set_linear(spec, [kernel.reshape(-1, kernel.shape[-1])], [projection.bias])


def _set_attention(spec, attention, norm, cross):
    _set_norm(spec.layer_norm, norm)
    if cross:
        _set_projection(spec.linear[0], [attention.query_dense])
        _set_projection(spec.linear[1], [attention.key_dense, attention.value_dense])
    else:
        _set_projection(spec.linear[0],
                        [attention.query_dense, attention.key_dense, attention.value_dense])
    _merge_projection(spec.linear[-1], attention.output_dense)


def _set_feed_forward(spec, block):
    _set_norm(spec.layer_norm, block.feed_forward_norm)
    for linear, dense in ((spec.linear_0, block.feed_forward.inner_dense),
                          (spec.linear_1, block.feed_forward.output_dense)):
        _set_linear(linear, [dense.kernel], [dense.bias])


def _set_stack(spec, positions, output_norm, length):
    spec.scale_embeddings = bool(positions.scale_embeddings)
    spec.position_encodings.encodings = _array(positions.position_signal(length))
    if output_norm is not None:
        _set_norm(spec.layer_norm, output_norm)


def transformer_spec(model, source_pieces, target_pieces, source_positions=None):
    """The `ctranslate2.specs.TransformerSpec` of a `Seq2SeqTransformer`, weights set.

    CTranslate2 reads positions from a table (ours computes sinusoids for any
    length), and reading past its end crashes the process: the encoder's table
    covers `source_positions`, the decoder's the model's `max_length`.

    Args:
        model: a float `Seq2SeqTransformer` (`check_representable` passes).
        source_pieces: the source SentencePiece model's pieces, in id order.
        target_pieces: the target model's pieces.
        source_positions: rows of the encoder's position table (default: the
            model's `max_length`; a learned table has no more).

    Returns:
        A spec ready for `Converter.convert` (which validates, quantizes and saves it).
    """
    ctranslate2 = import_ctranslate2()
    check_representable(model)
    layers = model.backbone
    first = layers.encoder_blocks[0]
    spec = ctranslate2.specs.TransformerSpec.from_config(
        (len(layers.encoder_blocks), len(layers.decoder_blocks)),
        first.num_heads,
        pre_norm=first.norm_first,
        activation=getattr(ctranslate2.specs.Activation,
                           _ACTIVATIONS[_activation_name(first.activation)]),
    )
    max_length = layers.target_positions.max_length
    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = _array(layers.source_embedding.embeddings)
    if layers.source_positions.kind == "learned" or source_positions is None:
        source_positions = max_length
    _set_stack(encoder, layers.source_positions, layers.encoder_output_norm, source_positions)
    for layer_spec, block in zip(encoder.layer, layers.encoder_blocks):
        _set_attention(layer_spec.self_attention, block.self_attention,
                       block.self_attention_norm, cross=False)
        _set_feed_forward(layer_spec.ffn, block)
    target = layers.target_embedding
    decoder.embeddings.weight = _array(target.embeddings)
    _set_stack(decoder, layers.target_positions, layers.decoder_output_norm, max_length)
    decoder.projection.weight = _array(
        target.embeddings if target.tie_weights else np.transpose(target.reverse_embeddings))
    for layer_spec, block in zip(decoder.layer, layers.decoder_blocks):
        _set_attention(layer_spec.self_attention, block.self_attention,
                       block.self_attention_norm, cross=False)
        _set_attention(layer_spec.attention, block.cross_attention,
                       block.cross_attention_norm, cross=True)
        _set_feed_forward(layer_spec.ffn, block)
    spec.config.layer_norm_epsilon = float(first.layer_norm_epsilon)
    spec.config.unk_token = target_pieces[UNK_ID]
    spec.config.bos_token = target_pieces[BOS_ID]
    spec.config.eos_token = target_pieces[EOS_ID]
    spec.config.decoder_start_token = target_pieces[BOS_ID]
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)
    return spec


def sentencepiece_pieces(path):
    """The pieces of a SentencePiece model file, in id order."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def convert_run(run, run_folder, output_dir, quantization="int8", overwrite=False):
    """Writes a loaded translator run as a CTranslate2 model folder; returns its path.

    Args:
        run: a loaded "translate" `Run` (`RunFolder.load`).
        run_folder: its `RunFolder` (for the tokenizer files and the manifest).
        output_dir: the folder to write.
        quantization: one of `CTRANSLATE2_QUANTIZATIONS`, CTranslate2's weight type.
        overwrite: replace an existing folder (otherwise `FileExistsError`).
    """
    ctranslate2 = import_ctranslate2()
    if quantization not in CTRANSLATE2_QUANTIZATIONS:
        raise ValueError(f"--ct2-quantization must be one of "
                         f"{', '.join(CTRANSLATE2_QUANTIZATIONS)}; received {quantization!r}.")
    from keras_transformer.models.transformer import Seq2SeqTransformer

    if not isinstance(run.model, Seq2SeqTransformer):
        raise ValueError(f"the CTranslate2 format holds encoder-decoder translators; this run's "
                         f"task is {run.task!r}.")
    check_representable(run.model)
    if os.path.exists(output_dir) and not overwrite:
        raise FileExistsError(f"{output_dir} already exists; pass --overwrite to replace it.")
    source_path, target_path = run_folder.tokenizer_files()
    positions = run.model.backbone.source_positions
    source_table = positions.max_length
    if positions.kind != "learned":
        source_table = max(run.max_source_length, positions.max_length)
    spec = transformer_spec(run.model, sentencepiece_pieces(source_path),
                            sentencepiece_pieces(target_path), source_positions=source_table)

    class _RunConverter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    _RunConverter().convert(output_dir, quantization=quantization, force=overwrite)
    shutil.copyfile(source_path, os.path.join(output_dir, "source.model"))
    shutil.copyfile(target_path, os.path.join(output_dir, "target.model"))
    data = run.config["data"]
    manifest = {
        "format": FORMAT,
        "quantization": quantization,
        "source_language": data.get("source_language"),
        "target_language": data.get("target_language"),
        "source_prefix": run.source_tokenizer.prefix,
        # Beyond its position table CTranslate2 would crash: the source is cut there.
        "max_source_length": min(run.max_source_length, source_table),
        "max_length": int(run.model.backbone.target_positions.max_length),
        "model": run.config["model"],
    }
    with open(os.path.join(output_dir, MANIFEST_FILE), "w", encoding="utf-8") as file:
        json.dump(manifest, file, indent=2, ensure_ascii=False)
    return output_dir
