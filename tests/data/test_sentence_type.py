"""The example classification data (data/sentence-type/en.tsv) is what its command makes."""

import pytest

from keras_transformer.data.corpus import LabelledFile
from keras_transformer.data.sentence_type import FINAL_MARKS
from keras_transformer.data.sentence_type import main
from keras_transformer.data.sentence_type import output_path
from keras_transformer.data.sentence_type import sentence_type
from keras_transformer.data.sentence_type import sentence_type_lines


def test_the_shipped_file_is_exactly_what_the_command_writes(tmp_path):
    assert main(["--language", "en", "--output-dir", str(tmp_path)]) == 0
    assert (tmp_path / "en.tsv").read_bytes() == output_path("en").read_bytes()


def test_no_text_keeps_its_final_punctuation_and_labels_are_the_three_types():
    labels, texts = LabelledFile(str(output_path("en"))).read()
    assert set(labels) == {"question", "exclamation", "statement"}
    assert not [text for text in texts if text[-1] in FINAL_MARKS or text != text.strip()]
    assert len(set(texts)) == len(texts)  # each sentence once


def test_every_line_keeps_its_tatoeba_attribution():
    lines = output_path("en").read_text(encoding="utf-8").splitlines()
    assert all(line.split("\t")[2].startswith("CC-BY 2.0 (France) Attribution: tatoeba.org #")
               for line in lines)


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("Is it raining?", ("question", "Is it raining")),
        ("Stop!", ("exclamation", "Stop")),
        ("I see.", ("statement", "I see")),
        ("你好吗？", ("question", "你好吗")),
        ("走吧！", ("exclamation", "走吧")),
        ("我饿了。", ("statement", "我饿了")),
        ("What??", ("question", "What")),
        ("Really?!", None),  # two kinds
        ("Well...", None),  # an ellipsis
        ("Well…", None),
        ('He said "Hi."', None),  # no final mark
        ("?", None),  # nothing left
    ],
)
def test_the_label_comes_from_the_final_punctuation(sentence, expected):
    assert sentence_type(sentence) == expected


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        sentence_type_lines("fr")
