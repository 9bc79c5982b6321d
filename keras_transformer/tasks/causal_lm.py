"""The language model: a decoder-only `LanguageModel` on texts, with its tokenizer.

    lm = CausalLM.from_preset("runs/lm-en")
    lm.generate(["Tom is"], max_new_tokens=20, sampler="top_p", seed=1)

Shape notation: B batch, T tokens, V vocabulary.
"""

import os

from keras_transformer.models.config import DECODER_ONLY
from keras_transformer.tasks.text import TextTask

# A sampler name → (temperature, top_k, top_p) of the generation signature (temperature
# 0: greedy; top_k 0 and top_p 1: off), from the caller's values.
SAMPLERS = {
    "greedy": lambda temperature, top_k, top_p: (0.0, 0, 1.0),
    "random": lambda temperature, top_k, top_p: (temperature, 0, 1.0),
    "top_k": lambda temperature, top_k, top_p: (temperature, top_k, 1.0),
    "top_p": lambda temperature, top_k, top_p: (temperature, top_k, top_p),
}


class CausalLM(TextTask):
    """A decoder-only language model on one text a line (`LanguageModel`).

    The model reads `BOS y_1 .. y_n` and predicts `y_1 .. y_n EOS`; padding is id 0
    and is masked out of the loss and metrics.
    """

    name = "lm"
    title = "language"
    backbone_shape = DECODER_ONLY

    # -- the string-level call -------------------------------------------------------------
    def language_model_module(self, max_new_tokens=32, jit_compile=False, max_length=None):
        """The `LanguageModelModule` (what `export` saves) with these settings."""
        from keras_transformer.export.module import LanguageModelModule

        self._ensure_model()
        key = ("lm", max_new_tokens, bool(jit_compile), max_length)
        return self._module(key, lambda: LanguageModelModule(
            self.model, self.tokenizer, max_length=max_length, max_new_tokens=max_new_tokens,
            jit_compile=jit_compile))

    def generate(self, texts, max_new_tokens=32, sampler="greedy", temperature=1.0, top_k=40,
                 top_p=0.95, seed=0):
        """Continues each prompt.

        Args:
            texts: a list of prompts.
            max_new_tokens: new subwords per prompt, at most.
            sampler: "greedy" (the likeliest subword each step), "random" (from the
                whole distribution at `temperature`), "top_k" (from the `top_k`
                likeliest) or "top_p" (from the smallest set holding `top_p` of the
                probability, within the `top_k` likeliest when `top_k` > 0).
            temperature: the sampling temperature (> 0).
            top_k: "top_k": how many subwords to sample from.
            top_p: "top_p": the probability mass to sample from.
            seed: the same seed gives the same continuation (sampling).

        Returns:
            A list of continuations, one per prompt, each to be appended to its prompt.
        """
        import numpy as np
        import tensorflow as tf

        if sampler not in SAMPLERS:
            raise ValueError(f"Unknown sampler {sampler!r}; accepted: {list(SAMPLERS)}.")
        temperature, top_k, top_p = SAMPLERS[sampler](temperature, top_k, top_p)
        rows = len(texts)
        arguments = {
            "text": tf.constant([str(t) for t in texts], tf.string),
            "temperature": tf.constant(np.full(rows, temperature, np.float32)),
            "top_k": tf.constant(np.full(rows, top_k, np.int32)),
            "top_p": tf.constant(np.full(rows, top_p, np.float32)),
            "seed": tf.constant(np.full(rows, seed, np.int64)),
            "max_new_tokens": tf.constant(np.full(rows, max_new_tokens, np.int32)),
        }
        if self._export is not None:
            result = self._export.signatures["sample"](**arguments)
        else:
            result = self.language_model_module(max_new_tokens).sample(**arguments)
        return [value.decode("utf-8") for value in result["generation"].numpy().tolist()]

    def export_parts(self, beam, alpha, coverage, max_length, xla, parallel_searches,
                     max_new_tokens):
        module = self.language_model_module(max_new_tokens, xla, max_length)
        return module, {
            "language": self.config["data"].get("language"),
            "vocab_size": self.tokenizer.vocab_size,
            "max_length": module.max_length,
            "generation": {"max_new_tokens": module.max_new_tokens, "xla": xla},
        }

    @classmethod
    def warmup_texts(cls, run_dir):
        return run_dir.read_texts("test")[:4] or ["Hello"]

    # -- training ---------------------------------------------------------------------------
    def _encode_batch(self, text):
        from keras_transformer.constants import PAD_ID
        from keras_transformer.data.pipeline import encode_target

        tokens, labels = encode_target(self.tokenizer, text, self.config["data"]["max_length"])
        return tokens.to_tensor(PAD_ID), labels.to_tensor(PAD_ID)

    @classmethod
    def build_model(cls, config):
        from keras_transformer.models.language_model import LanguageModel

        return LanguageModel(config["model"])

    padding_values = (0, 0)  # PAD_ID: tokens and labels

    @classmethod
    def _spec(cls, data):
        from keras_transformer.data.corpus import TextFile

        return data if isinstance(data, TextFile) else TextFile(os.fspath(data))

    @classmethod
    def _data_file(cls, args):
        from keras_transformer.data.corpus import TextFile
        from keras_transformer.data.corpus import text_column
        from keras_transformer.tasks.base import refuse_options

        refuse_options(args, ("label_column", "text_column"), cls.name)
        column, language = text_column(args.column)
        return None if args.data is None else TextFile(args.data, column, args.language or language)

    @classmethod
    def _write_part(cls, run, part, examples):
        run.write_texts(part, [text for (text,) in examples])

    @classmethod
    def _examples(cls, strings, tokenizer, max_length, labels=None, batched=False):
        from keras_transformer.data.pipeline import _lm_examples

        return _lm_examples(strings.map(lambda text: text), tokenizer, max_length, batched)

    @classmethod
    def _validation(cls, run, tokenizer, config, max_length, labels):
        from keras_transformer.data.pipeline import make_lm_eval_dataset

        return make_lm_eval_dataset(run.read_texts("validation"), tokenizer,
                                    batch_size=config.validation_batch_size, max_length=max_length)

    @classmethod
    def training_loss(cls, run_config, config):
        from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy

        return MaskedSparseCategoricalCrossentropy(
            label_smoothing=config.label_smoothing,
            gradient_denominator=config.gradient_denominator,
        )

    @classmethod
    def training_metrics(cls, run_config):
        from keras_transformer.training.losses import MaskedPerplexity
        from keras_transformer.training.losses import MaskedTokenAccuracy

        return [MaskedTokenAccuracy(), MaskedPerplexity()]

    @classmethod
    def evaluate_split(cls, run, run_dir, split, batch_size, limit):
        """Perplexity and next-token accuracy of a loaded run on one of its splits."""
        from keras_transformer.evaluation.tasks import evaluate_language_model

        texts = run_dir.read_texts(split)[:limit]
        if not texts:
            raise ValueError(f"The {split} split of {run_dir.path} is empty; evaluate another.")
        return evaluate_language_model(run, texts, batch_size=batch_size)

    @classmethod
    def describe_scores(cls, scores, split):
        yield (f"perplexity {scores['perplexity']:.3f}, next-token accuracy "
               f"{scores['token_accuracy']:.4f} ({scores['tokens']} tokens of {scores['texts']} "
               f"texts, {split} split)")
