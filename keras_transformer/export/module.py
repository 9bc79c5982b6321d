"""What gets exported and served, one `tf.Module` per task: text in, text (or labels) out.

Shape notation: B batch, S source length, K beam width, L output length, C classes.

Tokenization (SentencePiece through tensorflow-text), the model, the cached search
and detokenization all run inside the graph, so the same object works in-process
(the `translate` command) and, saved, in TensorFlow Serving.

- `TranslationModule` (task "translate"): translate, n-best, score, tokenize, attention.
- `LanguageModelModule` (task "lm"): a prompt → its continuation, greedy
  (serving_default) or sampled with per-row settings (sample).
- `ClassificationModule` (task "classify"): text → label and probabilities, and a
  TF Serving classification signature (serialized `tf.Example`s → classes, scores).
"""

import functools

import numpy as np
import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding.generation import Generator
from keras_transformer.decoding.loop import static_widths
from keras_transformer.decoding.scoring import score_sequences
from keras_transformer.decoding.search import SequenceSearch
from keras_transformer.export.writer import WarmupRequest
from keras_transformer.ops import checks
from keras_transformer.ops.graph import graph_function

TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")
CLASSIFY_METHOD = "tensorflow/serving/classify"
# The feature a classification request's tf.Examples carry the text in.
TEXT_FEATURE = "text"


def width_filling_texts(texts, encode, cap):
    """Texts whose encodings are as wide as each of `static_widths(cap)` needs.

    An XLA search compiles once for each width its inputs are padded to (seconds
    each); warmup requests with these texts compile them all before a version
    serves. Each text is the shortest prefix, found by bisection, of `texts` joined
    and doubled until its encoding reaches `cap` subwords or stops growing.

    Args:
        texts: sample texts (empty ones are skipped; with none, "." is repeated).
        encode: (N,) strings tensor → (N, W) int32 ids, 0-padded.
        cap: the widest input the search pads (`static_widths`).

    Returns:
        For each width an encoding can reach, in ascending order, a text whose
        encoding is padded to it.
    """

    @functools.lru_cache(maxsize=None)  # the bisection's last prefix is measured again
    def length(text):
        return int((encode(tf.constant([text])).numpy() != PAD_ID).sum())

    text = " ".join(text for text in texts if text) or "."
    widest = length(text)
    while widest < cap:
        longer = f"{text} {text}"
        longer_width = length(longer)
        if longer_width == widest:  # the encoding is truncated below `cap`
            break
        text, widest = longer, longer_width
    chosen, narrower = [], 0
    for width in static_widths(cap):
        if widest <= narrower:
            break
        low, high = 1, len(text)  # the shortest prefix wider than `narrower` subwords
        while low < high:
            middle = (low + high) // 2
            if length(text[:middle]) > narrower:
                high = middle
            else:
                low = middle + 1
        if length(text[:low]) <= width:
            chosen.append(text[:low])
        narrower = width
    return chosen


def encode_text(tokenizer, text, max_length):
    """(B,) strings → (B, S) int32 ids, truncated to `max_length` and 0-padded, S >= 1."""
    ids = tokenizer.tokenize(text)[:, :max_length].to_tensor(default_value=PAD_ID)
    # Keep one column even for a batch of empty strings, so shapes stay valid.
    return tf.pad(ids, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(ids)[1])]])


class ExportModule(tf.Module):
    """What `write_export` needs of a module: signatures, method names, warmup requests.

    The Keras model stays out of the saved object graph: Keras variables would be
    saved as wrapper objects apart from the tf.Variables the graph reads, and
    TF1-style loaders (TF Serving's C++ loader) would restore the wrong ones.
    `signatures()` tracks the tf.Variables the functions really use.

    Args:
        model: the Keras model the signatures call.
        name: the module name.
    """

    def __init__(self, model, name):
        super().__init__(name=name)
        self._setattr_tracking = False
        self.model = model
        self._setattr_tracking = True

    def signature_functions(self):
        """{signature key: concrete function}, serving_default first (each subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} must define signature_functions()")

    def signatures(self):
        """The named signatures to export; tracks their variables."""
        signatures = self.signature_functions()
        used, seen = [], set()
        for function in signatures.values():
            for variable in function.variables:
                if id(variable) not in seen:
                    seen.add(id(variable))
                    used.append(variable)
        self.model_variables = used
        return signatures

    def method_names(self):
        """{signature key: method name} of signatures that are not predict ones."""
        return {}

    def warmup_texts(self, texts):
        """The texts warmup requests send every signature (`texts`, the writer's)."""
        return list(texts)

    def warmup_requests(self, texts):
        """The `WarmupRequest`s replayed before a version serves: serving_default on each text."""
        return [WarmupRequest("serving_default", inputs={"text": [text]}) for text in texts]


class TranslationModule(ExportModule):
    """Translates batches of sentences with a trained model and its tokenizers.

    Args:
        model: a `Seq2SeqTransformer`.
        source_tokenizer: a `keras_transformer.data.SubwordTokenizer` for the source.
        target_tokenizer: the target-side `SubwordTokenizer`.
        max_source_length: longer inputs are truncated to this many subwords.
        beam_width: K; 1 means greedy search.
        alpha: length-penalty exponent of beam search.
        coverage: β, weight of beam search's coverage penalty (0: none).
        max_output_length: cap on output subwords (default: the model's max_length).
        jit_compile: compile the decoding loop with XLA (stock TF Serving then needs
            `--xla_cpu_compilation_enabled=true`).
        parallel_searches: `SequenceSearch`'s parts of a large batch, decoded at
            once (None: its default).
        row_groups: `SequenceSearch`'s way of running them (None: its default,
            from this process's threads per op).

    Example:
        >>> module = TranslationModule(model, source_tok, target_tok, max_source_length=64)
        >>> module.translate(tf.constant(["我们来试试。"]))["translation"]
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        max_source_length,
        beam_width=DEFAULT_BEAM_WIDTH,
        alpha=DEFAULT_ALPHA,
        coverage=DEFAULT_COVERAGE,
        max_output_length=None,
        jit_compile=False,
        parallel_searches=None,
        row_groups=None,
    ):
        super().__init__(model, name="translator")
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_source_length = checks.check_positive_int("max_source_length", max_source_length)
        self.beam_width = checks.check_positive_int("beam_width", beam_width)
        self.alpha = float(alpha)
        self.coverage = float(coverage)
        self.search = SequenceSearch(
            model,
            max_length=max_output_length or model.config.max_length,
            beam_width=beam_width,
            alpha=alpha,
            coverage=coverage,
            jit_compile=jit_compile,
            parallel_searches=parallel_searches,
            row_groups=row_groups,
        )

    # Pieces shared by the signatures -------------------------------------------

    def encode_text(self, text):
        """(B,) strings → (B, S) int32 source ids, truncated and 0-padded, S >= 1."""
        return encode_text(self.source_tokenizer, text, self.max_source_length)

    def _n_best(self, text):
        source = self.encode_text(text)
        if self.beam_width == 1:
            result = self.search.greedy(source)
            tokens, scores = result["tokens"][:, None], result["scores"][:, None]
        else:
            result = self.search.beam_search(source)
            tokens, scores = result["tokens"], result["scores"]
        batch_size, width = tf.shape(tokens)[0], tf.shape(tokens)[1]
        flat = tf.reshape(tokens, [batch_size * width, -1])
        texts = tf.reshape(self.target_tokenizer.detokenize(flat), [batch_size, width])
        # An empty input translates to an empty output, not to the model's guess.
        empty = tf.reduce_all(tf.equal(source, PAD_ID), axis=1)[:, None]
        texts = tf.where(empty, tf.constant(""), texts)
        scores = tf.where(empty, tf.constant(0.0), scores)
        return texts, scores

    # Signatures ----------------------------------------------------------------

    @graph_function(input_signature=[TEXT_SPEC])
    def translate(self, text):
        """text (B,) → translation (B,) strings and score (B,) floats (best hypothesis)."""
        texts, scores = self._n_best(text)
        return {"translation": texts[:, 0], "score": scores[:, 0]}

    @graph_function(input_signature=[TEXT_SPEC])
    def translate_n_best(self, text):
        """text (B,) → translations (B, K) strings and scores (B, K), best first."""
        texts, scores = self._n_best(text)
        return {"translations": texts, "scores": scores}

    @graph_function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="source"),
            tf.TensorSpec([None], tf.string, name="target"),
        ]
    )
    def score(self, source, target):
        """Teacher-forced scores of given (source, target) pairs.

        Returns:
            log_probability (B,): log P(target + EOS | source); score (B,): the same
            divided by the length penalty (and with the coverage penalty, if any),
            comparable with `translate`'s score.
        """
        source_ids = self.encode_text(source)
        target_ids = self.target_tokenizer.tokenize(target)[:, : self.search.max_length - 1]
        target_ids = target_ids.to_tensor(default_value=PAD_ID)
        return {
            "log_probability": score_sequences(self.model, source_ids, target_ids, alpha=0.0),
            "score": score_sequences(
                self.model, source_ids, target_ids, alpha=self.alpha, coverage=self.coverage
            ),
        }

    @graph_function(input_signature=[TEXT_SPEC])
    def tokenize(self, text):
        """text (B,) → token_ids (B, S) int32 (0-padded), pieces (B, S) strings, lengths (B,)."""
        ids = self.encode_text(text)
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=1)
        pieces = self.source_tokenizer.id_to_string(ids)
        pieces = tf.where(tf.equal(ids, PAD_ID), tf.constant(""), pieces)
        return {"token_ids": ids, "pieces": pieces, "lengths": lengths}

    @graph_function(input_signature=[TEXT_SPEC])
    def attention(self, text):
        """Translates and returns what the translation attended to, for plots and the page.

        Returns:
            translation (B,) strings and score (B,); source_pieces (B, S) and
            target_pieces (B, T) strings ("" for padding; target pieces end with the
            end-of-sentence piece "</s>"); source_lengths, target_lengths (B,);
            cross_attention (B, N, H, T, S) floats: layer N, head H, output token T,
            input token S.
        """
        source = self.encode_text(text)
        if self.beam_width == 1:
            result = self.search.greedy(source)
            tokens, scores = result["tokens"], result["scores"]
        else:
            result = self.search.beam_search(source)
            tokens, scores = result["tokens"][:, 0], result["scores"][:, 0]
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(tokens, PAD_ID), tf.int32), axis=1)
        batch_size = tf.shape(tokens)[0]
        # Output tokens followed by EOS: the positions whose predictions were made.
        padded = tf.concat([tokens, tf.zeros([batch_size, 1], tf.int32)], axis=1)
        labels = padded + EOS_ID * tf.one_hot(lengths, tf.shape(padded)[1], dtype=tf.int32)
        decoder_tokens = tf.concat([tf.fill([batch_size, 1], BOS_ID), padded[:, :-1]], axis=1)
        maps = self.model.attention_weights(source, decoder_tokens)
        source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, PAD_ID), tf.int32), axis=1)
        source_pieces = tf.where(
            tf.equal(source, PAD_ID), tf.constant(""), self.source_tokenizer.id_to_string(source)
        )
        target_pieces = tf.where(
            tf.equal(labels, PAD_ID), tf.constant(""), self.target_tokenizer.id_to_string(labels)
        )
        translation = self.target_tokenizer.detokenize(tokens)
        empty = tf.equal(source_lengths, 0)
        return {
            "translation": tf.where(empty, tf.constant(""), translation),
            "score": tf.where(empty, tf.constant(0.0), scores),
            "source_pieces": source_pieces,
            "target_pieces": target_pieces,
            "source_lengths": source_lengths,
            "target_lengths": lengths + 1,
            "cross_attention": maps["cross"],
        }

    def warmup_texts(self, texts):
        """`texts`, and under XLA one text for each source width the search compiles for."""
        texts = list(texts)
        if self.search.jit_compile:
            texts += width_filling_texts(texts, self.encode_text, self.model.config.max_length)
        return texts

    def signature_functions(self):
        return {
            "serving_default": self.translate.get_concrete_function(),
            "translate_n_best": self.translate_n_best.get_concrete_function(),
            "score": self.score.get_concrete_function(),
            "tokenize": self.tokenize.get_concrete_function(),
            "attention": self.attention.get_concrete_function(),
        }


def _row_spec(dtype, name):
    return tf.TensorSpec([None], dtype, name=name)


class LanguageModelModule(ExportModule):
    """Continues prompts with a trained language model and its tokenizer.

    The model reads BOS + text (as it was trained). In serving_default a prompt too
    long to leave room for its new subwords keeps its last ones, so the continuation
    follows the end of the text; `sample` refuses such a prompt, saying how many new
    subwords it allows. The continuation comes back as text that can be appended
    to the prompt as it is: it starts with a space when the next word is a new one.

    Signatures:
        serving_default: text (B,) → generation (B,) strings, greedy, at most
            `max_new_tokens` new subwords.
        sample: text (B,), temperature (B,) float32 (0: greedy), top_k (B,) int32
            (0: off), top_p (B,) float32 (1: off), seed (B,) int64 (the same seed
            gives the same text), max_new_tokens (B,) int32 → generation (B,).

    Args:
        model: a `LanguageModel` (`keras_transformer.build_language_model`).
        tokenizer: the `SubwordTokenizer` it was trained with.
        max_length: cap on prompt and new subwords together (default: the model's).
        max_new_tokens: new subwords of serving_default.
        jit_compile: compile the generation loop with XLA (stock TF Serving then
            needs `--xla_cpu_compilation_enabled=true`).

    Example:
        >>> module = LanguageModelModule(model, tokenizer, max_new_tokens=20)
        >>> module.sample(tf.constant(["Tom is"]), [0.8], [40], [0.95], [1], [20])["generation"]
    """

    def __init__(self, model, tokenizer, max_length=None, max_new_tokens=32, jit_compile=False):
        super().__init__(model, name="language_model")
        self.tokenizer = tokenizer
        self.generator = Generator(model, max_length=max_length, jit_compile=jit_compile)
        self.max_length = self.generator.max_length
        if self.max_length < 3:
            raise ValueError(f"`max_length` must leave room for BOS, a subword and a new one; "
                             f"received {self.max_length}.")
        self.max_new_tokens = checks.check_positive_int("max_new_tokens", max_new_tokens)

    def encode_prompt(self, text, max_new_tokens, truncate=True):
        """(B,) strings → (B, P) int32 ids: BOS + the text's last subwords, 0-padded.

        A row keeps at most `max_length - 1 - max_new_tokens` subwords (at least
        one), so that its new tokens fit. With `truncate=False` a row that does
        not fit fails instead (InvalidArgumentError, which the server answers
        with 400), naming the largest max_new_tokens it allows.
        """
        ids = self.tokenizer.tokenize(text)
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        # Clamped before any arithmetic: a huge max_new_tokens cannot overflow int32.
        max_new_tokens = tf.clip_by_value(max_new_tokens, 0, self.max_length)
        if not truncate:
            room = self.max_length - 1 - max_new_tokens
            fits = lengths <= room
            # The first row that does not fit (B when all do; the padding keeps it valid).
            first = tf.reduce_sum(tf.cast(tf.equal(tf.cumsum(tf.cast(~fits, tf.int32)), 0),
                                          tf.int32))
            length = tf.concat([lengths, [0]], 0)[first]
            asked = tf.concat([max_new_tokens, [0]], 0)[first]
            message = tf.strings.format(
                "text {} has {} subwords and asks for max_new_tokens {}: together with the "
                "start token they exceed the model's {} positions; lower max_new_tokens to at "
                "most {} or shorten the text",
                (first, length, asked, self.max_length,
                 tf.maximum(self.max_length - 1 - length, 0)))
            with tf.control_dependencies([tf.debugging.Assert(tf.reduce_all(fits), [message])]):
                lengths = tf.identity(lengths)
        keep = tf.clip_by_value(self.max_length - 1 - max_new_tokens, 1, self.max_length - 2)
        ids = tf.gather(ids, tf.ragged.range(tf.maximum(lengths - keep, 0), lengths),
                        batch_dims=1)
        bos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(text)[0], 1], BOS_ID))
        return tf.concat([bos, ids], axis=1).to_tensor(default_value=PAD_ID)

    def continue_text(self, text, temperature, top_k, top_p, seed, max_new_tokens,
                      truncate=True):
        """The continuations (B,) of the prompts `text` (B,), one setting a row
        (`truncate`: see `encode_prompt`)."""
        rows = tf.shape(text)
        checks_ = [
            tf.debugging.assert_equal(
                tf.shape(value), rows,
                message=f"{name} takes one value per text (as many as 'text' has)")
            for name, value in (("temperature", temperature), ("top_k", top_k),
                                ("top_p", top_p), ("seed", seed),
                                ("max_new_tokens", max_new_tokens))]
        with tf.control_dependencies(checks_):
            prompt = self.encode_prompt(text, max_new_tokens, truncate)
        new = self.generator.generate(prompt, max_new_tokens=max_new_tokens,
                                      temperature=temperature, top_k=top_k, top_p=top_p,
                                      seed=seed)["tokens"]
        # Detokenized together, the prompt's text is a prefix of the whole, and what
        # follows it keeps the space a word-start subword stands for.
        whole = self.tokenizer.detokenize(tf.concat([prompt, new], axis=1))
        before = self.tokenizer.detokenize(prompt)
        length = tf.strings.length(before)
        prefixed = tf.equal(tf.strings.substr(whole, tf.zeros_like(length), length), before)
        rest = tf.strings.length(whole) - length
        return tf.where(prefixed, tf.strings.substr(whole, length, tf.maximum(rest, 0)),
                        self.tokenizer.detokenize(new))

    @graph_function(input_signature=[TEXT_SPEC])
    def generate(self, text):
        """text (B,) → generation (B,): the greedy continuation."""
        rows = tf.shape(text)
        return {"generation": self.continue_text(
            text, tf.zeros(rows, tf.float32), tf.zeros(rows, tf.int32), tf.ones(rows, tf.float32),
            tf.zeros(rows, tf.int64), tf.fill(rows, self.max_new_tokens))}

    @graph_function(input_signature=[
        TEXT_SPEC, _row_spec(tf.float32, "temperature"), _row_spec(tf.int32, "top_k"),
        _row_spec(tf.float32, "top_p"), _row_spec(tf.int64, "seed"),
        _row_spec(tf.int32, "max_new_tokens")])
    def sample(self, text, temperature, top_k, top_p, seed, max_new_tokens):
        """text and one setting per row (B,) → generation (B,): a sampled continuation.

        A text too long for its max_new_tokens fails (400 from a server) instead of
        losing its beginning."""
        return {"generation": self.continue_text(
            text, temperature, top_k, top_p, seed, max_new_tokens, truncate=False)}

    def signature_functions(self):
        return {
            "serving_default": self.generate.get_concrete_function(),
            "sample": self.sample.get_concrete_function(),
        }

    def warmup_texts(self, texts):
        """`texts`, and under XLA one text for each prompt width serving_default's
        generation compiles for (`sample` with fewer new subwords may reach wider ones)."""
        texts = list(texts)
        if self.generator.jit_compile:
            new_tokens = lambda text: tf.fill(tf.shape(text), self.max_new_tokens)  # noqa: E731
            texts += width_filling_texts(
                texts, lambda text: self.encode_prompt(text, new_tokens(text)), self.max_length)
        return texts

    def warmup_requests(self, texts):
        # The signature's dtypes: a plain list of ints would be sent as int32. One new
        # subword: `sample` refuses a text too long for its max_new_tokens, and a
        # warmup request that fails fails the load.
        settings = {"temperature": np.array([0.8], np.float32),
                    "top_k": np.array([40], np.int32), "top_p": np.array([0.95], np.float32),
                    "seed": np.array([1], np.int64),
                    "max_new_tokens": np.array([1], np.int32)}
        return super().warmup_requests(texts) + [
            WarmupRequest("sample", inputs={"text": [text], **settings}) for text in texts]


class ClassificationModule(ExportModule):
    """Classifies texts with a trained classifier and its tokenizer.

    Signatures:
        serving_default: text (B,) → label (B,) strings, probabilities (B, C) float32.
        classify: TF Serving's classification signature (method
            tensorflow/serving/classify): inputs (B,) serialized `tf.Example`s with
            a bytes feature "text" → classes (B, C) strings, scores (B, C) float32,
            for REST `:classify` and gRPC `Classify`.

    Args:
        model: a Keras model, `tokens` (B, S) int32 (0 = padding) → logits (B, C).
        tokenizer: the `SubwordTokenizer` it was trained with.
        labels: the C class names, in the order of the logits.
        max_length: longer inputs are truncated to this many subwords.

    Example:
        >>> module = ClassificationModule(model, tokenizer, ["question", "statement"], 64)
        >>> module.classify_text(tf.constant(["Who are you?"]))["label"]
    """

    def __init__(self, model, tokenizer, labels, max_length):
        super().__init__(model, name="classifier")
        labels = [str(label) for label in labels]
        if not labels or len(set(labels)) != len(labels):
            raise ValueError(f"`labels` must be distinct class names; received {labels!r}.")
        self.tokenizer = tokenizer
        self.labels = labels
        self.max_length = checks.check_positive_int("max_length", max_length)

    def probabilities(self, text):
        """(B,) strings → (B, C) float32 class probabilities.

        A text with no token (empty, or only spaces) says nothing about its class:
        every class gets 1 / C, not what the model makes of padding alone.
        """
        ids = encode_text(self.tokenizer, text, self.max_length)
        logits = tf.cast(self.model(ids, training=False), tf.float32)
        empty = tf.reduce_all(tf.equal(ids, PAD_ID), axis=1, keepdims=True)
        return tf.where(empty, 1.0 / len(self.labels), tf.nn.softmax(logits, axis=-1))

    @graph_function(input_signature=[TEXT_SPEC])
    def classify_text(self, text):
        """text (B,) → label (B,) strings (the likeliest class), probabilities (B, C)."""
        probabilities = self.probabilities(text)
        label = tf.gather(tf.constant(self.labels), tf.argmax(probabilities, axis=-1))
        return {"label": label, "probabilities": probabilities}

    @graph_function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify_examples(self, inputs):
        """inputs (B,) serialized tf.Examples → classes (B, C) strings, scores (B, C)."""
        # No default: an example without the feature fails with TensorFlow's
        # "Feature: text ... is required but could not be found", which names it.
        features = tf.io.parse_example(
            inputs, {TEXT_FEATURE: tf.io.FixedLenFeature([], tf.string)})
        scores = self.probabilities(features[TEXT_FEATURE])
        classes = tf.tile(tf.constant([self.labels]), [tf.shape(scores)[0], 1])
        return {"classes": classes, "scores": scores}

    def signature_functions(self):
        return {
            "serving_default": self.classify_text.get_concrete_function(),
            "classify": self.classify_examples.get_concrete_function(),
        }

    def method_names(self):
        return {"classify": CLASSIFY_METHOD}

    def warmup_requests(self, texts):
        return super().warmup_requests(texts) + [
            WarmupRequest("classify", classify_texts=[text]) for text in texts]
