"""The classifier: an encoder-only model on texts, with its tokenizer and class names.

    classifier = TextClassifier.from_preset("runs/sentence-type-en")
    classifier.classify(["What a day!"])    # [('exclamation', 0.93)]

Shape notation: B batch, S tokens, C classes.
"""

import os

from keras_transformer.models.config import ENCODER_ONLY
from keras_transformer.tasks.text import TextTask


class TextClassifier(TextTask):
    """An encoder classifier on label<TAB>text examples (`EncoderClassifier`).

    The labels are read from the data of a new run, sorted, and stored in
    labels.json: class id i is the i-th label.
    """

    name = "classify"
    title = "classification"
    backbone_shape = ENCODER_ONLY

    def __init__(self, model, tokenizer, labels, config, weights=None):
        super().__init__(model, tokenizer, config, weights)
        self.labels = tuple(labels)

    @classmethod
    def from_preset_name(cls, name, tokenizer=None, labels=None, max_length=None, **model_fields):
        """A new classifier of a built-in preset's shape: its tokenizer and class names."""
        if not labels or len(set(labels)) != len(labels):
            raise ValueError(f"A new classifier needs distinct class names (`labels`); received {labels!r}.")
        return super().from_preset_name(name, tokenizer=tokenizer, max_length=max_length,
                                        labels=[str(label) for label in labels], **model_fields)

    @classmethod
    def _from_parts(cls, model, tokenizer, config, folder, weights):
        from keras_transformer import files

        return cls(model, tokenizer, files.read_json(os.path.join(folder, config["data"]["labels"])),
                   config, weights)

    @classmethod
    def _new(cls, model, tokenizer, config, labels):
        return cls(model, tokenizer, labels, config)

    def _extra_files(self, folder):
        from keras_transformer.tasks.base import write_labels

        return write_labels(folder, self.labels)

    # -- the string-level call -------------------------------------------------------------
    def classification_module(self):
        """The `ClassificationModule` (what `export` saves)."""
        from keras_transformer.export.module import ClassificationModule

        self._ensure_model()
        return self._module("classify", lambda: ClassificationModule(
            self.model, self.tokenizer, self.labels, self.config["data"]["max_length"]))

    def probabilities(self, texts):
        """(B, C) float32 class probabilities of the texts, classes in `labels` order."""
        import tensorflow as tf

        text = tf.constant([str(t) for t in texts], tf.string)
        if self._export is not None:
            result = self._export.signatures["serving_default"](text=text)
        else:
            result = self.classification_module().classify_text(text)
        return result["probabilities"].numpy()

    def classify(self, texts):
        """The likeliest class of each text and its probability.

        Returns:
            A list of `(label, probability)` pairs, one per text.
        """
        probabilities = self.probabilities(texts)
        labels = self.labels if self._export is None else tuple(self._manifest["labels"])
        return [(labels[int(row.argmax())], float(row.max())) for row in probabilities]

    def export_parts(self, beam, alpha, coverage, max_length, xla, parallel_searches,
                     max_new_tokens):
        data = self.config["data"]
        return self.classification_module(), {
            "language": data.get("language"),
            "labels": list(self.labels),
            "vocab_size": self.tokenizer.vocab_size,
            "max_length": data["max_length"],
        }

    @classmethod
    def warmup_texts(cls, run_dir):
        return run_dir.read_labelled("test")[1][:4] or ["Hello"]

    # -- training ---------------------------------------------------------------------------
    def _encode_batch(self, text, label):
        import tensorflow as tf

        from keras_transformer.constants import PAD_ID
        from keras_transformer.data.pipeline import encode_source

        tokens = encode_source(self.tokenizer, text, self.config["data"]["max_length"])
        if label.dtype == tf.string:
            table = tf.constant(list(self.labels))
            matches = tf.equal(label[:, None], table[None, :])
            tf.debugging.assert_equal(
                tf.reduce_all(tf.reduce_any(matches, axis=1)), True,
                message=f"a label is not a class of the classifier; its classes: {list(self.labels)}")
            label = tf.argmax(tf.cast(matches, tf.int32), axis=1, output_type=tf.int32)
        return tokens.to_tensor(PAD_ID), tf.cast(label, tf.int32)

    @classmethod
    def build_model(cls, config):
        from keras_transformer.models.classifier import EncoderClassifier

        return EncoderClassifier(config["model"], num_classes=config["data"]["num_classes"])

    labelled = True
    padding_values = (0, 0)  # PAD_ID for the tokens; the label is a scalar, never padded
    # Extra rows would need a label, and every label is a real class: only the length
    # is padded to a fixed width.
    pad_rows = False

    @classmethod
    def _spec(cls, data):
        from keras_transformer.data.corpus import LabelledFile

        return data if isinstance(data, LabelledFile) else LabelledFile(os.fspath(data))

    @classmethod
    def _labels_of(cls, spec, found):
        if len(found.labels) < 2:
            raise ValueError(
                f"{spec.path} has one label ({found.labels[0]!r}) in column {spec.label_column}; a "
                "classifier needs at least two (is --label-column right?)."
            )
        return found.labels

    @classmethod
    def _data_file(cls, args):
        from keras_transformer.data.corpus import LabelledFile
        from keras_transformer.tasks.base import refuse_options

        refuse_options(args, ("column",), cls.name)
        if args.data is None:
            return None
        return LabelledFile(
            args.data,
            label_column=0 if args.label_column is None else args.label_column,
            text_column=1 if args.text_column is None else args.text_column,
            language=args.language,
        )

    @classmethod
    def _write_part(cls, run, part, examples):
        run.write_labelled(part, [label for label, _ in examples], [text for _, text in examples])

    @classmethod
    def _examples(cls, strings, tokenizer, max_length, labels=None, batched=False):
        import tensorflow as tf

        from keras_transformer.data.pipeline import _classification_examples

        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(labels)), tf.range(len(labels))), -1)
        return _classification_examples(strings.map(lambda label, text: (text, table.lookup(label))),
                                        tokenizer, max_length, batched)

    @classmethod
    def _validation(cls, run, tokenizer, config, max_length, labels):
        from keras_transformer.data.corpus import class_ids
        from keras_transformer.data.pipeline import make_classification_eval_dataset

        validation_labels, validation_texts = run.read_labelled("validation")
        return make_classification_eval_dataset(
            validation_texts, class_ids(labels, validation_labels, "validation split"), tokenizer,
            batch_size=config.validation_batch_size, max_length=max_length,
        )

    @classmethod
    def _write_extras(cls, run, labels, init_from=None):
        if init_from is not None:  # the class ids are the model's
            names = cls._init_labels(init_from)
        else:
            names = sorted(set(labels))
        run.write_labels(names)
        return {"num_classes": len(names), "labels": os.path.relpath(run.labels_path, run.path)}

    @classmethod
    def _init_labels(cls, init_from):
        from keras_transformer import files

        init_config, init_folder = init_from
        return files.read_json(os.path.join(init_folder, init_config["data"]["labels"]))

    @classmethod
    def _check_init_labels(cls, init_from, labels):
        known = cls._init_labels(init_from)
        unknown = sorted(set(labels) - set(known))
        if unknown:
            raise ValueError(
                f"The data has labels {unknown} that the model to fine-tune (--init-from) does not "
                f"know; its classes are {known}. Relabel the data, or train a new classifier "
                "without --init-from."
            )

    @classmethod
    def training_loss(cls, run_config, config):
        from keras_transformer.training.losses import ClassificationCrossEntropy

        return ClassificationCrossEntropy(
            label_smoothing=config.label_smoothing,
            gradient_denominator=config.gradient_denominator,
        )

    @classmethod
    def training_metrics(cls, run_config):
        import keras

        from keras_transformer.training.losses import MacroF1

        return [
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            MacroF1(run_config["data"]["num_classes"]),
        ]

    @classmethod
    def evaluate_split(cls, run, run_dir, split, batch_size, limit):
        """Accuracy, macro-F1 and the confusion matrix of a loaded run on one of its splits."""
        from keras_transformer.evaluation.tasks import evaluate_classifier

        labels, texts = run_dir.read_labelled(split)
        labels, texts = labels[:limit], texts[:limit]
        if not texts:
            raise ValueError(f"The {split} split of {run_dir.path} is empty; evaluate another.")
        return evaluate_classifier(run, labels, texts, batch_size=batch_size)

    @classmethod
    def describe_scores(cls, scores, split):
        yield (f"accuracy {scores['accuracy']:.4f}, macro-F1 {scores['macro_f1']:.4f} "
               f"({scores['examples']} examples, {split} split)")
        width = max(len(name) for name in scores["labels"])
        yield ("confusion matrix (rows: true label, columns: predicted, in the order "
               f"{scores['labels']}):")
        for name, row in zip(scores["labels"], scores["confusion_matrix"]):
            yield f"  {name:>{width}}  " + " ".join(f"{count:6d}" for count in row)
