"""What the two tasks on single texts share (a language model, a classifier): one
tokenizer, the streamed corpus of a new run (split by the normalized text), the
batches of `fit`.
"""

import os

from keras_transformer.runs.folder import RunFolder
from keras_transformer.tasks.base import Task

FORMAT_VERSION = 1


class TextTask(Task):
    """A task on single texts (lm, classify): one tokenizer, a streamed corpus split by its text.

    Args:
        model: the Keras model.
        tokenizer: its `SubwordTokenizer`.
        config: the parsed config.json ("data": "max_length", "vocab_size", ...).
        weights: for a run, the `Weights` loaded.
    """

    def __init__(self, model, tokenizer, config, weights=None):
        super().__init__(model, config, weights)
        self.tokenizer = tokenizer

    @classmethod
    def from_preset_name(cls, name, tokenizer=None, max_length=None, labels=None, **model_fields):
        """A new model of a built-in preset's shape.

        Args:
            name: "tiny", "small", "base" or "big".
            tokenizer: a `SubwordTokenizer` or the path of a SentencePiece .model file.
            max_length: subwords per example (default: the pipeline's, at most the
                preset's max_length).
            labels: a classifier's class names.
            **model_fields: `BackboneConfig` settings to change (`BackboneConfig.replace`).
        """
        from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
        from keras_transformer.models.config import preset
        from keras_transformer.tasks.translator import _tokenizer

        if tokenizer is None:
            raise ValueError(
                f"A new {cls.title} model of preset {name!r} needs `tokenizer` (a SubwordTokenizer "
                "or a SentencePiece .model file)."
            )
        tokenizer = _tokenizer(tokenizer)
        vocab = tokenizer.vocab_size
        model_config = preset(name, cls.backbone_shape, **{"vocab_size": vocab, **model_fields})
        data = {"vocab_size": vocab,
                "max_length": max_length or min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length)}
        if labels is not None:
            data["num_classes"] = len(labels)
        config = {"task": cls.name, "preset": name, "model": model_config.to_dict(), "data": data}
        return cls._new(cls.build_model(config), tokenizer, config, labels)

    @classmethod
    def _new(cls, model, tokenizer, config, labels):
        return cls(model, tokenizer, config)

    @classmethod
    def from_folder(cls, folder, config, weights_path, weights=None):
        from keras_transformer.data.tokenizer import SubwordTokenizer

        model = cls.build_model(config)
        if weights_path is not None:
            model.load_weights(weights_path)
        tokenizer = SubwordTokenizer.from_file(os.path.join(folder, config["data"]["tokenizer"]))
        return cls._from_parts(model, tokenizer, config, folder, weights)

    @classmethod
    def _from_parts(cls, model, tokenizer, config, folder, weights):
        return cls(model, tokenizer, config, weights)

    def tokenizer_files(self):
        return {"tokenizer": self.tokenizer.model_proto}

    @classmethod
    def _spec(cls, data):
        """The task's corpus description (`TextFile`, `LabelledFile`) of `data` (or of its path)."""
        raise NotImplementedError

    @classmethod
    def _labels_of(cls, spec, found):
        """A classifier's class names from the scanned labels (None for a language model)."""
        return None

    @classmethod
    def _write_part(cls, run, part, examples):
        """Writes a held-out part: `examples` are tuples of the layout's fields."""
        raise NotImplementedError

    @classmethod
    def _write_extras(cls, run, labels, init_from=None):
        """Writes the task's own files of a new run; returns their entries of config.json's "data"."""
        return {}

    @classmethod
    def _check_init_labels(cls, init_from, labels):
        """Refuses data a model to fine-tune cannot learn (a classifier: unknown classes)."""

    @classmethod
    def _examples(cls, strings, tokenizer, max_length, labels=None, batched=False):
        """Tokenized examples (`pipeline`'s) of a dataset of the layout's string tuples
        (`batched`: their tokenized batches, sequences ragged)."""
        raise NotImplementedError

    @classmethod
    def prepare(
        cls,
        run_dir,
        data,
        preset,
        max_examples=None,
        split_seed=0,
        validation_fraction=0.05,
        test_fraction=0.05,
        vocab_size=None,
        model_overrides=None,
        init_from=None,
        max_held_out=None,
        vocab_sample=None,
    ):
        """Scans the texts once, writes the held-out parts, trains tokenizer.model, writes config.json.

        The split and the samples are those of a translation run
        (`keras_transformer.tasks.translator.prepare_run`), keyed by the normalized text.

        Args:
            run_dir: the run folder (created).
            data: a `TextFile` ("lm") or a `LabelledFile` ("classify"), or a path;
                paths may be glob patterns, files may be gzipped.
            preset: model preset name.
            max_examples: use only the first this many examples, in file order (None: all).
            split_seed: seed of the split.
            validation_fraction: share of texts for validation (before the cap).
            test_fraction: share of texts for test (before the cap).
            vocab_size: SentencePiece vocabulary size (None: the measured default
                of the data's language, `default_vocab_size`).
            model_overrides: `BackboneConfig` settings to change from the preset.
            init_from: `(config, folder)` of a trained model of this task to
                fine-tune: its tokenizer, model shape (and a classifier's class
                names) are the run's; no tokenizer is trained.
            max_held_out: most examples kept in validation and in test each.
            vocab_sample: most training texts the tokenizer learns from.

        Returns:
            The run config (written to config.json).
        """
        from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
        from keras_transformer.data.pipeline import example_length_counts
        from keras_transformer.data.streaming import DEFAULT_MAX_HELD_OUT
        from keras_transformer.data.streaming import DEFAULT_VOCAB_SAMPLE
        from keras_transformer.data.streaming import SplitRule
        from keras_transformer.data.streaming import layout_of
        from keras_transformer.data.streaming import scan
        from keras_transformer.data.tokenizer import SubwordTokenizer
        from keras_transformer.data.tokenizer import character_coverage_for
        from keras_transformer.data.tokenizer import default_vocab_size
        from keras_transformer.data.tokenizer import train_sentencepiece
        from keras_transformer.models.config import BackboneConfig
        from keras_transformer.models.config import preset as make_preset
        from keras_transformer.tasks.translator import _check_sizes
        from keras_transformer.tasks.translator import _stream_record

        run = RunFolder(run_dir)
        if data is None:
            raise ValueError(f"{run_dir} is not a run folder yet: pass the data (--data).")
        spec = cls._spec(data)
        max_held_out = DEFAULT_MAX_HELD_OUT if max_held_out is None else max_held_out
        vocab_sample = DEFAULT_VOCAB_SAMPLE if vocab_sample is None else vocab_sample
        _check_sizes(max_held_out=max_held_out, vocab_sample=vocab_sample, max_pairs=max_examples)
        layout = layout_of(spec)
        found = scan(layout, SplitRule(split_seed, validation_fraction, test_fraction), max_held_out,
                     vocab_sample, max_examples=max_examples, collect_labels=cls.labelled)
        labels = cls._labels_of(spec, found)
        if init_from is not None:
            cls._check_init_labels(init_from, labels)
        if not found.train_examples or not found.validation:
            raise ValueError(
                f"The split of {found.lines} texts leaves {found.train_examples} for training and "
                f"{len(found.validation)} for validation; use more data."
            )
        for part in ("validation", "test"):
            cls._write_part(run, part, getattr(found, part))
        texts = [example[layout.key] for example in found.sample]
        if init_from is not None:
            init_config, init_folder = init_from
            with open(os.path.join(init_folder, init_config["data"]["tokenizer"]), "rb") as file:
                model_proto = file.read()
            model_config = BackboneConfig.from_dict(init_config["model"])
            preset = init_config.get("preset")
        else:
            language = spec.language or ""
            size = vocab_size or default_vocab_size(language)
            try:
                model_proto = train_sentencepiece(texts, size, character_coverage_for(language))
            except RuntimeError as error:  # SentencePiece reports bad sizes this way.
                raise ValueError(
                    f"Training the tokenizer ({size} pieces) failed: {error}. Choose another "
                    "--vocab-size."
                ) from None
            vocab = SubwordTokenizer(model_proto).vocab_size
            model_config = make_preset(
                preset, cls.backbone_shape, **{"vocab_size": vocab, **(model_overrides or {})}
            )
        run.write_tokenizer(model_proto)
        max_length = min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length)
        sample = _string_dataset(found.sample)
        extras = cls._write_extras(run, labels, init_from)
        length_counts = example_length_counts(
            cls._examples(sample, SubwordTokenizer(model_proto), max_length,
                          run.read_labels() if labels is not None else None, batched=True), max_length)
        config = {
            "format_version": FORMAT_VERSION,
            "task": cls.name,
            "preset": preset,
            "model": model_config.to_dict(),
            "data": {
                **spec.describe(),
                **_stream_record(layout, found, max_examples, max_held_out, vocab_sample,
                                 found.train_examples),
                "length_counts": length_counts,
                "split_seed": split_seed,
                "validation_fraction": validation_fraction,
                "test_fraction": test_fraction,
                "splits": {part: os.path.relpath(run.split_path(part), run.path)
                           for part in ("validation", "test")},
                "tokenizer": os.path.relpath(run.tokenizer_file, run.path),
                "vocab_size": SubwordTokenizer(model_proto).vocab_size,
                "max_length": max_length,
                **extras,
            },
        }
        run.write_config(config)
        return config

    @classmethod
    def data_from_args(cls, args):
        from keras_transformer.tasks.base import refuse_options

        refuse_options(args, ("source_file", "target_file", "src", "tgt", "src_column",
                              "tgt_column", "source_vocab_size", "target_vocab_size",
                              "joint_vocabulary", "bidirectional"), cls.name)
        options = dict(max_examples=args.max_pairs, split_seed=args.split_seed,
                       vocab_size=args.vocab_size, max_held_out=args.max_held_out,
                       vocab_sample=args.vocab_sample)
        return cls._data_file(args), options

    @classmethod
    def _data_file(cls, args):
        """The task's file of texts that the flags name (None: no --data)."""
        raise NotImplementedError

    @classmethod
    def _tokenizer(cls, run, run_config):
        from keras_transformer.data.tokenizer import SubwordTokenizer

        return SubwordTokenizer.from_file(run.tokenizer_path())

    @classmethod
    def make_datasets(cls, run, run_config, config, seed, static_shapes=False, first_epoch=0,
                      shard=0, num_shards=1):
        """The training stream, the validation batches and the steps of an epoch (see the
        translator's `make_datasets`)."""
        from keras_transformer.data.fitting import training_width_step
        from keras_transformer.data.pipeline import _batched
        from keras_transformer.data.pipeline import epochs
        from keras_transformer.data.pipeline import with_word_dropout
        from keras_transformer.data.streaming import pass_strings
        from keras_transformer.data.streaming import stream_of

        data = run_config["data"]
        layout, rule, steps = stream_of(run, data, config, static_shapes, num_shards)
        tokenizer = cls._tokenizer(run, run_config)
        labels = run.read_labels() if "labels" in data else None
        max_length = data["max_length"]

        def one_pass(epoch):
            strings = pass_strings(layout, rule, epoch, seed, shard=shard, num_shards=num_shards,
                                   max_examples=data["max_examples"])
            examples = cls._examples(strings, tokenizer, max_length, labels)
            return _batched(
                examples, sequences=(0,), padding_values=cls.padding_values, max_length=max_length,
                token_budget=config.token_budget // num_shards, batching=config.batching,
                width_step=training_width_step(static_shapes), seed=seed,
            )

        train = with_word_dropout(epochs(one_pass, first_epoch, steps), config.word_dropout,
                                  seed + first_epoch, tokenizer.first_text_id)
        validation = cls._validation(run, tokenizer, config, max_length, labels)
        return (*cls._finish(train, validation, static_shapes, run_config, config), steps)

    @classmethod
    def _validation(cls, run, tokenizer, config, max_length, labels):
        """The validation batches of a run."""
        raise NotImplementedError

    #: Whether the examples carry a label (field 0), whose values the scan collects.
    labelled = False
    #: The padding of an example's tensors (tokens, labels) in a batch.
    padding_values = None
    #: Whether `pad_to_static_shapes` may add rows (every row of a language model's
    #: is padding; a classifier's labels have no padding value).
    pad_rows = True

    @classmethod
    def _finish(cls, train, validation, static_shapes, run_config, config):
        from keras_transformer.data.fitting import for_fit
        from keras_transformer.data.fitting import pad_to_static_shapes

        import tensorflow as tf

        pad_rows = cls.pad_rows
        if static_shapes:
            max_length = run_config["data"]["max_length"]
            train = pad_to_static_shapes(train, max_length, config.token_budget, pad_rows=pad_rows)
            validation = pad_to_static_shapes(
                validation, max_length, rows=config.validation_batch_size if pad_rows else None,
                pad_rows=pad_rows,
            )
        return for_fit(train.prefetch(tf.data.AUTOTUNE), validation)


def _string_dataset(examples):
    """A `tf.data.Dataset` of tuples of strings from a list of tuples (a bounded sample)."""
    import tensorflow as tf

    columns = tuple(zip(*examples)) if examples else ((),)
    return tf.data.Dataset.from_tensor_slices(
        tuple(tf.constant(list(column), dtype=tf.string) for column in columns))
