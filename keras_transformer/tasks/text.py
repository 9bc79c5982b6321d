"""What the two tasks on single texts share (a language model, a classifier): one
tokenizer, the `split_texts` split of a new run, the batches of `fit`.
"""

import os

from keras_transformer.runs.folder import RunFolder
from keras_transformer.tasks.base import Task

FORMAT_VERSION = 1


class TextTask(Task):
    """A task on single texts (lm, classify): one tokenizer, the `split_texts` split.

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
    def _read(cls, data):
        """(labels or None, texts) of the data of a new run."""
        raise NotImplementedError

    @classmethod
    def _write_split(cls, run, part, labels, texts):
        raise NotImplementedError

    @classmethod
    def _write_extras(cls, run, labels, init_from=None):
        """Writes the task's own files of a new run; returns their entries of config.json's "data"."""
        return {}

    @classmethod
    def _check_init_labels(cls, init_from, labels):
        """Refuses data a model to fine-tune cannot learn (a classifier: unknown classes)."""

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
            model_overrides: `BackboneConfig` settings to change from the preset.
            init_from: `(config, folder)` of a trained model of this task to
                fine-tune: its tokenizer, model shape (and a classifier's class
                names) are the run's; no tokenizer is trained.

        Returns:
            The run config (written to config.json).
        """
        from keras_transformer.data.corpus import split_texts
        from keras_transformer.data.pipeline import DEFAULT_MAX_TARGET_LENGTH
        from keras_transformer.data.tokenizer import SubwordTokenizer
        from keras_transformer.data.tokenizer import character_coverage_for
        from keras_transformer.data.tokenizer import default_vocab_size
        from keras_transformer.data.tokenizer import train_sentencepiece
        from keras_transformer.models.config import BackboneConfig
        from keras_transformer.models.config import preset as make_preset

        run = RunFolder(run_dir)
        if data is None:
            raise ValueError(f"{run_dir} is not a run folder yet: pass the data (--data).")
        labels, texts = cls._read(data)
        if init_from is not None:
            cls._check_init_labels(init_from, labels)
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
            cls._write_split(
                run, part, None if labels is None else [labels[i] for i in indices], [texts[i] for i in indices]
            )
        if init_from is not None:
            init_config, init_folder = init_from
            with open(os.path.join(init_folder, init_config["data"]["tokenizer"]), "rb") as file:
                model_proto = file.read()
            model_config = BackboneConfig.from_dict(init_config["model"])
            preset = init_config.get("preset")
        else:
            language = data.language or ""
            size = vocab_size or default_vocab_size(language)
            try:
                model_proto = train_sentencepiece([texts[i] for i in train], size,
                                                  character_coverage_for(language))
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
        config = {
            "format_version": FORMAT_VERSION,
            "task": cls.name,
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
                "vocab_size": SubwordTokenizer(model_proto).vocab_size,
                "max_length": min(DEFAULT_MAX_TARGET_LENGTH, model_config.max_length),
                **cls._write_extras(run, labels, init_from),
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
                       vocab_size=args.vocab_size)
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
    def _finish(cls, train, validation, static_shapes, run_config, config, pad_rows):
        from keras_transformer.data.fitting import for_fit
        from keras_transformer.data.fitting import pad_to_static_shapes

        if static_shapes:
            max_length = run_config["data"]["max_length"]
            train = pad_to_static_shapes(train, max_length, config.token_budget, pad_rows=pad_rows)
            validation = pad_to_static_shapes(
                validation, max_length, rows=config.validation_batch_size if pad_rows else None,
                pad_rows=pad_rows,
            )
        return for_fit(train, validation)
