"""What each training task is: one place per task for its data, tokenizers, model, loss and evaluation.

A run folder trains one task, recorded as "task" in its config.json. `train`
(trainer.py) is the same loop for every task (schedule, optimizer, checkpoints,
backup and resume, best and averaged weights, history); it asks the run's `Task`
for the rest:

===========  =================================  =========================================
task         data (a new run)                   model, loss, metrics (history), evaluate
===========  =================================  =========================================
translate    `PairFiles`: sentence pairs        `Seq2SeqTransformer`; masked smoothed
             (source.model, target.model)       cross-entropy, masked_accuracy; BLEU/chrF
                                                (`keras-transformer evaluate`)
lm           `TextFile`: every line, or one     `build_language_model`: BOS + text ->
             column of a TSV (tokenizer.model)  text + EOS; masked smoothed cross-entropy,
                                                masked_accuracy, perplexity (exp of the
                                                unsmoothed masked mean); test perplexity
classify     `LabelledFile`: label<TAB>text     `build_classifier`; smoothed cross-entropy,
             (tokenizer.model, labels.json)     accuracy, macro_f1; accuracy, macro-F1,
                                                per-class scores, confusion matrix
===========  =================================  =========================================

The splits of "lm" and "classify" are `split_texts` (seeded, equal texts on one
side); their one SentencePiece model is trained on the training split only. The
run-folder files of each task: `keras_transformer.runs.folder`; the model of each task:
`keras_transformer.models.task_model.build_task_model`; the evaluation of "lm" and "classify":
`keras_transformer.evaluation.tasks`.

Shape notation: B batch, T tokens, V vocabulary, C classes.
"""

import dataclasses
import os

from keras_transformer.constants import DEFAULT_TASK
from keras_transformer.constants import TASKS
from keras_transformer.models.task_model import build_task_model
from keras_transformer.runs.folder import RunFolder
from keras_transformer.runs.folder import task_of

FORMAT_VERSION = 1


def task_for(config_or_name=None):
    """The `Task` of a task name, or of a parsed config.json (None: "translate")."""
    if isinstance(config_or_name, dict):
        config_or_name = task_of(config_or_name)
    name = config_or_name or DEFAULT_TASK
    if name not in _TASKS:
        raise ValueError(f"Unknown task {name!r}; accepted: {list(TASKS)}.")
    return _TASKS[name]


class Task:
    """The parts of training and evaluation that depend on the task.

    Attributes:
        name: "translate", "lm" or "classify".
    """

    name = None

    def prepare(self, run_dir, data, preset, **options):
        """Splits the data, trains the tokenizer(s) and writes config.json; returns the config."""
        raise NotImplementedError

    def build_model(self, run_config):
        """The run's model (not compiled), from its config.json (`build_task_model`)."""
        return build_task_model(run_config)

    def make_datasets(self, run, run_config, config, seed, static_shapes=False):
        """(training, validation) `tf.data` pipelines of `(inputs, labels)` batches."""
        raise NotImplementedError

    def loss(self, run_config, config):
        """The Keras loss of training (config: the `TrainingConfig`)."""
        raise NotImplementedError

    def metrics(self, run_config):
        """The Keras metrics of training; each appears in the history (val_<name> too)."""
        raise NotImplementedError


# -- translate ----------------------------------------------------------------------------

def prepare_run(
    run_dir,
    data,
    src="zh",
    tgt="en",
    preset="small",
    source_column=None,
    target_column=None,
    max_pairs=None,
    split_seed=0,
    validation_fraction=0.05,
    test_fraction=0.05,
    source_vocab_size=None,
    target_vocab_size=None,
    joint_vocabulary=False,
    dictionary=None,
    dictionary_tag=False,
    bidirectional=False,
    model_overrides=None,
):
    """Splits the corpus, trains the tokenizers and writes `config.json`.

    Args:
        run_dir: the run folder (created).
        data: the corpus: a `keras_transformer.data.corpus.PairFiles` (a TSV's
            columns or two line-aligned files), or the path of a tab-separated file.
        src: source language code.
        tgt: target language code.
        preset: model preset name ("tiny", "small", "base", "big").
        source_column: with a path: 0-based column of the source; None for the
            Tatoeba (cmn.txt) layout of `src`.
        target_column: likewise for the target.
        max_pairs: use only the first this many pairs (None: all).
        split_seed: seed of the train/validation/test split.
        validation_fraction: share of pairs for validation.
        test_fraction: share of pairs for test.
        source_vocab_size: None for the tokenizer's measured default.
        target_vocab_size: None for the default.
        joint_vocabulary: one SentencePiece model for both languages.
        dictionary: path of a dictionary TSV (`keras_transformer.data.dictionary`):
            its entries whose word occurs in a training source sentence join the
            training split (never validation or test).
        dictionary_tag: mark those entries' sources with `DICTIONARY_TAG`, so that
            the model learns glosses apart from sentences.
        bidirectional: train both directions in one model, each source tagged
            with its output language (`keras_transformer.data.directions`); one
            vocabulary for both languages, tied embeddings.
        model_overrides: TransformerConfig fields to change from the preset.

    Returns:
        The run config (the dict written to `config.json`, without "training").
    """
    from keras_transformer.data.corpus import PairFiles
    from keras_transformer.data.corpus import columns_for
    from keras_transformer.data.corpus import sources_and_targets
    from keras_transformer.data.corpus import split_pairs
    from keras_transformer.data.pipeline import DEFAULT_MAX_SOURCE_LENGTH
    from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.data.tokenizer import train_tokenizers
    from keras_transformer.models.config import preset as make_preset

    run = RunFolder(run_dir)
    if data is None:
        raise ValueError(
            f"{run_dir} is not a run folder yet: pass the corpus (--data, or "
            "--source-file/--target-file)."
        )
    if not isinstance(data, PairFiles):
        if (source_column is None) != (target_column is None):
            raise ValueError("Give both the source and the target column, or neither.")
        if source_column is None:
            source_column, target_column = columns_for(src, tgt)
        data = PairFiles(str(data), source_column=source_column, target_column=target_column)
    pairs = data.read()
    if max_pairs is not None:
        pairs = pairs[:max_pairs]
    split = split_pairs(pairs, validation_fraction, test_fraction, seed=split_seed)
    if not split.train or not split.validation:
        raise ValueError(
            f"The split of {len(pairs)} pairs leaves {len(split.train)} for training and "
            f"{len(split.validation)} for validation; use a larger corpus."
        )

    dictionary_pairs = tagged_pairs = []
    if dictionary is not None:
        from keras_transformer.data.dictionary import entries_in
        from keras_transformer.data.dictionary import read_dictionary

        dictionary_pairs = tagged_pairs = entries_in(
            read_dictionary(dictionary, src, tgt), [pair.source for pair in split.train]
        )
        if dictionary_tag:
            from keras_transformer.data.dictionary import tagged

            tagged_pairs = tagged(dictionary_pairs)
    train = split.train + tagged_pairs
    source_prefix, source_symbols = "", ()
    if bidirectional:
        from keras_transformer.data.directions import DIRECTION_TAGS
        from keras_transformer.data.directions import TO_TARGET_TAG
        from keras_transformer.data.directions import both_directions

        joint_vocabulary = True  # each side reads and writes both languages
        train = both_directions(train, reversible=split.train + dictionary_pairs)
        source_prefix, source_symbols = TO_TARGET_TAG, DIRECTION_TAGS
    split = dataclasses.replace(split, train=train)
    for part in ("train", "validation", "test"):
        run.write_split(part, getattr(split, part))
    train_sources, train_targets = sources_and_targets(split.train)
    try:
        source_path, target_path = train_tokenizers(
            train_sources,
            train_targets,
            run.path,
            source_language=src,
            target_language=tgt,
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
            joint=joint_vocabulary,
            source_symbols=source_symbols,
        )
    except RuntimeError as error:  # SentencePiece reports bad sizes this way.
        raise ValueError(f"Training the tokenizers failed: {error}") from None
    source_vocab = SubwordTokenizer.from_file(source_path).vocab_size
    target_vocab = SubwordTokenizer.from_file(target_path).vocab_size
    model_config = make_preset(
        preset,
        **{
            "source_vocab_size": source_vocab,
            "target_vocab_size": target_vocab,
            "share_vocabulary": bool(joint_vocabulary),
            **(model_overrides or {}),
        },
    )
    config = {
        "format_version": FORMAT_VERSION,
        "task": "translate",
        "preset": preset,
        "model": model_config.to_dict(),
        "data": {
            **data.describe(),
            "source_language": src,
            "target_language": tgt,
            "max_pairs": max_pairs,
            "split_seed": split_seed,
            "validation_fraction": validation_fraction,
            "test_fraction": test_fraction,
            "split_sizes": {
                "train": len(split.train),
                "validation": len(split.validation),
                "test": len(split.test),
            },
            "splits": {part: os.path.relpath(run.split_path(part), run.path) for part in ("train", "validation", "test")},
            "source_tokenizer": os.path.basename(source_path),
            "target_tokenizer": os.path.basename(target_path),
            "joint_vocabulary": bool(joint_vocabulary),
            "dictionary": None if dictionary is None else {
                "path": os.path.abspath(dictionary), "pairs": len(dictionary_pairs),
                "tagged": bool(dictionary_tag)},
            "bidirectional": bool(bidirectional),
            # What the source tokenizer puts before every sentence (`RunFolder.tokenizers`).
            "source_prefix": source_prefix,
            "max_source_length": min(DEFAULT_MAX_SOURCE_LENGTH, model_config.max_length),
            "max_target_length": min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length),
        },
    }
    run.write_config(config)
    return config


# Under XLA, batch widths are padded up to multiples of this: one compiled shape each.
STATIC_WIDTH_STEP = 8


def training_width_step(static_shapes):
    """The `width_step` of a training pipeline: what its batches' widths will be padded to."""
    return STATIC_WIDTH_STEP if static_shapes else 1


def pad_to_static_shapes(
    dataset, max_length, token_budget=None, rows=None, pad_rows=True, step=STATIC_WIDTH_STEP
):
    """Pads batches to a few fixed shapes, so XLA compiles only those (every task).

    The (B, L) id tensors of a batch (a translator's encoder, decoder and label
    tokens; a language model's tokens and labels; a classifier's tokens) all get the
    width L' = the widest of them rounded up to a multiple of `step` (at most
    `max_length`), and with `pad_rows` B' = `rows`, or `token_budget // L'` (the
    size of a full batch of its bucket in the token-budgeted pipeline). Extra rows
    and columns are padding, which the losses and metrics ignore. (B,) tensors (a
    classifier's labels, which have no padding value) stay as they are, and so do
    the rows when `pad_rows` is False.
    """
    import tensorflow as tf

    from keras_transformer.constants import PAD_ID
    from keras_transformer.data.pipeline import round_up

    @tf.autograph.experimental.do_not_convert  # plain tensor ops, nothing to convert
    def pad(*element):
        tokens = [t for t in tf.nest.flatten(element) if t.shape.rank == 2]
        count = tf.shape(tokens[0])[0]
        longest = tf.reduce_max(tf.stack([tf.shape(t)[1] for t in tokens]))
        length = tf.minimum(round_up(longest, step), max_length)
        batch = tf.maximum(token_budget // length if rows is None else rows, count) if pad_rows else count

        def to_shape(tensor):
            if tensor.shape.rank != 2:
                return tensor
            return tf.pad(tensor, [[0, batch - count], [0, length - tf.shape(tensor)[1]]],
                          constant_values=PAD_ID)

        return tf.nest.map_structure(to_shape, element)

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)


def for_fit(train, validation):
    """The training and validation pipelines with the `tf.data` options `fit` needs.

    - Every worker builds the same pipeline and takes its share of every batch
      (`AutoShardPolicy.DATA`).
    - No autotuning. Keras (3.15) makes a new iterator of each dataset every epoch
      and drops the one before, partly read (it makes one at each epoch's end to
      read the next). Deleting an autotuned iterator waits for its tuning thread,
      which sleeps between rounds, twice as long each round up to 60 s: a
      translation run on a 2-core CPU sat idle for about 50 s at the start of
      every other epoch or of its validation (106-step epochs alternating 142 s
      and 90 s; without autotuning, 88-89 s each). The pipelines cache their
      examples after the first epoch, so the tuning had little to gain.

    Args:
        train: the training `tf.data.Dataset`.
        validation: the validation `tf.data.Dataset`.

    Returns:
        `(train, validation)` with those options.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.autotune.enabled = False
    return train.with_options(options), validation.with_options(options)


def check_concatenation(config, task, bidirectional):
    """Refuses `--concatenate` where it has no two pairs of one direction to join.

    Args:
        config: the `TrainingConfig`.
        task: the run's task.
        bidirectional: whether the translation run teaches both directions.

    Raises:
        ValueError: for a language model, a classifier or a bidirectional run.
    """
    if not config.concatenation:
        return
    if task != "translate":
        raise ValueError(
            f"--concatenate joins sentence pairs, for a translator; this run's task is {task!r} "
            "(train it without --concatenate)."
        )
    if bidirectional:
        raise ValueError(
            "--concatenate would join pairs of opposite directions in a bidirectional run; "
            "train it without --concatenate."
        )


def make_datasets(run_dir, run_config, config, seed, static_shapes=False):
    """The training and validation `tf.data` pipelines of a run folder.

    Args:
        run_dir: the `RunFolder`.
        run_config: its parsed config.json.
        config: the `TrainingConfig` (batch sizes).
        seed: seed of the training data order.
        static_shapes: pad batches to a few fixed shapes (for XLA).
    """
    from keras_transformer.data.pipeline import make_eval_dataset
    from keras_transformer.data.pipeline import make_training_dataset

    data = run_config["data"]
    source_tokenizer, target_tokenizer = run_dir.tokenizers()
    # A bidirectional run's training sources carry their own direction tags; the
    # validation sources get the run's, as sentences to translate do.
    validation_source_tokenizer = source_tokenizer
    source_tokenizer = source_tokenizer.with_prefix("")
    lengths = dict(
        max_source_length=data["max_source_length"], max_target_length=data["max_target_length"]
    )
    train_sources, train_targets = run_dir.read_split("train")
    validation_sources, validation_targets = run_dir.read_split("validation")
    train = make_training_dataset(
        train_sources,
        train_targets,
        source_tokenizer,
        target_tokenizer,
        token_budget=config.token_budget,
        batching=config.batching,
        width_step=training_width_step(static_shapes),
        seed=seed,
        sample_alpha=config.subword_sampling,
        word_dropout=config.word_dropout,
        concatenation=config.concatenation,
        **lengths,
    )
    validation = make_eval_dataset(
        validation_sources,
        validation_targets,
        validation_source_tokenizer,
        target_tokenizer,
        batch_size=config.validation_batch_size,
        **lengths,
    )
    if static_shapes:
        max_length = max(lengths.values())
        train = pad_to_static_shapes(train, max_length, token_budget=config.token_budget)
        validation = pad_to_static_shapes(validation, max_length, rows=config.validation_batch_size)
    return for_fit(train, validation)


class TranslationTask(Task):
    """A `Seq2SeqTransformer` on sentence pairs (`prepare_run`, `make_datasets` above)."""

    name = "translate"

    def prepare(self, run_dir, data, preset, src="zh", tgt="en", **options):
        return prepare_run(run_dir, data, src, tgt, preset, **options)

    def make_datasets(self, run, run_config, config, seed, static_shapes=False):
        return make_datasets(run, run_config, config, seed, static_shapes=static_shapes)

    def loss(self, run_config, config):
        from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy

        return MaskedSparseCategoricalCrossentropy(
            label_smoothing=config.label_smoothing,
            gradient_denominator=config.gradient_denominator,
        )

    def metrics(self, run_config):
        from keras_transformer.training.losses import MaskedTokenAccuracy

        return [MaskedTokenAccuracy()]


class _TextTask(Task):
    """A task on single texts (lm, classify): one tokenizer, the `split_texts` split."""

    def _read(self, data):
        """(labels or None, texts) of the data of a new run."""
        raise NotImplementedError

    def _write_split(self, run, part, labels, texts):
        raise NotImplementedError

    def _write_extras(self, run, labels):
        """Writes the task's own files of a new run; returns their entries of config.json's "data"."""
        return {}

    def prepare(
        self,
        run_dir,
        data,
        preset,
        max_examples=None,
        split_seed=0,
        validation_fraction=0.05,
        test_fraction=0.05,
        vocab_size=None,
        model_overrides=None,
    ):
        """Splits the texts, trains tokenizer.model and writes config.json.

        Args:
            run_dir: the run folder (created).
            data: a `TextFile` ("lm") or a `LabelledFile` ("classify").
            preset: model preset name.
            max_examples: use only the first this many examples (None: all).
            split_seed: seed of the split.
            validation_fraction: share of texts for validation.
            test_fraction: share of texts for test.
            vocab_size: SentencePiece vocabulary size (None: the measured default
                of the data's language, `default_vocab_size`).
            model_overrides: TransformerConfig fields to change from the preset.

        Returns:
            The run config (written to config.json).
        """
        from keras_transformer.data.corpus import split_texts
        from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
        from keras_transformer.data.tokenizer import SubwordTokenizer
        from keras_transformer.data.tokenizer import character_coverage_for
        from keras_transformer.data.tokenizer import default_vocab_size
        from keras_transformer.data.tokenizer import train_sentencepiece
        from keras_transformer.models.config import preset as make_preset

        run = RunFolder(run_dir)
        if data is None:
            raise ValueError(f"{run_dir} is not a run folder yet: pass the data (--data).")
        labels, texts = self._read(data)
        if max_examples is not None:
            texts = texts[:max_examples]
            labels = None if labels is None else labels[:max_examples]
        parts = split_texts(texts, validation_fraction, test_fraction, seed=split_seed)
        train, validation, test = parts
        if not train or not validation:
            raise ValueError(
                f"The split of {len(texts)} texts leaves {len(train)} for training and "
                f"{len(validation)} for validation; use more data."
            )
        for part, indices in zip(("train", "validation", "test"), parts):
            self._write_split(
                run, part, None if labels is None else [labels[i] for i in indices], [texts[i] for i in indices]
            )
        language = data.language or ""
        size = vocab_size or default_vocab_size(language)
        try:
            model_proto = train_sentencepiece([texts[i] for i in train], size, character_coverage_for(language))
        except RuntimeError as error:  # SentencePiece reports bad sizes this way.
            raise ValueError(
                f"Training the tokenizer ({size} pieces) failed: {error}. Choose another --vocab-size."
            ) from None
        run.write_tokenizer(model_proto)
        vocab = SubwordTokenizer(model_proto).vocab_size
        model_config = make_preset(
            preset,
            **{"source_vocab_size": vocab, "target_vocab_size": vocab, **(model_overrides or {})},
        )
        config = {
            "format_version": FORMAT_VERSION,
            "task": self.name,
            "preset": preset,
            "model": model_config.to_dict(),
            "data": {
                **data.describe(),
                "max_examples": max_examples,
                "split_seed": split_seed,
                "validation_fraction": validation_fraction,
                "test_fraction": test_fraction,
                "split_sizes": {"train": len(train), "validation": len(validation), "test": len(test)},
                "splits": {part: os.path.relpath(run.split_path(part), run.path)
                           for part in ("train", "validation", "test")},
                "tokenizer": os.path.relpath(run.tokenizer_file, run.path),
                "vocab_size": vocab,
                "max_length": min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length),
                **self._write_extras(run, labels),
            },
        }
        run.write_config(config)
        return config

    def _finish(self, train, validation, static_shapes, run_config, config, pad_rows):
        if static_shapes:
            max_length = run_config["data"]["max_length"]
            train = pad_to_static_shapes(train, max_length, config.token_budget, pad_rows=pad_rows)
            validation = pad_to_static_shapes(
                validation, max_length, rows=config.validation_batch_size if pad_rows else None,
                pad_rows=pad_rows,
            )
        return for_fit(train, validation)


class LanguageModelTask(_TextTask):
    """A decoder-only language model on one text a line (`build_language_model`).

    The model reads `BOS y_1 .. y_n` and predicts `y_1 .. y_n EOS`; padding is id 0
    and is masked out of the loss and metrics.
    """

    name = "lm"

    def _read(self, data):
        from keras_transformer.data.corpus import TextFile

        if not isinstance(data, TextFile):
            data = TextFile(os.fspath(data))
        return None, data.read()

    def _write_split(self, run, part, labels, texts):
        run.write_texts(part, texts)

    def make_datasets(self, run, run_config, config, seed, static_shapes=False):
        from keras_transformer.data.pipeline import make_lm_eval_dataset
        from keras_transformer.data.pipeline import make_lm_training_dataset

        tokenizer = run.tokenizer()
        max_length = run_config["data"]["max_length"]
        train = make_lm_training_dataset(
            run.read_texts("train"), tokenizer, token_budget=config.token_budget,
            max_length=max_length, seed=seed, batching=config.batching,
            width_step=training_width_step(static_shapes), word_dropout=config.word_dropout,
        )
        validation = make_lm_eval_dataset(
            run.read_texts("validation"), tokenizer, batch_size=config.validation_batch_size,
            max_length=max_length,
        )
        return self._finish(train, validation, static_shapes, run_config, config, pad_rows=True)

    def loss(self, run_config, config):
        from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy

        return MaskedSparseCategoricalCrossentropy(
            label_smoothing=config.label_smoothing,
            gradient_denominator=config.gradient_denominator,
        )

    def metrics(self, run_config):
        from keras_transformer.training.losses import MaskedPerplexity
        from keras_transformer.training.losses import MaskedTokenAccuracy

        return [MaskedTokenAccuracy(), MaskedPerplexity()]


class ClassificationTask(_TextTask):
    """An encoder classifier on label<TAB>text examples (`build_classifier`).

    The labels are read from the data of a new run, sorted, and stored in
    labels.json: class id i is the i-th label.
    """

    name = "classify"

    def _read(self, data):
        from keras_transformer.data.corpus import LabelledFile

        if not isinstance(data, LabelledFile):
            data = LabelledFile(os.fspath(data))
        labels, texts = data.read()
        found = sorted(set(labels))
        if len(found) < 2:
            raise ValueError(
                f"{data.path} has one label ({found[0]!r}) in column {data.label_column}; a "
                "classifier needs at least two (is --label-column right?)."
            )
        return labels, texts

    def _write_split(self, run, part, labels, texts):
        run.write_labelled(part, labels, texts)

    def _write_extras(self, run, labels):
        names = sorted(set(labels))
        run.write_labels(names)
        return {"num_classes": len(names), "labels": os.path.relpath(run.labels_path, run.path)}

    def make_datasets(self, run, run_config, config, seed, static_shapes=False):
        from keras_transformer.data.corpus import class_ids
        from keras_transformer.data.pipeline import make_classification_eval_dataset
        from keras_transformer.data.pipeline import make_classification_training_dataset

        tokenizer = run.tokenizer()
        names = run.read_labels()
        max_length = run_config["data"]["max_length"]
        train_labels, train_texts = run.read_labelled("train")
        validation_labels, validation_texts = run.read_labelled("validation")
        train = make_classification_training_dataset(
            train_texts, class_ids(names, train_labels, "train split"), tokenizer,
            token_budget=config.token_budget, max_length=max_length, seed=seed,
            batching=config.batching, width_step=training_width_step(static_shapes),
            word_dropout=config.word_dropout,
        )
        validation = make_classification_eval_dataset(
            validation_texts, class_ids(names, validation_labels, "validation split"), tokenizer,
            batch_size=config.validation_batch_size, max_length=max_length,
        )
        # Extra rows would need a label, and every label is a real class: only the
        # length is padded to a fixed width.
        return self._finish(train, validation, static_shapes, run_config, config, pad_rows=False)

    def loss(self, run_config, config):
        from keras_transformer.training.losses import ClassificationCrossEntropy

        return ClassificationCrossEntropy(
            label_smoothing=config.label_smoothing,
            gradient_denominator=config.gradient_denominator,
        )

    def metrics(self, run_config):
        import keras

        from keras_transformer.training.losses import MacroF1

        return [
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            MacroF1(run_config["data"]["num_classes"]),
        ]


_TASKS = {task.name: task for task in (TranslationTask(), LanguageModelTask(), ClassificationTask())}
