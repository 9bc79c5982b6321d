"""`evaluate`: sacrebleu's own numbers, the same hypotheses from a run and its export, clear errors."""

import json
import os
import subprocess
import sys

import pytest

from keras_transformer.evaluation.scoring import batch_order
from keras_transformer.evaluation.scoring import evaluate
from keras_transformer.evaluation.scoring import score

SACREBLEU = os.path.join(os.path.dirname(sys.executable), "sacrebleu")


def sacrebleu_cli(references_path, hypotheses_path, tokenize="13a"):
    """sacrebleu's command line on two files: its BLEU and chrF report lines."""
    result = subprocess.run(
        [SACREBLEU, references_path, "-i", hypotheses_path, "-m", "bleu", "chrf",
         "-tok", tokenize, "-f", "text", "-w", "2"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as file:
        file.write("".join(f"{line}\n" for line in lines))


def read_lines(path):
    with open(path, encoding="utf-8") as file:
        return file.read().splitlines()


def test_printed_scores_equal_sacrebleu_cli_on_written_files(run_dir, tmp_path, cli):
    # References derived from the model's own output (every fifth word changed), so
    # BLEU is far from 0 and 100 and a wrong count would show.
    code, _, _ = cli("evaluate", "--run", run_dir, "--no-progress", "-o", tmp_path / "first.txt")
    assert code == 0
    sources, _ = _split(run_dir)
    references = [
        " ".join("XX" if i % 5 == 4 else word for i, word in enumerate(line.split())) or "empty"
        for line in read_lines(tmp_path / "first.txt")
    ]
    data = tmp_path / "data.tsv"
    write_lines(data, [f"{s}\t{r}" for s, r in zip(sources, references)])
    hypotheses = tmp_path / "hyps.txt"

    code, out, _ = cli("evaluate", "--run", run_dir, "--data", data, "-o", hypotheses, "--no-progress")

    assert code == 0
    write_lines(tmp_path / "refs.txt", references)
    bleu_line, chrf_line = sacrebleu_cli(str(tmp_path / "refs.txt"), str(hypotheses))
    printed = out.splitlines()
    assert bleu_line in printed and chrf_line in printed
    bleu = float(bleu_line.split("= ")[1].split()[0])
    assert 5.0 < bleu < 95.0, bleu_line


def test_api_scores_equal_sacrebleu_api():
    import sacrebleu

    sources = ["一", "二", "三", "四"]
    references = ["the cat sat on the mat", "a dog barks loudly", "it rains today", "我们来试试"]
    table = dict(zip(sources, ["the cat sat on a mat", "a dog barks", "it rains today", "我们试试"]))

    result = evaluate(lambda batch: [table[s] for s in batch], sources, references, batch_size=3)

    hypotheses = [table[s] for s in sources]
    assert result.hypotheses == hypotheses
    assert result.bleu == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert result.chrf == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    assert result.bleu_signature.startswith("nrefs:1|case:mixed") and "tok:13a" in result.bleu_signature
    assert result.bleu_text.startswith(f"BLEU|{result.bleu_signature} = ")


def test_chinese_targets_are_scored_with_the_zh_tokenizer():
    result = score(["我们来试试"], ["我们试试"], tokenize="zh")
    assert "tok:zh" in result.bleu_signature and result.bleu > 0


def test_batches_are_length_sorted_and_cover_every_sentence_once():
    sources = ["aaaa", "a", "aaa", "aa", "aaaaa"]
    batches = batch_order(sources, 2)
    assert batches == [[1, 3], [2, 0], [4]]
    calls = []

    def translate(batch):
        calls.append(list(batch))
        return [s.upper() for s in batch]

    result = evaluate(translate, sources, [s.upper() for s in sources], batch_size=2)
    assert calls == [["a", "aa"], ["aaa", "aaaa"], ["aaaaa"]]
    assert result.hypotheses == [s.upper() for s in sources]


def test_data_reads_tatoeba_columns_and_two_file_corpora_like_train(run_dir, tmp_path, cli):
    sources, references = _split(run_dir)
    sources, references = sources[:6], references[:6]
    plain = tmp_path / "plain.tsv"
    write_lines(plain, [f"{s}\t{r}" for s, r in zip(sources, references)])
    # The Tatoeba layout train reads: English<TAB>Mandarin<TAB>attribution.
    tatoeba = tmp_path / "cmn.txt"
    write_lines(tatoeba, [f"{r}\t{s}\tCC-BY 2.0 (France)" for s, r in zip(sources, references)])
    write_lines(tmp_path / "test.zh", sources)
    write_lines(tmp_path / "test.en", references)
    runs = {
        "plain": ["--data", plain],
        "tatoeba": ["--data", tatoeba, "--src", "zh", "--tgt", "en"],
        "columns": ["--data", tatoeba, "--src-column", "1", "--tgt-column", "0"],
        "files": ["--source-file", tmp_path / "test.zh", "--target-file", tmp_path / "test.en"],
    }
    outputs = {}
    for name, args in runs.items():
        code, out, err = cli("evaluate", "--run", run_dir, *args, "--no-progress", "--beam", "1",
                             "-o", tmp_path / f"{name}.txt")
        assert code == 0, (name, err)
        outputs[name] = (read_lines(tmp_path / f"{name}.txt"),
                         [line for line in out.splitlines() if line.startswith("BLEU|")])
    assert len(outputs["plain"][0]) == 6
    assert all(output == outputs["plain"] for output in outputs.values()), outputs


def _split(run_dir):
    from keras_transformer.runs.loading import load_run

    return load_run(run_dir).split("test")


def test_run_folder_and_its_export_give_the_same_hypotheses(run_dir, export_dir, tmp_path, cli):
    code, run_out, _ = cli("evaluate", "--run", run_dir, "--no-progress", "--batch-size", "4",
                           "-o", tmp_path / "run.txt")
    assert code == 0
    data = os.path.join(run_dir, "splits", "test.tsv")
    code, export_out, _ = cli("evaluate", "--saved-model", export_dir, "--data", data,
                              "--no-progress", "--batch-size", "4", "-o", tmp_path / "export.txt")
    assert code == 0

    from_run, from_export = read_lines(tmp_path / "run.txt"), read_lines(tmp_path / "export.txt")
    assert len(from_run) == len(_split(run_dir)[0]) > 0
    assert from_run == from_export
    assert len(set(from_run)) > 1  # the sentences do not all translate alike
    score_lines = [line for line in run_out.splitlines() if line.startswith(("BLEU|", "chrF2|"))]
    assert score_lines and all(line in export_out.splitlines() for line in score_lines)


def test_evaluating_a_split_writes_evaluation_json(run_dir, tmp_path, cli):
    hypotheses = tmp_path / "hyps.txt"
    code, out, _ = cli("evaluate", "--run", run_dir, "--limit", "5", "--beam", "2",
                       "--no-progress", "-o", hypotheses)
    assert code == 0
    with open(os.path.join(run_dir, "evaluation.json"), encoding="utf-8") as file:
        record = json.load(file)
    assert record["split"] == "test" and record["beam"] == 2 and record["sentences"] == 5
    # The run recorded no best weights (no validation): "best" falls back to the last.
    assert record["weights"]["kind"] == "last" and record["weights"]["path"] == "final.weights.h5"
    assert record["signature"]["bleu"].startswith("nrefs:1") and "chrf" in record["signature"]
    assert record["bleu_text"] in out.splitlines()
    assert len(read_lines(hypotheses)) == 5


def test_alpha_and_coverage_reach_the_runs_search_and_evaluation_json(
        run_dir, tmp_path, cli, monkeypatch):
    from keras_transformer.evaluation import translators

    searched = []
    real_translation_module = translators.translation_module

    def recording(run, beam_width, alpha, coverage):
        module = real_translation_module(run, beam_width=beam_width, alpha=alpha, coverage=coverage)
        searched.append((module.search.beam_width, module.search.alpha, module.search.coverage))
        return module

    monkeypatch.setattr(translators, "translation_module", recording)
    for flags, alpha, coverage, search in (
        ([], 0.6, 0.2, "beam 3, alpha 0.6, coverage 0.2;"),
        (["--alpha", "2.5"], 2.5, 0.2, "beam 3, alpha 2.5, coverage 0.2;"),
        (["--alpha", "0", "--coverage", "0"], 0.0, 0.0, "beam 3, alpha 0.0;"),
        (["--coverage", "0.4"], 0.6, 0.4, "beam 3, alpha 0.6, coverage 0.4;"),
    ):
        code, out, _ = cli("evaluate", "--run", run_dir, "--limit", "3", "--beam", "3",
                           *flags, "--no-progress", "-o", tmp_path / "hyps.txt")
        assert code == 0
        assert searched[-1] == (3, alpha, coverage)
        with open(os.path.join(run_dir, "evaluation.json"), encoding="utf-8") as file:
            record = json.load(file)
        assert (record["alpha"], record["coverage"]) == (alpha, coverage)
        assert search in out


def test_clear_errors(run_dir, export_dir, tmp_path, cli):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    no_target = tmp_path / "bad.tsv"
    no_target.write_text("你好。\n")
    cases = [
        (["--run", tmp_path / "nowhere"], "does not exist"),
        (["--run", run_dir, "--data", empty], "empty"),
        (["--run", run_dir, "--data", no_target], "line 1"),
        (["--run", run_dir, "--data", tmp_path / "missing.tsv"], "does not exist"),
        (["--run", run_dir, "--split", "test", "--data", empty], "not both"),
        (["--run", run_dir, "--data", empty, "--src", "zh"], "both --src and --tgt"),
        (["--run", run_dir, "--source-file", empty], "both --source-file and --target-file"),
        (["--run", run_dir, "--weights", tmp_path / "none.h5"], "no such file"),
        (["--run", run_dir, "--beam", "0"], "--beam must be a positive integer"),
        (["--run", run_dir, "--alpha", "-0.5"], "--alpha must be a number >= 0"),
        (["--run", run_dir, "--alpha", "nan"], "--alpha must be a number >= 0"),
        (["--run", run_dir, "--coverage", "-0.2"], "--coverage must be a number >= 0"),
        (["--saved-model", export_dir], "needs --data"),
        (["--saved-model", export_dir, "--data", empty, "--beam", "2"], "beam width 4"),
        (["--saved-model", export_dir, "--data", empty, "--alpha", "1.0"],
         "length-penalty exponent 0.6"),
        (["--saved-model", export_dir, "--data", empty, "--coverage", "0.4"],
         "coverage penalty 0.2"),
        (["--saved-model", tmp_path, "--data", empty], "holds no SavedModel"),
    ]
    for args, message in cases:
        code, _, err = cli("evaluate", *args, "--no-progress")
        assert code == 2, args
        assert message in err, (args, err)


def test_mismatched_inputs_are_refused():
    with pytest.raises(ValueError, match="no sentences"):
        evaluate(lambda batch: batch, [], [])
    with pytest.raises(ValueError, match="align"):
        evaluate(lambda batch: batch, ["a"], ["a", "b"])
    with pytest.raises(ValueError, match="outputs"):
        evaluate(lambda batch: batch[:-1], ["a", "b"], ["a", "b"])


def test_export_manifest_records_the_weights_it_holds(export_dir):
    with open(os.path.join(export_dir, "manifest.json"), encoding="utf-8") as file:
        manifest = json.load(file)
    # The fixture run has final weights and no recorded validation loss.
    assert manifest["weights"]["kind"] == "last"
    assert manifest["weights"]["path"] == "final.weights.h5"
    assert set(manifest["weights"]) >= {"epoch", "step", "val_loss"}
