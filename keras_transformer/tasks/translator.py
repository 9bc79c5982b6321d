"""The translator: a `Seq2SeqTransformer` on sentence pairs, with its two tokenizers.

    translator = Translator.from_preset("runs/zh-en")
    translator.translate(["我们来试试。"], beam=4)       # ['Let's try.']
    translator.fit(tf.data.Dataset.from_tensor_slices((sources, targets)), epochs=1)

What a new translation run trains on (`prepare_run`: the corpus split, the tokenizers,
config.json) and its batches (`make_datasets`) live here too, with the string-level
calls, since they are what the task is.

Shape notation: B batch, S source length, T target length, K beam width.
"""

import dataclasses
import os
import shutil

from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.models.config import ENCODER_DECODER
from keras_transformer.runs.folder import RunFolder
from keras_transformer.tasks.base import Task

FORMAT_VERSION = 1
# The languages of a new translation run given no --src/--tgt.
DEFAULT_LANGUAGES = ("zh", "en")


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
    bidirectional=False,
    model_overrides=None,
    init_from=None,
    max_held_out=None,
    vocab_sample=None,
):
    """Scans the corpus once, writes its held-out parts, trains the tokenizers, writes `config.json`.

    The corpus is read as a stream (`keras_transformer.data.streaming.scan`): the
    split is decided pair by pair (`SplitRule`), validation and test keep at most
    `max_held_out` pairs each (written to the run), and the tokenizers learn from a
    sample of at most `vocab_sample` training pairs. The training part is not
    copied: config.json records the files (paths, sizes, SHA-256) it streams from.

    Args:
        run_dir: the run folder (created).
        data: the corpus: a `keras_transformer.data.corpus.PairFiles` (a TSV's
            columns or two line-aligned files; paths may be glob patterns, files
            may be gzipped), or the path of a tab-separated file.
        src: source language code.
        tgt: target language code.
        preset: model preset name ("tiny", "small", "base", "big").
        source_column: with a path: 0-based column of the source; None for the
            Tatoeba (cmn.txt) layout of `src`.
        target_column: likewise for the target.
        max_pairs: use only the first this many pairs, in file order (None: all).
        split_seed: seed of the train/validation/test split.
        validation_fraction: share of pairs for validation (before the cap).
        test_fraction: share of pairs for test (before the cap).
        source_vocab_size: None for the tokenizer's measured default.
        target_vocab_size: None for the default.
        joint_vocabulary: one SentencePiece model for both languages.
        dictionary: path of a dictionary TSV (`keras_transformer.data.dictionary`):
            its entries whose word occurs in a sampled training source sentence
            join the training stream (never validation or test).
        bidirectional: train both directions in one model, each source tagged
            with its output language (`keras_transformer.data.directions`); one
            vocabulary for both languages, tied embeddings.
        model_overrides: `BackboneConfig` settings to change from the preset.
        init_from: `(config, folder)` of a trained translator to fine-tune
            (`keras_transformer.tasks.read_model_config`): its tokenizers, source
            prefix and model shape are the run's (no tokenizer is trained; the
            vocabulary options and `model_overrides` are not read).
        max_held_out: most pairs kept in validation and in test each (None:
            `DEFAULT_MAX_HELD_OUT`).
        vocab_sample: most training pairs the tokenizers learn from (None:
            `DEFAULT_VOCAB_SAMPLE`).

    Returns:
        The run config (the dict written to `config.json`, without "training").
    """
    from keras_transformer.data.corpus import PairFiles
    from keras_transformer.data.corpus import SentencePair
    from keras_transformer.data.corpus import columns_for
    from keras_transformer.data.corpus import sources_and_targets
    from keras_transformer.data.pipeline import DEFAULT_MAX_SOURCE_LENGTH
    from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
    from keras_transformer.data.streaming import DEFAULT_MAX_HELD_OUT
    from keras_transformer.data.streaming import DEFAULT_VOCAB_SAMPLE
    from keras_transformer.data.streaming import SplitRule
    from keras_transformer.data.streaming import layout_of
    from keras_transformer.data.streaming import scan
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.data.tokenizer import train_tokenizers
    from keras_transformer.models.config import BackboneConfig
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
    max_held_out = DEFAULT_MAX_HELD_OUT if max_held_out is None else max_held_out
    vocab_sample = DEFAULT_VOCAB_SAMPLE if vocab_sample is None else vocab_sample
    _check_sizes(max_held_out=max_held_out, vocab_sample=vocab_sample, max_pairs=max_pairs)
    layout = layout_of(data)
    found = scan(layout, SplitRule(split_seed, validation_fraction, test_fraction), max_held_out,
                 vocab_sample, max_examples=max_pairs)
    if not found.train_examples or not found.validation:
        raise ValueError(
            f"The split of {found.lines} pairs leaves {found.train_examples} for training and "
            f"{len(found.validation)} for validation; use a larger corpus."
        )
    sample = [SentencePair(*pair) for pair in found.sample]
    dictionary_pairs = []
    if dictionary is not None:
        from keras_transformer.data.dictionary import entries_in
        from keras_transformer.data.dictionary import read_dictionary

        # The words of the sampled training sources: every source of a corpus no larger
        # than the sample (the bundled one), a sample's worth of words of a larger one.
        dictionary_pairs = entries_in(read_dictionary(dictionary, src, tgt), [p.source for p in sample])
        if found.train_examples > len(sample):
            print(f"keras-transformer train: the dictionary's words are those of {len(sample):,} "
                  f"sampled training sources of {found.train_examples:,} (--vocab-sample).", flush=True)
    sample += dictionary_pairs
    source_prefix, source_symbols = "", ()
    if bidirectional:
        from keras_transformer.data.directions import DIRECTION_TAGS
        from keras_transformer.data.directions import TO_TARGET_TAG
        from keras_transformer.data.directions import both_directions

        joint_vocabulary = True  # each side reads and writes both languages
        sample = both_directions(sample)
        source_prefix, source_symbols = TO_TARGET_TAG, DIRECTION_TAGS
    run.write_split("validation", [SentencePair(*pair) for pair in found.validation])
    run.write_split("test", [SentencePair(*pair) for pair in found.test])
    if dictionary_pairs:
        run.write_dictionary(dictionary_pairs)
    sample_sources, sample_targets = sources_and_targets(sample)
    if init_from is not None:
        init_config, init_folder = init_from
        source_path, target_path = (
            shutil.copyfile(os.path.join(init_folder, init_config["data"][entry]),
                            run.file(f"{side}.model"))
            for entry, side in (("source_tokenizer", "source"), ("target_tokenizer", "target")))
        model_config = BackboneConfig.from_dict(init_config["model"])
        preset = init_config.get("preset")
        source_prefix = init_config["data"].get("source_prefix", "")
        joint_vocabulary = model_config.share_vocabulary
    else:
        try:
            source_path, target_path = train_tokenizers(
                sample_sources,
                sample_targets,
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
        model_config = make_preset(
            preset,
            **{
                "source_vocab_size": SubwordTokenizer.from_file(source_path).vocab_size,
                "target_vocab_size": SubwordTokenizer.from_file(target_path).vocab_size,
                "share_vocabulary": bool(joint_vocabulary),
                **(model_overrides or {}),
            },
        )
    lengths = {"max_source_length": min(DEFAULT_MAX_SOURCE_LENGTH, model_config.max_length),
               "max_target_length": min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length)}
    train_examples = (found.train_examples + len(dictionary_pairs)) * (2 if bidirectional else 1)
    config = {
        "format_version": FORMAT_VERSION,
        "task": "translate",
        "preset": preset,
        "model": model_config.to_dict(),
        "data": {
            **data.describe(),
            **_stream_record(layout, found, max_pairs, max_held_out, vocab_sample, train_examples),
            "length_counts": _length_counts(source_path, target_path, sample_sources,
                                            sample_targets, lengths),
            "source_language": src,
            "target_language": tgt,
            "split_seed": split_seed,
            "validation_fraction": validation_fraction,
            "test_fraction": test_fraction,
            "splits": {part: os.path.relpath(run.split_path(part), run.path)
                       for part in ("validation", "test")},
            "source_tokenizer": os.path.basename(source_path),
            "target_tokenizer": os.path.basename(target_path),
            "joint_vocabulary": bool(joint_vocabulary),
            "dictionary": None if dictionary is None else {
                "path": os.path.abspath(dictionary), "pairs": len(dictionary_pairs),
                "file": os.path.relpath(run.dictionary_path, run.path) if dictionary_pairs else None},
            "bidirectional": bool(bidirectional),
            # What the source tokenizer puts before every sentence (`RunFolder.tokenizers`).
            "source_prefix": source_prefix,
            **lengths,
        },
    }
    run.write_config(config)
    return config


def _check_sizes(**sizes):
    for name, value in sizes.items():
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer; received {value}.")


def _stream_record(layout, found, max_examples, max_held_out, vocab_sample, train_examples):
    """The entries of config.json's "data" that say what the run streams and how it split it."""
    from keras_transformer.data.streaming import layout_record

    return {
        **layout_record(layout),
        "split": found.rule.to_dict(),
        "max_examples": max_examples,
        "max_held_out": max_held_out,
        "vocab_sample": vocab_sample,
        "split_sizes": {"train": train_examples, "validation": len(found.validation),
                        "test": len(found.test)},
    }


def _length_counts(source_path, target_path, sources, targets, lengths):
    """How many sampled training pairs have each length (`example_length_counts`)."""
    from keras_transformer.data.pipeline import _tokenized
    from keras_transformer.data.pipeline import example_length_counts
    from keras_transformer.data.pipeline import pairs_of
    from keras_transformer.data.tokenizer import SubwordTokenizer

    examples = _tokenized(pairs_of(sources, targets), SubwordTokenizer.from_file(source_path),
                          SubwordTokenizer.from_file(target_path), **lengths, batched=True)
    return example_length_counts(examples, max(lengths.values()))


def make_datasets(run_dir, run_config, config, seed, static_shapes=False, first_epoch=0, shard=0,
                  num_shards=1):
    """The training stream and the validation batches of a run folder.

    Args:
        run_dir: the `RunFolder`.
        run_config: its parsed config.json.
        config: the `TrainingConfig` (batch sizes).
        seed: seed of the training data order.
        static_shapes: pad batches to a few fixed shapes (for XLA).
        first_epoch: the epoch the training stream starts at (a resumed run's).
        shard: this worker's index among `num_shards` (each reads its own share).
        num_shards: the number of workers reading the training stream.

    Returns:
        `(train, validation, steps_per_epoch)`: the endless training stream
        (`pipeline.epochs`), the validation batches and the steps of an epoch.

    Raises:
        ValueError: in one line, when a corpus file changed since the run was prepared.
    """
    import tensorflow as tf

    from keras_transformer.data.fitting import for_fit
    from keras_transformer.data.fitting import pad_to_static_shapes
    from keras_transformer.data.fitting import training_width_step
    from keras_transformer.data.pipeline import epochs
    from keras_transformer.data.pipeline import make_eval_dataset
    from keras_transformer.data.pipeline import make_training_dataset
    from keras_transformer.data.pipeline import with_word_dropout
    from keras_transformer.data.streaming import stream_of

    data = run_config["data"]
    layout, rule, steps = stream_of(run_dir, data, config, static_shapes, num_shards)
    source_tokenizer, target_tokenizer = run_dir.tokenizers()
    # A bidirectional run's training sources carry their own direction tags; the
    # validation sources get the run's, as sentences to translate do.
    validation_source_tokenizer = source_tokenizer
    source_tokenizer = source_tokenizer.with_prefix("")
    if config.subword_sampling is not None:
        # Made here, not in the pass: a pass is built inside the stream's graph, and
        # a tokenizer's resources are made eagerly.
        source_tokenizer = source_tokenizer.sampling(config.subword_sampling)
        target_tokenizer = target_tokenizer.sampling(config.subword_sampling)
    lengths = dict(
        max_source_length=data["max_source_length"], max_target_length=data["max_target_length"]
    )

    def one_pass(epoch):
        return make_training_dataset(
            training_pairs(run_dir, run_config, epoch, seed, shard, num_shards, (layout, rule)),
            source_tokenizer, target_tokenizer,
            token_budget=config.token_budget // num_shards,
            batching=config.batching,
            width_step=training_width_step(static_shapes),
            seed=seed,
            **lengths,
        )

    train = epochs(one_pass, first_epoch, steps)
    train = with_word_dropout(train, config.word_dropout, seed + first_epoch,
                              source_tokenizer.first_text_id)
    validation_sources, validation_targets = run_dir.read_split("validation")
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
        train = pad_to_static_shapes(train, max_length, token_budget=config.token_budget // num_shards)
        validation = pad_to_static_shapes(validation, max_length, rows=config.validation_batch_size)
    train, validation = for_fit(train.prefetch(tf.data.AUTOTUNE), validation)
    return train, validation, steps


def training_pairs(run_dir, run_config, epoch, seed=0, shard=0, num_shards=1, stream=None):
    """One pass of a translation run's training pairs, as strings: the corpus's training
    part (this worker's share), its dictionary entries mixed in, both directions of a
    bidirectional run (each source tagged).

    Args:
        run_dir: the `RunFolder`.
        run_config: its parsed config.json.
        epoch: the epoch (an int or an int64 scalar tensor), which orders the pass.
        seed: the data seed.
        shard, num_shards: this worker's share.
        stream: `(layout, rule)` of the run, when already read (`streaming.stream_of`).

    Returns:
        A `tf.data.Dataset` of (source, target) tf.string scalars.
    """
    from keras_transformer.data.streaming import SplitRule
    from keras_transformer.data.streaming import dictionary_strings
    from keras_transformer.data.streaming import layout_from_record
    from keras_transformer.data.streaming import mixed
    from keras_transformer.data.streaming import pass_strings

    data = run_config["data"]
    layout, rule = stream or (layout_from_record(data), SplitRule.from_dict(data["split"]))
    pairs = pass_strings(layout, rule, epoch, seed, shard=shard, num_shards=num_shards,
                         max_examples=data["max_examples"])
    dictionary = data.get("dictionary") or {}
    if dictionary.get("file"):
        entries = dictionary_strings(run_dir.file(dictionary["file"]), epoch, seed, shard, num_shards)
        pairs = mixed(pairs, entries, data["split_sizes"]["train"], dictionary["pairs"], epoch, seed)
    if data["bidirectional"]:
        pairs = pairs.flat_map(_both_directions)
    return pairs


def _both_directions(source, target):
    """A training pair, both ways, each source tagged with its output language."""
    import tensorflow as tf

    from keras_transformer.data.directions import TO_SOURCE_TAG
    from keras_transformer.data.directions import TO_TARGET_TAG

    return tf.data.Dataset.from_tensor_slices(
        (tf.stack([TO_TARGET_TAG + source, TO_SOURCE_TAG + target]), tf.stack([target, source])))


class Translator(Task):
    """Translates text with an encoder–decoder model and its source and target tokenizers.

    Args:
        model: a `Seq2SeqTransformer`.
        source_tokenizer: the source `SubwordTokenizer` (with the run's source prefix).
        target_tokenizer: the target `SubwordTokenizer`.
        config: the parsed config.json ("model": its `BackboneConfig`;
            "data": "max_source_length", "max_target_length", ...).
        weights: for a run, the `Weights` loaded.

    Example:
        >>> translator = Translator.from_preset("runs/zh-en")  # doctest: +SKIP
        >>> translator.translate(["我们来试试。"])  # doctest: +SKIP
        ["Let's try."]
    """

    name = "translate"
    title = "translation"
    backbone_shape = ENCODER_DECODER
    scored_by_bleu = True

    def __init__(self, model, source_tokenizer, target_tokenizer, config, weights=None):
        super().__init__(model, config, weights)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

    @classmethod
    def from_preset_name(cls, name, source_tokenizer=None, target_tokenizer=None,
                         max_source_length=None, max_target_length=None, **model_fields):
        """A new translator of a built-in preset's shape.

        Args:
            name: "tiny", "small", "base" or "big".
            source_tokenizer: a `SubwordTokenizer` or the path of a SentencePiece
                .model file (`keras_transformer.data.tokenizer.train_tokenizers`).
            target_tokenizer: likewise, for the target language.
            max_source_length: source subwords read (default: the pipeline's, at
                most the preset's max_length).
            max_target_length: target subwords (default: likewise).
            **model_fields: `BackboneConfig` settings to change (`BackboneConfig.replace`).
        """
        from keras_transformer.data.pipeline import DEFAULT_MAX_SOURCE_LENGTH
        from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
        from keras_transformer.models.config import preset

        if source_tokenizer is None or target_tokenizer is None:
            raise ValueError(
                f"A new translator of preset {name!r} needs `source_tokenizer` and "
                "`target_tokenizer` (SubwordTokenizers or SentencePiece .model files)."
            )
        source_tokenizer, target_tokenizer = (_tokenizer(t) for t in (source_tokenizer, target_tokenizer))
        model_config = preset(name, **{
            "source_vocab_size": source_tokenizer.vocab_size,
            "target_vocab_size": target_tokenizer.vocab_size, **model_fields})
        config = {"task": cls.name, "preset": name, "model": model_config.to_dict(), "data": {
            "max_source_length": max_source_length or min(DEFAULT_MAX_SOURCE_LENGTH, model_config.max_length),
            "max_target_length": max_target_length or min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length),
            "source_prefix": source_tokenizer.prefix,
        }}
        return cls(cls.build_model(config), source_tokenizer, target_tokenizer, config)

    @classmethod
    def from_folder(cls, folder, config, weights_path, weights=None):
        from keras_transformer.data.tokenizer import SubwordTokenizer

        data = config["data"]
        model = cls.build_model(config)
        if weights_path is not None:
            model.load_weights(weights_path)
        source = SubwordTokenizer.from_file(os.path.join(folder, data["source_tokenizer"]),
                                            prefix=data.get("source_prefix", ""))
        target = SubwordTokenizer.from_file(os.path.join(folder, data["target_tokenizer"]))
        return cls(model, source, target, config, weights)

    @classmethod
    def build_model(cls, config):
        from keras_transformer.models.transformer import Seq2SeqTransformer

        return Seq2SeqTransformer(config["model"])

    def tokenizer_files(self):
        return {"source_tokenizer": self.source_tokenizer.model_proto,
                "target_tokenizer": self.target_tokenizer.model_proto}

    @property
    def max_source_length(self):
        return self.config["data"]["max_source_length"]

    # -- the string-level calls --------------------------------------------------------------
    def translation_module(self, beam=None, alpha=None, coverage=None, max_length=None,
                           jit_compile=False, parallel_searches=None, row_groups=None):
        """The `TranslationModule` (what `export` saves) with these search settings."""
        from keras_transformer.export.module import TranslationModule

        self._ensure_model()
        settings = (beam or DEFAULT_BEAM_WIDTH, DEFAULT_ALPHA if alpha is None else alpha,
                    DEFAULT_COVERAGE if coverage is None else coverage, max_length,
                    bool(jit_compile), parallel_searches, row_groups)
        return self._module(settings, lambda: TranslationModule(
            self.model, self.source_tokenizer, self.target_tokenizer, self.max_source_length,
            beam_width=settings[0], alpha=settings[1], coverage=settings[2],
            max_output_length=max_length, jit_compile=jit_compile,
            parallel_searches=parallel_searches, row_groups=row_groups))

    def _export_settings(self, beam, alpha, coverage, max_length):
        """Refuses search settings an export cannot change (it searches as exported)."""
        from keras_transformer.evaluation.translators import find_setting

        exported = {"beam": find_setting(self._manifest, "beam_width"),
                    "alpha": find_setting(self._manifest, "alpha"),
                    "coverage": find_setting(self._manifest, "coverage")}
        asked = {"beam": beam, "alpha": alpha, "coverage": coverage}
        changed = [f"{key}={value} (exported: {exported[key]})" for key, value in asked.items()
                   if value is not None and exported[key] is not None and value != exported[key]]
        if max_length is not None:
            changed.append(f"max_length={max_length}")
        if changed:
            raise ValueError(
                f"{self._export_folder} searches as it was exported; received {', '.join(changed)}. "
                "Load the run or preset it was exported from to search otherwise."
            )

    def translate_n_best(self, texts, beam=None, alpha=None, coverage=None, max_length=None):
        """The K best translations of each text, with their scores.

        Args:
            texts: a list of source sentences.
            beam: K, the beam width (default 4; 1: greedy); an export's own.
            alpha: the length-penalty exponent (default 0.6).
            coverage: the coverage penalty's weight (default 0.2; 0: none).
            max_length: cap on output subwords (default: the model's).

        Returns:
            A list (one per text) of K `(translation, score)` pairs, best first.
        """
        import tensorflow as tf

        text = tf.constant([str(t) for t in texts], tf.string)
        if self._export is not None:
            self._export_settings(beam, alpha, coverage, max_length)
            result = self._export.signatures["translate_n_best"](text=text)
        else:
            result = self.translation_module(beam, alpha, coverage, max_length).translate_n_best(text)
        translations, scores = result["translations"].numpy(), result["scores"].numpy()
        return [[(t.decode("utf-8"), float(s)) for t, s in zip(row, row_scores)]
                for row, row_scores in zip(translations, scores)]

    def translate(self, texts, beam=None, alpha=None, coverage=None, max_length=None):
        """Translates each text (the best hypothesis of `translate_n_best`'s search).

        Returns:
            A list of translations, one per text.
        """
        import tensorflow as tf

        text = tf.constant([str(t) for t in texts], tf.string)
        if self._export is not None:
            self._export_settings(beam, alpha, coverage, max_length)
            result = self._export.signatures["serving_default"](text=text)
        else:
            result = self.translation_module(beam, alpha, coverage, max_length).translate(text)
        return [value.decode("utf-8") for value in result["translation"].numpy().tolist()]

    def export_parts(self, beam, alpha, coverage, max_length, xla, parallel_searches,
                     max_new_tokens):
        # An export splits a large batch as searches: the servers of `serving/` run one
        # thread per op, where searches are the faster way (`SequenceSearch`).
        module = self.translation_module(beam, alpha, coverage, max_length, xla, parallel_searches,
                                         row_groups=False)
        data = self.config["data"]
        return module, {
            "source_language": data.get("source_language"),
            "target_language": data.get("target_language"),
            "source_vocab_size": self.source_tokenizer.vocab_size,
            "target_vocab_size": self.target_tokenizer.vocab_size,
            "max_source_length": self.max_source_length,
            "decoding": {"beam_width": module.search.beam_width, "alpha": module.search.alpha,
                         "coverage": coverage, "xla": xla,
                         "parallel_searches": module.search.parallel_searches,
                         "row_groups": module.search.row_groups},
        }

    @classmethod
    def warmup_texts(cls, run_dir):
        return run_dir.read_split("test")[0][:4] or ["你好。"]

    # -- training -------------------------------------------------------------------------------
    def _encode_batch(self, source, target):
        from keras_transformer.constants import PAD_ID
        from keras_transformer.data.pipeline import encode_source
        from keras_transformer.data.pipeline import encode_target

        data = self.config["data"]
        # Training sources carry no direction tag of their own here: the run's prefix.
        encoder = encode_source(self.source_tokenizer, source, data["max_source_length"])
        decoder, labels = encode_target(self.target_tokenizer, target, data["max_target_length"])
        return ({"encoder_tokens": encoder.to_tensor(PAD_ID),
                 "decoder_tokens": decoder.to_tensor(PAD_ID)}, labels.to_tensor(PAD_ID))

    @classmethod
    def prepare(cls, run_dir, data, preset, src="zh", tgt="en", **options):
        """Splits the corpus, trains the tokenizers and writes config.json (`prepare_run`)."""
        return prepare_run(run_dir, data, src, tgt, preset, **options)

    @classmethod
    def make_datasets(cls, run, run_config, config, seed, static_shapes=False, first_epoch=0,
                      shard=0, num_shards=1):
        return make_datasets(run, run_config, config, seed, static_shapes=static_shapes,
                             first_epoch=first_epoch, shard=shard, num_shards=num_shards)

    @classmethod
    def training_loss(cls, config, training):
        from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy

        return MaskedSparseCategoricalCrossentropy(
            label_smoothing=training.label_smoothing,
            gradient_denominator=training.gradient_denominator,
        )

    @classmethod
    def training_metrics(cls, config):
        from keras_transformer.training.losses import MaskedTokenAccuracy

        return [MaskedTokenAccuracy()]

    @classmethod
    def data_from_args(cls, args):
        from keras_transformer.data.corpus import pair_files
        from keras_transformer.tasks.base import refuse_options

        refuse_options(args, ("column", "label_column", "text_column", "language", "vocab_size"),
                       cls.name)
        src, tgt = args.src or DEFAULT_LANGUAGES[0], args.tgt or DEFAULT_LANGUAGES[1]
        options = dict(
            src=src,
            tgt=tgt,
            max_pairs=args.max_pairs,
            split_seed=args.split_seed,
            source_vocab_size=args.source_vocab_size,
            target_vocab_size=args.target_vocab_size,
            joint_vocabulary=args.joint_vocabulary,
            dictionary=_dictionary(args.dictionary, src, tgt),
            bidirectional=args.bidirectional,
            max_held_out=args.max_held_out,
            vocab_sample=args.vocab_sample,
        )
        return pair_files(args, default_languages=DEFAULT_LANGUAGES), options


def _dictionary(choice, src, tgt):
    """The dictionary file of `--dictionary`: a path, the bundled one of the pair, or None."""
    if choice == "none":
        return None
    if choice != "auto":
        return choice
    from keras_transformer.data.dictionary import bundled_dictionary

    path = bundled_dictionary(src, tgt)
    return None if path is None else str(path)


def _tokenizer(tokenizer):
    from keras_transformer.data.tokenizer import SubwordTokenizer

    if isinstance(tokenizer, SubwordTokenizer):
        return tokenizer
    return SubwordTokenizer.from_file(os.fspath(tokenizer))
