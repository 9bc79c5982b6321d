"""Corpus BLEU and chrF of a translator, with sacrebleu's signatures.

A translator is any `translate_fn(list of source strings) -> list of strings`
(see `keras_transformer.evaluation.translators`). `translate_all` feeds it the
sentences in a fixed order and batching (sorted by length, then cut into
`batch_size` chunks), so two translators of the same model, one in process and
one exported, see exactly the same batches and give the same hypotheses.

Example:
    >>> shout = lambda batch: [s.upper() for s in batch]
    >>> result = evaluate(shout, ["the cat sat down"], ["THE CAT SAT DOWN"])
    >>> round(result.bleu, 1), result.sentences
    (100.0, 1)
"""

import dataclasses

# sacrebleu's BLEU tokenizer by target language; the rest use its default "13a".
_BLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}


@dataclasses.dataclass
class EvaluationResult:
    """Scores of one evaluation, with the texts they were computed on.

    Attributes:
        bleu: corpus BLEU (0-100).
        chrf: corpus chrF (0-100).
        bleu_signature: sacrebleu's signature of the BLEU settings,
            e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0".
        chrf_signature: the same for chrF.
        bleu_text: sacrebleu's one-line BLEU report, signature included.
        chrf_text: the same for chrF.
        hypotheses: the translations, in input order.
        references: the references, in input order.
        sources: the source sentences (empty when scoring given hypotheses).
    """

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_text: str
    chrf_text: str
    hypotheses: list
    references: list
    sources: list = dataclasses.field(default_factory=list)

    @property
    def sentences(self):
        return len(self.hypotheses)

    def summary(self):
        """The JSON-ready scores, without the texts."""
        return {
            "bleu": self.bleu,
            "chrf": self.chrf,
            "signature": {"bleu": self.bleu_signature, "chrf": self.chrf_signature},
            "bleu_text": self.bleu_text,
            "chrf_text": self.chrf_text,
            "sentences": self.sentences,
        }


def bleu_tokenizer_for(language):
    """sacrebleu's BLEU tokenizer for a target language code ("13a" by default)."""
    return _BLEU_TOKENIZERS.get((language or "").lower(), "13a")


def clean_line(text):
    """One hypothesis as one line of a text file (no line breaks inside)."""
    return " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text


def score(hypotheses, references, tokenize="13a", sources=()):
    """Corpus BLEU and chrF of hypotheses against one reference each.

    Args:
        hypotheses: list of translated sentences.
        references: list of reference sentences, aligned with `hypotheses`.
        tokenize: sacrebleu's BLEU tokenizer ("13a", "zh", ...).
        sources: optional source sentences, kept in the result.

    Returns:
        An `EvaluationResult`.

    Raises:
        ValueError: for no sentences or lists of different lengths.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.metrics import CHRF

    hypotheses, references = list(hypotheses), list(references)
    if not references:
        raise ValueError("Nothing to score: there are no sentences.")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses for {len(references)} references; they must align."
        )
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    bleu_signature, chrf_signature = str(bleu.get_signature()), str(chrf.get_signature())
    return EvaluationResult(
        bleu=float(bleu_score.score),
        chrf=float(chrf_score.score),
        bleu_signature=bleu_signature,
        chrf_signature=chrf_signature,
        bleu_text=bleu_score.format(signature=bleu_signature),
        chrf_text=chrf_score.format(signature=chrf_signature),
        hypotheses=hypotheses,
        references=references,
        sources=list(sources),
    )


def batch_order(sources, batch_size):
    """The batches `translate_all` sends: lists of indices, sentences sorted by length.

    Sorting by length keeps padding small; the sort is stable, so the batches
    depend only on the sentences and `batch_size`.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer; received {batch_size!r}.")
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def translate_all(translate_fn, sources, batch_size=64, progress=False):
    """Translates every source in length-sorted batches, with a tqdm progress bar.

    Args:
        translate_fn: list of strings -> list of strings (one batch).
        sources: the sentences.
        batch_size: sentences per call of `translate_fn`.
        progress: show a progress bar on stderr.

    Returns:
        The translations, in the order of `sources`, each on one line.
    """
    from tqdm import tqdm

    sources = list(sources)
    hypotheses = [None] * len(sources)
    with tqdm(total=len(sources), disable=not progress, unit="sentence", desc="translating") as bar:
        for indices in batch_order(sources, batch_size):
            batch = [sources[i] for i in indices]
            outputs = list(translate_fn(batch))
            if len(outputs) != len(batch):
                raise ValueError(
                    f"The translator returned {len(outputs)} outputs for {len(batch)} inputs."
                )
            for index, text in zip(indices, outputs):
                hypotheses[index] = clean_line(text)
            bar.update(len(batch))
    return hypotheses


def evaluate(translate_fn, sources, references, batch_size=64, tokenize="13a", progress=False):
    """Translates `sources` and scores the translations against `references`.

    Args:
        translate_fn: list of strings -> list of strings (one batch).
        sources: source sentences.
        references: one reference per source.
        batch_size: sentences per call of `translate_fn`.
        tokenize: sacrebleu's BLEU tokenizer ("13a"; "zh" for Chinese targets).
        progress: show a progress bar.

    Returns:
        An `EvaluationResult`.

    Example:
        >>> from keras_transformer.evaluation.translators import run_translator
        >>> result = evaluate(run_translator(run), *run.split("test"))  # doctest: +SKIP
        >>> print(result.bleu_text)  # doctest: +SKIP
    """
    sources, references = list(sources), list(references)
    if not sources:
        raise ValueError("Nothing to evaluate: there are no sentences.")
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources for {len(references)} references; they must align.")
    hypotheses = translate_all(translate_fn, sources, batch_size=batch_size, progress=progress)
    return score(hypotheses, references, tokenize=tokenize, sources=sources)
