"""What the three tasks share: a model with its tokenizers, as a folder and in Python.

A `Task` is a Keras model together with everything that turns text into its inputs
and its outputs back into text (the preprocessor: SentencePiece tokenizers, class
names, length limits), its `compile()` defaults, `fit` on a `tf.data.Dataset` of raw
strings, and a string-level call (`Translator.translate`, `CausalLM.generate`,
`TextClassifier.classify`). The subclass is the one place in the package that knows
which task a model serves: the training loop, `evaluate`, `export` and the other
commands ask the task object (`keras_transformer.tasks.loading.task_for`) instead of
comparing task names.

Four kinds of path name a model (`load`, `Task.from_preset`):

- a built-in preset name ("tiny", "small", "base", "big"): a new, untrained model
  of that shape, given its tokenizers;
- a preset folder (written by `Task.save_to_preset`): config.json, model.weights.h5,
  the tokenizer models (and labels.json);
- a run folder (written by `keras-transformer train`): its config.json and the
  weights `weights` chooses (`RunFolder.weights`);
- an export version folder (`export/<name>/<version>/`, or the model base for its
  latest version): its string calls run the SavedModel's signatures, exactly as a
  server does; `fit` and `save_to_preset` read the `preset/` folder inside it.

A preset folder's config.json has the layout of a run's ("task", "preset",
"model": the `BackboneConfig`, "data": tokenizer files and length limits), so one
reader serves both.
"""

import os

from keras_transformer import files
from keras_transformer.models.config import PRESETS
from keras_transformer.runs.folder import RunFolder

PRESET_CONFIG = "config.json"
PRESET_WEIGHTS = "model.weights.h5"
LABELS_FILE = "labels.json"
# config.json of a preset folder says so; a run's says nothing.
PRESET_FORMAT = "keras_transformer.preset"


def is_export(path):
    """Whether `path` is an export version folder or a model base holding versions."""
    from keras_transformer.versions import version_paths

    path = os.fspath(path)
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return True
    return os.path.isdir(path) and bool(version_paths(path))


def is_preset_folder(path):
    """Whether `path` holds a preset written by `Task.save_to_preset`."""
    config = os.path.join(os.fspath(path), PRESET_CONFIG)
    return os.path.exists(config) and files.read_json(config).get("format") == PRESET_FORMAT


def describe_path(path):
    """"preset name", "preset", "run" or "export": what kind of model `path` names."""
    path = os.fspath(path)
    if not os.path.exists(path) and path in PRESETS:
        return "preset name"
    if is_preset_folder(path):
        return "preset"
    if RunFolder(path).exists():
        return "run"
    if is_export(path):
        return "export"
    raise FileNotFoundError(
        f"{path} is neither a preset name ({', '.join(sorted(PRESETS))}), a preset folder "
        "(`save_to_preset`), a run folder (`keras-transformer train`) nor an export "
        "(`keras-transformer export`)."
    )


def read_model_config(path):
    """The config.json of the model `path` names (a preset folder, run, or export), and its folder.

    An export's is that of the preset inside it (`keras_transformer.export.writer.PRESET_DIR`).

    Returns:
        `(config, folder)`: the parsed config.json and the folder holding it.
    """
    kind = describe_path(path)
    if kind == "preset name":
        raise ValueError(f"{path} is a preset name, not a trained model: it has no weights.")
    folder = os.fspath(path)
    if kind == "run":
        return RunFolder(folder).config, folder
    if kind == "export":
        from keras_transformer.export.writer import PRESET_DIR

        folder = os.path.join(_resolve_export(folder), PRESET_DIR)
        if not is_preset_folder(folder):
            raise FileNotFoundError(
                f"{path} has no {PRESET_DIR}/ folder with the model's weights (exported with "
                "--no-preset); use the run it was exported from."
            )
    return files.read_json(os.path.join(folder, PRESET_CONFIG)), folder


def init_source(path, task=None):
    """What `train --init-from PATH` starts from: a run, a preset folder or an export.

    Args:
        path: the trained model to fine-tune.
        task: the task of the new run (None: any); another is a one-line error.

    Returns:
        `(config, folder, weights_path)`: its config.json, the folder of its tokenizer
        files, and the weights file to start from (a run's default weights).
    """
    config, folder = read_model_config(path)
    if task is not None and config.get("task") != task:
        raise ValueError(
            f"--init-from {path} holds a model of task {config.get('task')}; a run of task "
            f"{task} starts from a model of its own task."
        )
    if describe_path(path) == "run":
        return config, folder, RunFolder(path).weights(None).path
    return config, folder, os.path.join(folder, PRESET_WEIGHTS)


def _resolve_export(path):
    from keras_transformer.evaluation.translators import resolve_saved_model

    return resolve_saved_model(path)


class Task:
    """A model with its tokenizers: the unit a user loads, fine-tunes, saves and calls.

    Subclasses: `Translator` ("translate"), `CausalLM` ("lm"), `TextClassifier`
    ("classify"). Each has its own constructor and string-level call; they share
    `from_preset`, `save_to_preset`, `compile` and `fit`.

    Attributes:
        model: the Keras model (None for an export, until `fit` reads its preset).
        config: the parsed config.json of the model ("task", "preset", "model", "data").
        weights: for a run, the `Weights` loaded (None otherwise).
    """

    #: The name a run and a preset record in config.json.
    name = None
    #: What the task is called in messages ("a translation run").
    title = None
    #: The shape of its `TransformerBackbone` (`keras_transformer.models.config.SHAPES`).
    backbone_shape = None
    #: Whether `keras-transformer evaluate` scores it with BLEU and chrF (a translator),
    #: rather than with the task's own `evaluate_split`.
    scored_by_bleu = False

    def __init__(self, model, config, weights=None):
        self.model = model
        self.config = config
        self.weights = weights
        # An export's loaded SavedModel and its folder: the string calls run its
        # signatures until `fit` changes the weights.
        self._export = None
        self._export_folder = None
        self._modules = {}

    def __repr__(self):
        shape = self.config.get("preset") or "custom"
        return f"<{type(self).__name__} preset={shape}>"

    # -- folders -------------------------------------------------------------------------------
    @classmethod
    def from_preset(cls, preset, weights=None, **options):
        """A task of this class from a preset name, a preset folder, a run or an export.

        Args:
            preset: a built-in preset name (a new model: pass its tokenizers, see the
                subclass), a preset folder, a run folder or an export.
            weights: a run's weights (see `load`).
            **options: the subclass's options for a built-in preset (tokenizers,
                labels, model fields to change).

        Returns:
            An instance of this class.
        """
        path = os.fspath(preset)
        if describe_path(path) == "preset name":
            return cls.from_preset_name(path, **options)
        return cls.open(path, weights=weights, **options)

    @classmethod
    def open(cls, path, weights=None, **options):
        """The model of a preset folder, a run or an export, which must be of this task.

        `keras_transformer.load` calls it on the class the folder's task names.
        """
        kind = describe_path(path)
        if weights is not None and kind != "run":
            raise ValueError(f"`weights` chooses among a run's weights; {path} is a {kind} folder.")
        if kind == "export":
            return cls._open_export(path, **options)
        config, folder = read_model_config(path)
        cls._check_task(path, config.get("task"))
        if kind == "run":
            chosen = RunFolder(folder).weights(weights, build_model=lambda: cls.build_model(config))
            return cls.from_folder(folder, config, chosen.path, weights=chosen, **options)
        return cls.from_folder(folder, config, os.path.join(folder, PRESET_WEIGHTS), **options)

    @classmethod
    def _check_task(cls, path, found):
        """Refuses a model of another task than this class's, in one line."""
        if found != cls.name:
            raise ValueError(
                f"{path} holds a model of task {found}; {cls.__name__}.from_preset needs a "
                f"{cls.title} model (task {cls.name})."
            )

    @classmethod
    def _open_export(cls, path, **options):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

        from keras_transformer.evaluation.translators import read_manifest

        folder = _resolve_export(path)
        manifest = read_manifest(folder)
        cls._check_task(path, manifest.get("task"))
        if options:
            raise ValueError(f"An export is loaded as it was exported; received {sorted(options)}.")
        return cls.from_export(folder, manifest, tf.saved_model.load(folder))

    @classmethod
    def from_preset_name(cls, name, **options):
        """A new, untrained model of a built-in preset's shape (see the subclass)."""
        raise NotImplementedError

    @classmethod
    def from_folder(cls, folder, config, weights_path, weights=None):
        """The task of a run or preset folder whose config.json is `config`."""
        raise NotImplementedError

    @classmethod
    def from_export(cls, folder, manifest, loaded):
        """The task of an export: its calls run `loaded`'s signatures."""
        task = cls.__new__(cls)
        Task.__init__(task, None, {"task": cls.name, "preset": manifest.get("preset"),
                                   "model": manifest.get("model"), "data": {}})
        task._export = loaded
        task._export_folder = folder
        task._manifest = manifest
        return task

    def _ensure_model(self):
        """Reads the Keras model of an export from its preset folder (for `fit`, `save`)."""
        if self.model is not None:
            return
        config, folder = read_model_config(self._export_folder)
        loaded = type(self).from_folder(folder, config, os.path.join(folder, PRESET_WEIGHTS))
        self.__dict__.update({key: value for key, value in loaded.__dict__.items()
                              if not key.startswith("_")})
        self._modules = {}

    def tokenizer_files(self):
        """{config "data" entry: SentencePiece model bytes} of the task's tokenizers."""
        raise NotImplementedError

    def save_to_preset(self, folder):
        """Writes a preset folder: config.json, model.weights.h5 and the tokenizer models.

        `Task.from_preset(folder)` and `keras_transformer.load(folder)` read it
        back; `keras-transformer train --init-from folder` fine-tunes from it.

        Args:
            folder: the folder to write (created; existing files in it are replaced).

        Returns:
            The folder's path.
        """
        self._ensure_model()
        folder = os.fspath(folder)
        os.makedirs(folder, exist_ok=True)
        data = dict(self.config.get("data", {}))
        for entry, model_proto in self.tokenizer_files().items():
            name = f"{entry.replace('_tokenizer', '')}.model"  # source.model, tokenizer.model
            with files.atomic_path(os.path.join(folder, name)) as temporary:
                with open(temporary, "wb") as file:
                    file.write(model_proto)
            data[entry] = name
        data.update(self._extra_files(folder))
        with files.atomic_path(os.path.join(folder, PRESET_WEIGHTS)) as temporary:
            self.model.save_weights(temporary)
        config = {"format": PRESET_FORMAT, "task": self.name, "preset": self.config.get("preset"),
                  "model": self.config["model"], "data": data}
        files.write_json(os.path.join(folder, PRESET_CONFIG), config)
        return folder

    def _extra_files(self, folder):
        """Writes the task's other files of a preset; returns their "data" entries."""
        return {}

    # -- training ------------------------------------------------------------------------------
    def compile(self, training=None, total_steps=None, jit_compile=False, mixed_precision="none",
                **compile_options):
        """Compiles the model with the task's defaults, as `keras-transformer train` does.

        Adam(0.9, 0.98, 1e-9) on the warmup-then-rsqrt schedule, the task's loss
        (label-smoothed, masked on padding) and metrics; `compile_options`
        (`optimizer`, `loss`, `metrics`, ...) override them.

        Args:
            training: a `TrainingConfig` (None: the task's defaults,
                `TrainingConfig.for_task`) for the schedule, loss and weight decay.
            total_steps: the step a linear decay reaches 0 at (`lr_decay="linear"`).
            jit_compile: compile the training step with XLA.
            mixed_precision: "mixed_float16" wraps the optimizer in loss scaling.
            **compile_options: `keras.Model.compile` arguments to use instead.
        """
        from keras_transformer.training.config import TrainingConfig
        from keras_transformer.training.optimizer import make_optimizer

        self._ensure_model()
        training = training or TrainingConfig.for_task(self.name)
        if "optimizer" not in compile_options:
            compile_options["optimizer"] = make_optimizer(
                self.config["model"]["d_model"], training.warmup_steps, training.lr_scale,
                training.clipnorm, mixed_precision, training.lr_decay,
                total_steps or training.max_steps, training.weight_decay,
                self.model.trainable_variables,
            )
        defaults = {"loss": self.loss(training), "metrics": self.metrics(),
                    "jit_compile": bool(jit_compile)}
        self.model.compile(**{**defaults, **compile_options})

    def fit(self, x, validation_data=None, batch_size=32, **fit_options):
        """Trains on a `tf.data.Dataset` of raw strings (or of the model's own batches).

        Args:
            x: a dataset of examples (unbatched) or of batches: a translator's
                (source, target) strings, a language model's texts, a classifier's
                (text, label) with label a class name or id; or batches the model
                reads as they are (`(features, labels)` of token ids).
            validation_data: the same kinds of dataset, or None.
            batch_size: examples per batch of an unbatched dataset.
            **fit_options: `keras.Model.fit` arguments (`epochs`, `callbacks`, ...).

        Returns:
            The `keras.callbacks.History`.
        """
        self._ensure_model()
        if not self.model.compiled:
            self.compile()
        x = self.preprocess(x, batch_size)
        if validation_data is not None:
            validation_data = self.preprocess(validation_data, batch_size)
        # The string calls must see the new weights, not the export's.
        self._export = None
        self._modules = {}
        # A dataset is shuffled by its maker; Keras would only warn about `shuffle`.
        fit_options.setdefault("shuffle", False)
        return self.model.fit(x, validation_data=validation_data, **fit_options)

    def preprocess(self, dataset, batch_size=32):
        """Batches of model inputs and labels from a dataset of raw strings (see `fit`)."""
        import tensorflow as tf

        if not isinstance(dataset, tf.data.Dataset):
            raise ValueError(
                f"{type(self).__name__}.fit reads a tf.data.Dataset; received "
                f"{type(dataset).__name__}."
            )
        specs = tf.nest.flatten(dataset.element_spec)
        if not any(spec.dtype == tf.string for spec in specs):
            return dataset  # the model's own batches
        batched = specs[0].shape.rank == 1
        if not batched:
            dataset = dataset.batch(batch_size)
        return dataset.map(self._encode_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE)

    def _encode_batch(self, *batch):
        """A batch of raw strings → `(features, labels)` padded with 0 (per task)."""
        raise NotImplementedError

    # -- what the training loop and the commands ask of a task --------------------------------
    @classmethod
    def build_model(cls, config):
        """The task's Keras model, freshly initialised, from a parsed config.json."""
        raise NotImplementedError

    def loss(self, training):
        """The training loss (`training`: the `TrainingConfig`)."""
        return self.training_loss(self.config, training)

    def metrics(self):
        """The training metrics; each appears in the history (val_<name> too)."""
        return self.training_metrics(self.config)

    @classmethod
    def prepare(cls, run_dir, data, preset, **options):
        """Splits the data of a new run, trains its tokenizer(s), writes config.json; returns it."""
        raise NotImplementedError

    @classmethod
    def make_datasets(cls, run, run_config, config, seed, static_shapes=False):
        """(training, validation) `tf.data` pipelines of `(inputs, labels)` batches of a run."""
        raise NotImplementedError

    @classmethod
    def training_loss(cls, config, training):
        """The Keras loss of a run whose config.json is `config` (`training`: its `TrainingConfig`)."""
        raise NotImplementedError

    @classmethod
    def training_metrics(cls, config):
        """The Keras metrics of a run whose config.json is `config`."""
        raise NotImplementedError

    @classmethod
    def data_from_args(cls, args):
        """The data of a new run and the options of `prepare`, from `train`'s parsed flags.

        A flag this task does not read is a one-line error (`refuse_options`).

        Returns:
            `(data, prepare_options)`; data is None when `--data` is not given.
        """
        raise NotImplementedError

    def export_parts(self, beam, alpha, coverage, max_length, xla, parallel_searches,
                     max_new_tokens):
        """The export module of this model and the manifest entries that describe it.

        Returns:
            `(module, details)`: an `ExportModule` and a dict for manifest.json.
        """
        raise NotImplementedError

    @classmethod
    def warmup_texts(cls, run_dir):
        """A few texts of a run's test split, replayed before an export serves."""
        raise NotImplementedError

    @classmethod
    def evaluate_split(cls, run, run_dir, split, batch_size, limit):
        """The scores of a loaded run (`RunFolder.load`) on one of its splits (`evaluate`)."""
        raise NotImplementedError

    @classmethod
    def describe_scores(cls, scores, split):
        """The lines `evaluate` prints for `evaluate_split`'s scores."""
        raise NotImplementedError

    def _module(self, key, make):
        """The in-process export module for `key` (made once: its functions trace once)."""
        if key not in self._modules:
            self._modules[key] = make()
        return self._modules[key]


def write_labels(folder, labels):
    """Writes labels.json into a preset folder; returns its "data" entry."""
    files.write_json(os.path.join(folder, LABELS_FILE), list(labels))
    return {"labels": LABELS_FILE, "num_classes": len(labels)}


def refuse_options(args, names, task):
    """One line naming the options given (of `names`) that a run of `task` does not read."""
    given = [f"--{name.replace('_', '-')}" for name in names
             if getattr(args, name, None) not in (None, False)]
    if given:
        raise ValueError(
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} not read by --task {task}.")
