"""SentencePiece subword models: training them, and running them in the TF graph.

Models are trained on the training split only, one per language by default
(``source.model``, ``target.model``), with the project's fixed special ids
(``keras_transformer.constants``): pad 0, unk 1, bos 2, eos 3. Chinese needs no
pre-segmentation: the unigram model learns pieces from raw characters.

Default vocabulary sizes were chosen by measurement on cmn.txt, zh->en,
a 90/5/5 split (25,460 training pairs; tokens per sentence and UNK
share on the 1,340 validation pairs; "rare" = pieces seen fewer than 5 times
when tokenizing the training split, i.e. ids whose embedding and output row
barely get trained):

====  =====  ===============  =========  =====  ======================
lang  vocab  tokens/sentence  UNK share  rare   training length p99/max
====  =====  ===============  =========  =====  ======================
zh    2000   (fails: the kept characters alone need 2,621 ids)
zh    3000   8.01             0.22%      28.6%  18 / 37
zh    4000   7.10             0.25%      23.0%  16 / 33
zh    5000   6.71             0.27%      20.3%  15 / 33
zh    6000   6.52             0.27%      22.5%  15 / 33
zh    8000   6.21             0.29%      36.1%  14 / 33
en    2000   9.30             0.00%       0.7%  21 / 51
en    3000   8.87             0.00%      13.2%  20 / 47
en    4000   8.65             0.00%      30.6%  19 / 43
en    5000   8.53             0.00%      45.8%  18 / 40
en    6000   (fails: the text supports at most 5,806 pieces)
====  =====  ===============  =========  =====  ======================

Defaults: zh 5000 (fewest rare pieces; 6000 shortens sentences by under 3%)
and en 5000. By this table alone en 3000 looks best (4000 would shorten sentences
by 2.5% but leave 31% of pieces rare), but translation quality decides: trained
together with a learning-rate scale of 0.5, en 5000 scores 30.35 and 30.26 test
BLEU in two 1,585-step runs against 29.52, 28.83 and 29.75 for en 3000 at scale
0.3. zh 4000 scores 31.57 and 30.03 in two runs (seeds 0 and 1) against 29.81 and
30.35 for zh 5000 with the same seeds: a gain on one seed, a loss on the other, so
zh 5000 is the default (docs/experiments.md).
The zh UNK share is the rare characters that character_coverage 0.9995 leaves
out; it hardly depends on the vocabulary size. Training takes about a second
per model. It is deterministic for a given ``num_threads`` (the result
changes with the thread count, hence a fixed default).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID

# Measured defaults (see the module docstring), by language code.
DEFAULT_VOCAB_SIZES = {"zh": 5000, "en": 5000}
# For languages not measured here.
FALLBACK_VOCAB_SIZE = 4000
# A joint model holds both languages' pieces.
DEFAULT_JOINT_VOCAB_SIZE = 8000

SOURCE_MODEL_NAME = "source.model"
TARGET_MODEL_NAME = "target.model"

# Scripts with large character sets need to leave the rarest characters out
# (they become UNK) or they crowd out useful pieces; alphabetic scripts keep all.
_CJK_LANGUAGES = frozenset({"zh", "ja", "ko", "cmn", "yue"})


def character_coverage_for(language: str) -> float:
    """SentencePiece character_coverage for a language code: 0.9995 for CJK, else 1.0."""
    return 0.9995 if language.lower().split("-")[0] in _CJK_LANGUAGES else 1.0


def default_vocab_size(language: str) -> int:
    """The measured default vocabulary size for a language code."""
    return DEFAULT_VOCAB_SIZES.get(language.lower().split("-")[0], FALLBACK_VOCAB_SIZE)


def train_sentencepiece(
    sentences: Iterable[str],
    vocab_size: int,
    character_coverage: float = 1.0,
    num_threads: int = 2,
    user_defined_symbols: Sequence[str] = (),
) -> bytes:
    """Trains a unigram SentencePiece model with the project's special ids.

    Args:
        sentences: Training text, one sentence per item (empty items are skipped).
        vocab_size: Exact number of pieces, special ones included.
        character_coverage: Share of characters the model must cover; the
            rest map to UNK.
        num_threads: Trainer threads. The model depends on it (not on the
            machine), so keep the default for reproducible models.
        user_defined_symbols: Strings that always come out as one piece of their
            own (tags such as `keras_transformer.data.directions.DIRECTION_TAGS`).

    Returns:
        The serialized ``ModelProto``.

    Raises:
        RuntimeError: From SentencePiece, e.g. if ``vocab_size`` is larger
            than the text supports.
    """
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=(s for s in sentences if s),
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        # Keep every sentence: the corpus is small, sampling would only lose text.
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=num_threads,
        user_defined_symbols=list(user_defined_symbols),
        minloglevel=2,
    )
    return model.getvalue()


def train_tokenizers(
    source_sentences: Iterable[str],
    target_sentences: Iterable[str],
    output_dir: str | os.PathLike,
    source_language: str = "zh",
    target_language: str = "en",
    source_vocab_size: int | None = None,
    target_vocab_size: int | None = None,
    joint: bool = False,
    joint_vocab_size: int = DEFAULT_JOINT_VOCAB_SIZE,
    source_symbols: Sequence[str] = (),
) -> tuple[Path, Path]:
    """Trains and writes ``source.model`` and ``target.model`` into a folder.

    Pass the training split only, so validation and test text stay unseen.

    Args:
        source_sentences: Source-language training sentences.
        target_sentences: Target-language training sentences.
        output_dir: Folder to write into (created if missing).
        source_language: Language code; sets coverage and default size.
        target_language: Language code; sets coverage and default size.
        source_vocab_size: Source vocabulary size; None for the measured
            default of ``source_language``.
        target_vocab_size: Target vocabulary size; None for the default.
        joint: Train one model on both languages' text; it is written under
            both names, so readers need not know which kind they got.
        joint_vocab_size: Vocabulary size of the joint model, unless
            ``source_vocab_size`` or ``target_vocab_size`` names it (both: equal).
        source_symbols: Tags that source sentences carry, each kept as one piece
            of the source (or joint) model.

    Returns:
        Paths of the source and target model files.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    source_path = output_dir / SOURCE_MODEL_NAME
    target_path = output_dir / TARGET_MODEL_NAME
    source_coverage = character_coverage_for(source_language)
    target_coverage = character_coverage_for(target_language)
    if joint:
        sizes = {size for size in (source_vocab_size, target_vocab_size) if size is not None}
        if len(sizes) > 1:
            raise ValueError(
                "A joint vocabulary has one size; received source_vocab_size="
                f"{source_vocab_size} and target_vocab_size={target_vocab_size}."
            )
        both = list(source_sentences) + list(target_sentences)
        source_path.write_bytes(
            train_sentencepiece(both, sizes.pop() if sizes else joint_vocab_size,
                                min(source_coverage, target_coverage),
                                user_defined_symbols=source_symbols)
        )
        shutil.copyfile(source_path, target_path)
    else:
        source_path.write_bytes(
            train_sentencepiece(
                source_sentences,
                source_vocab_size or default_vocab_size(source_language),
                source_coverage,
                user_defined_symbols=source_symbols,
            )
        )
        target_path.write_bytes(
            train_sentencepiece(
                target_sentences,
                target_vocab_size or default_vocab_size(target_language),
                target_coverage,
            )
        )
    return source_path, target_path


class _SharedModelResource(tf.saved_model.experimental.TrackableResource):
    """A SentencePiece model resource that lives as long as the process.

    ``tf_text`` creates its resource private to the op kernel, and eager
    kernels are dropped whenever TF clears its kernel cache, which
    ``tf.random.set_seed`` (and so ``keras.utils.set_random_seed``) does: the
    tokenizer, and every ``tf.data`` pipeline using it, would then fail with
    "Resource ... SentencepieceOp ... does not exist". A ``shared_name`` makes
    the resource manager keep it; naming it by the model's hash makes equal
    models share one resource and different models never collide.
    """

    def __init__(self, model_proto: bytes):
        super().__init__()
        self._model_proto = model_proto
        digest = hashlib.sha256(model_proto).hexdigest()[:24]
        self._shared_name = f"keras_transformer_sentencepiece_{digest}"
        _ = self.resource_handle  # create it now, as tf_text does

    def _create_resource(self):
        return gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model_proto, shared_name=self._shared_name
        )


class _SentencepieceTokenizer(tf_text.SentencepieceTokenizer):
    """``tf_text.SentencepieceTokenizer`` on a :class:`_SharedModelResource`;
    with ``sample_alpha``, every call samples a segmentation from all of them
    (``nbest_size=-1``) with probabilities proportional to P(x)^alpha."""

    def __init__(self, model_proto: bytes, sample_alpha: float | None = None):
        sampling = {} if sample_alpha is None else {"nbest_size": -1, "alpha": sample_alpha}
        super().__init__(
            model=model_proto, out_type=tf.int32, add_bos=False, add_eos=False, **sampling
        )
        # All of tf_text's ops read the model through this attribute.
        self._model_resource = _SharedModelResource(model_proto)


class SubwordTokenizer(tf.Module):
    """A SentencePiece model that tokenizes and detokenizes inside the TF graph.

    Built from the serialized model bytes, so it works in ``tf.data`` maps,
    ``tf.function``s and exported SavedModels alike (``tensorflow_text`` ops;
    the model travels inside the graph) and keeps working after
    ``tf.random.set_seed`` (see :class:`_SharedModelResource`). ``model_proto`` gives the bytes back
    for an exporter to store as an asset.

    Ids are the model's own; special ids are those of
    ``keras_transformer.constants``. BOS/EOS are only added on request.
    """

    def __init__(
        self,
        model_proto: bytes,
        name: str | None = None,
        sample_alpha: float | None = None,
        prefix: str = "",
    ):
        """Creates the tokenizer.

        Args:
            model_proto: Serialized SentencePiece ``ModelProto``.
            name: Module name.
            sample_alpha: None tokenizes into the most likely pieces; a number in
                (0, 1] samples a segmentation at every call (see :meth:`sampling`).
            prefix: Text put before every sentence that :meth:`tokenize` reads (a
                bidirectional run's tag naming the output language,
                `keras_transformer.data.directions`); "" for none.

        Raises:
            ValueError: If the model's special ids differ from the project's.
        """
        super().__init__(name=name)
        self._model_proto = bytes(model_proto)
        processor = spm.SentencePieceProcessor(model_proto=self._model_proto)
        found = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if found != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(
                "SentencePiece model has pad/unk/bos/eos ids "
                f"{found}, expected {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}"
            )
        self._vocab_size = processor.get_piece_size()
        self._pieces = [processor.id_to_piece(i) for i in range(self._vocab_size)]
        proto = sentencepiece_model_pb2.ModelProto.FromString(self._model_proto)
        # SentencePiece numbers the special pieces, then the user-defined ones (tags), first.
        self._first_text_id = 1 + max(
            [EOS_ID] + [i for i, piece in enumerate(proto.pieces)
                        if piece.type == sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED]
        )
        if sample_alpha is not None and not 0 < sample_alpha <= 1:
            raise ValueError(
                f"`sample_alpha` must be None or in (0, 1]; received {sample_alpha!r}."
            )
        self._sample_alpha = sample_alpha
        self._prefix = str(prefix)
        self._tokenizer = _SentencepieceTokenizer(self._model_proto, sample_alpha)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike, name: str | None = None, prefix: str = ""
    ) -> "SubwordTokenizer":
        """Loads a ``.model`` file written by :func:`train_tokenizers`."""
        return cls(Path(path).read_bytes(), name=name, prefix=prefix)

    def with_prefix(self, prefix: str) -> "SubwordTokenizer":
        """The same model and sampling, putting `prefix` before every sentence."""
        return self._replace(prefix=prefix)

    def _replace(self, **changes) -> "SubwordTokenizer":
        """A tokenizer of the same model, with `changes` to its other settings."""
        settings = dict(name=self.name, sample_alpha=self._sample_alpha, prefix=self._prefix)
        return SubwordTokenizer(self._model_proto, **{**settings, **changes})

    def sampling(self, alpha: float) -> "SubwordTokenizer":
        """The same model, sampling a segmentation at every call: subword
        regularization (Kudo, 2018), for training data only.

        A word comes out whole once and in smaller pieces the next time, so the
        model learns words from their pieces too: a regularizer, which needs more
        training than the 25-minute demo gives (docs/experiments.md).
        Detokenizing any sample gives the text back. Sampling runs in
        SentencePiece's own random generator, which TensorFlow's seeds do not reach.

        Args:
            alpha: Smoothing of the sampling distribution P(segmentation)^alpha, in
                (0, 1]: small values sample nearly uniformly, 1 follows the model.
        """
        return self._replace(sample_alpha=alpha)

    @property
    def sample_alpha(self) -> float | None:
        """The sampling α, or None for the most likely segmentation."""
        return self._sample_alpha

    @property
    def prefix(self) -> str:
        """The text put before every sentence `tokenize` reads ("" for none)."""
        return self._prefix

    @property
    def model_proto(self) -> bytes:
        """The serialized SentencePiece model."""
        return self._model_proto

    @property
    def vocab_size(self) -> int:
        """Number of ids, special ones included."""
        return self._vocab_size

    @property
    def first_text_id(self) -> int:
        """The lowest id of a text piece: below it, the special ids and the tags
        (``user_defined_symbols``), which word dropout leaves alone."""
        return self._first_text_id

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id (Python, for inspection and debugging)."""
        return self._pieces[token_id]

    def id_to_string(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """The pieces of ids, in the graph (e.g. ``"▁How"``).

        Args:
            ids: int32 ids of any shape, dense or ragged.

        Returns:
            tf.string pieces of the same shape.
        """
        return self._tokenizer.id_to_string(ids)

    def tokenize(
        self, strings: tf.Tensor, add_bos: bool = False, add_eos: bool = False
    ) -> tf.RaggedTensor:
        """Splits sentences into subword ids.

        Args:
            strings: tf.string (B,) of UTF-8 sentences.
            add_bos: Prepend BOS to each row.
            add_eos: Append EOS to each row.

        Returns:
            int32 RaggedTensor (B, None); an empty string gives an empty row
            (plus BOS/EOS if asked), or the prefix's pieces alone.
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        if self._prefix:
            strings = tf.strings.join([self._prefix, strings])
        ids = self._tokenizer.tokenize(strings)
        parts = []
        rows = ids.nrows()
        if add_bos:
            parts.append(tf.RaggedTensor.from_tensor(tf.fill([rows, 1], BOS_ID)))
        parts.append(ids)
        if add_eos:
            parts.append(tf.RaggedTensor.from_tensor(tf.fill([rows, 1], EOS_ID)))
        return tf.concat(parts, axis=1) if len(parts) > 1 else ids

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """Turns ids back into text, stopping at the first EOS.

        PAD and BOS are dropped and everything from the first EOS on is
        ignored, so padded model outputs can be passed as they are.

        Args:
            ids: int (B, T) dense or ragged ids.

        Returns:
            tf.string (B,) sentences.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=1) == 0
        keep = before_eos & (ids != PAD_ID) & (ids != BOS_ID)
        return self._tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))
