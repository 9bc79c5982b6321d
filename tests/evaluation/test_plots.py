"""`plot-attention` and `plot-history`: panels, token labels, Chinese glyphs, curves."""

import json
import math
import os

import numpy as np
import pytest
from matplotlib.figure import Figure

from keras_transformer.plots import fonts
from keras_transformer.plots.attention import AttentionMaps
from keras_transformer.plots.attention import attention_figure
from keras_transformer.plots.attention import from_module
from keras_transformer.plots.attention import from_saved_model
from keras_transformer.plots.history import history_figure
from keras_transformer.runs.folder import RunFolder

SENTENCE = "机器学习很有趣。"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def module(loaded_run):
    from keras_transformer.evaluation.translators import translation_module

    return translation_module(loaded_run, beam_width=2)


@pytest.fixture(scope="module")
def cross_maps(module):
    return from_module(module, SENTENCE, kind="cross")


def heatmap_axes(figure):
    return [ax for ax in figure.axes if ax.images]


def labels(texts):
    return [text.get_text() for text in texts]


def tick_texts(axis):
    return list(axis.get_major_formatter().format_ticks(axis.get_majorticklocs()))


def test_one_panel_per_layer_and_head_with_the_token_labels(cross_maps, loaded_run):
    config = loaded_run.model.config
    layers, heads = config.decoder.num_layers, config.num_heads
    assert cross_maps.weights.shape == (
        layers, heads, len(cross_maps.row_pieces), len(cross_maps.column_pieces)
    )
    assert cross_maps.row_pieces[-1] == "</s>"
    assert "".join(cross_maps.column_pieces).replace("▁", "")  # Chinese input pieces

    figure = attention_figure(cross_maps)

    panels = heatmap_axes(figure)
    assert len(panels) == layers * heads
    for index, ax in enumerate(panels):
        # Every panel has the pieces as ticks; the outer ones show them.
        assert tick_texts(ax.xaxis) == cross_maps.column_pieces
        assert tick_texts(ax.yaxis) == cross_maps.row_pieces
        bottom, left = index >= (layers - 1) * heads, index % heads == 0
        assert labels(ax.get_xticklabels()) == (cross_maps.column_pieces if bottom else [])
        assert labels(ax.get_yticklabels()) == (cross_maps.row_pieces if left else [])
        assert ax.images[0].get_array().shape == (len(cross_maps.row_pieces), len(cross_maps.column_pieces))
    assert [ax.get_ylabel() for ax in panels[::heads]] == [f"layer {i + 1}" for i in range(layers)]
    assert [ax.get_title() for ax in panels[:heads]] == [f"head {i + 1}" for i in range(heads)]


def test_cross_attention_rows_are_distributions_over_the_input(cross_maps):
    np.testing.assert_allclose(cross_maps.weights.sum(axis=-1), 1.0, atol=1e-4)


def test_chinese_labels_render_without_missing_glyphs(loaded_run):
    pieces = [loaded_run.source_tokenizer.id_to_piece(i) for i in range(4, 40)]
    maps = AttentionMaps("cross", SENTENCE, "machine learning is fun", np.full((1, 1, 2, len(pieces)), 0.5),
                         ["▁fun", "</s>"], pieces)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in "".join(pieces))  # really Chinese

    figure = attention_figure(maps)

    assert fonts.draw_checked(figure) == []


def test_missing_glyph_check_catches_a_font_without_chinese():
    figure = Figure()
    ax = figure.subplots()
    ax.set_xticks([0, 1], ["机器", "学习"], fontfamily=["DejaVu Sans"])

    missing = fonts.draw_checked(figure)

    assert missing and all("missing from font" in message for message in missing)
    assert any("26426" in message for message in missing)  # 机 = U+673A


def test_encoder_and_decoder_self_attention(module, cross_maps):
    encoder = from_module(module, SENTENCE, kind="encoder")
    decoder = from_module(module, SENTENCE, kind="decoder")

    source, target = len(cross_maps.column_pieces), len(cross_maps.row_pieces)
    assert encoder.weights.shape[2:] == (source, source)
    assert encoder.row_pieces == encoder.column_pieces == cross_maps.column_pieces
    assert decoder.weights.shape[2:] == (target, target)
    assert decoder.column_pieces == ["<s>"] + cross_maps.row_pieces[:-1]
    # Causal: no output position attends to a later decoder input.
    assert np.all(np.triu(decoder.weights, k=1) < 1e-6)
    assert len(heatmap_axes(attention_figure(decoder))) == decoder.layers * decoder.heads


def test_saved_model_cross_attention_equals_the_run_folders(run_dir, export_dir, loaded_run):
    from keras_transformer.evaluation.translators import load_saved_model
    from keras_transformer.evaluation.translators import translation_module

    _, loaded = load_saved_model(export_dir)
    exported = from_saved_model(loaded, SENTENCE)
    in_process = from_module(translation_module(loaded_run, beam_width=4), SENTENCE)

    assert exported.row_pieces == in_process.row_pieces
    assert exported.column_pieces == in_process.column_pieces
    np.testing.assert_allclose(exported.weights, in_process.weights, atol=1e-5)
    with pytest.raises(ValueError, match="--run"):
        from_saved_model(loaded, SENTENCE, kind="encoder")


def test_plot_attention_command_writes_a_png(run_dir, tmp_path, cli):
    output = tmp_path / "attention.png"
    code, out, err = cli("plot-attention", "--run", run_dir, SENTENCE, "-o", output, "--beam", "1")
    assert code == 0, err
    assert output.read_bytes()[:8] == PNG_SIGNATURE
    assert "translation:" in out and "no glyph" not in err


def test_plot_commands_fail_clearly(run_dir, tmp_path, cli):
    cases = [
        (["plot-attention", "--run", tmp_path / "nowhere", SENTENCE], "does not exist"),
        (["plot-attention", "--run", run_dir, "  "], "non-empty sentence"),
        (["plot-attention", "--run", run_dir, SENTENCE, "--kind", "cross", "--beam", "0"], "--beam"),
        (["plot-history", "--run", tmp_path / "nowhere"], "does not exist"),
        (["plot-history", "--run", tmp_path], "history.json does not exist"),
    ]
    for args, message in cases:
        code, _, err = cli(*args, "-o", tmp_path / "x.png")
        assert code == 2, args
        assert message in err, (args, err)
    (tmp_path / "history.json").write_text("[]")
    code, _, err = cli("plot-history", "--run", tmp_path, "-o", tmp_path / "x.png")
    assert code == 2 and "no epochs yet" in err


def test_history_plot_has_every_curve_of_history_json(run_dir, tmp_path, cli):
    records = RunFolder(run_dir).history.read(required=True)
    curves = {key for record in records for key in record} - {"epoch", "step", "train_seconds"}
    assert curves == {"learning_rate", "loss", "masked_accuracy", "val_loss", "val_masked_accuracy"}

    figure = history_figure(records)

    lines = {line.get_gid(): line for ax in figure.axes for line in ax.get_lines()}
    assert set(lines) == curves
    steps = [record["step"] for record in records]
    for name, line in lines.items():
        assert list(line.get_xdata()) == steps
        expected = [math.nan if record[name] is None else record[name] for record in records]
        np.testing.assert_allclose(line.get_ydata(), expected)
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == ["loss", "masked accuracy", "learning rate"]
    loss_panel = figure.axes[0]
    assert labels(loss_panel.get_legend().get_texts()) == ["training", "validation"]

    output = tmp_path / "history.png"
    code, out, _ = cli("plot-history", "--run", run_dir, "-o", output)
    assert code == 0 and output.read_bytes()[:8] == PNG_SIGNATURE
    assert str(output) in out


def test_history_from_a_real_record_file_layout(tmp_path):
    # Keys in the order and form RunHistory writes them, with an extra metric.
    records = [{"epoch": 0, "step": 5, "train_seconds": 1.0, "learning_rate": 1e-4, "loss": 3.0,
                "perplexity": 20.0, "val_loss": 2.5, "val_perplexity": 12.0}]
    (tmp_path / "history.json").write_text(json.dumps(records))
    figure = history_figure(RunFolder(str(tmp_path)).history.read(required=True))
    assert [ax.get_title() for ax in figure.axes] == ["loss", "perplexity", "learning rate"]
    assert os.path.exists(tmp_path / "history.json")
