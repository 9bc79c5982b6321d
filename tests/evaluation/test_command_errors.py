"""User errors of the commands that read a run folder: one line, exit status 2.

Run in process through `keras_transformer.cli.main` (the `cli` fixture), with the
run folder and export the other evaluation tests share.
"""

import json
import os


def _one_error_line(err, command):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"keras-transformer {command}: error: "), lines[0]
    return lines[0]


def test_export_into_an_existing_version_is_one_line_and_leaves_it_alone(cli, run_dir, export_dir):
    base = os.path.dirname(os.path.dirname(export_dir))
    before = sorted(os.listdir(export_dir))
    code, _, err = cli("export", "--run", run_dir, "--name", "zh_en", "--base", base,
                       "--version", 1)
    assert code == 2
    line = _one_error_line(err, "export")
    assert "already exists" in line and "--overwrite" in line
    assert sorted(os.listdir(export_dir)) == before


def test_evaluate_with_a_missing_data_file_is_one_line(cli, run_dir, tmp_path):
    missing = tmp_path / "pairs.tsv"
    code, _, err = cli("evaluate", "--run", run_dir, "--data", missing)
    assert code == 2
    assert str(missing) in _one_error_line(err, "evaluate")


def test_export_search_settings_reach_the_manifest_and_bad_ones_are_one_line(
        cli, run_dir, export_dir, tmp_path):
    with open(os.path.join(export_dir, "manifest.json"), encoding="utf-8") as file:
        decoding = json.load(file)["decoding"]
    # The defaults (keras_transformer.constants, SequenceSearch) reach the export; it
    # splits a large batch as searches, the faster way where `serving/` runs one thread per op.
    assert (decoding["parallel_searches"], decoding["alpha"], decoding["coverage"]) == (2, 0.6, 0.2)
    assert decoding["row_groups"] is False
    base = tmp_path / "export"
    for flags, expected in ((["--parallel-searches", 0], "parallel_searches"),
                            (["--parallel-searches", 2, "--xla"], "jit_compile=False"),
                            (["--alpha", -1], "`alpha` must be a number >= 0"),
                            (["--coverage", -1], "`coverage` must be a number >= 0")):
        code, _, err = cli("export", "--run", run_dir, "--name", "zh_en", "--base", base, *flags)
        assert code == 2
        assert expected in _one_error_line(err, "export")
        assert not base.exists() or not any(base.iterdir())
    code, _, _ = cli("export", "--run", run_dir, "--name", "zh_en", "--base", base,
                     "--coverage", 0.4, "--no-preset")
    assert code == 0
    with open(base / "zh_en" / "1" / "manifest.json", encoding="utf-8") as file:
        assert json.load(file)["decoding"]["coverage"] == 0.4
