"""Tiny SavedModels for the serving tests: text in, text out, no Keras.

Version N's serving_default returns the upper-cased text, a score of half
the text's length, the raw input bytes (as `raw_bytes`, written as base64 over
REST) and the version number, so a test can tell which version answered.
"""

import os
import shutil

import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2


class TinyTranslator(tf.Module):
    def __init__(self, version):
        super().__init__()
        self._version = version
        self.calls = tf.Variable(0, dtype=tf.int64)  # Counts model calls.

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        self.calls.assign_add(1)
        translation = tf.strings.upper(text)
        if self._version != 1:
            translation = tf.strings.join([translation, f"v{self._version}"], separator=" ")
        return {
            "translation": translation,
            "score": tf.cast(tf.strings.length(text), tf.float32) / 2,
            "raw_bytes": text,
            "version": tf.fill(tf.shape(text), tf.constant(self._version, tf.int64)),
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="a"),
                                  tf.TensorSpec([None, 2], tf.int32, name="b")])
    def pair(self, a, b):
        total = tf.strings.as_string(tf.reduce_sum(b, axis=-1))
        return {"joined": tf.strings.join([a, total], separator=":")}

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="unused")])
    def call_count(self, unused):
        del unused
        return {"calls": self.calls.read_value()}

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="n")])
    def slow(self, n):
        _, total = tf.while_loop(lambda i, t: i < n, lambda i, t: (i + 1, t + tf.sin(t)),
                                 (tf.constant(0), tf.constant(1.0)))
        return {"total": total}


class WorkRows(tf.Module):
    """Per-row work and per-row output size, for the resource tests.

    `work`: n (B,) int32 → total (B,): row b loops n[b] times (about 7 us each on
    a 2-core CPU), and `rows_done` grows by B when the call ends. `wide`: n (B,)
    int32 → values (B, max n) float32, the output bytes a request asks for.
    """

    def __init__(self):
        super().__init__()
        self.rows_done = tf.Variable(0, dtype=tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="n")])
    def work(self, n):
        def row(count):
            _, total = tf.while_loop(lambda i, t: i < count, lambda i, t: (i + 1, t + tf.sin(t)),
                                     (tf.constant(0), tf.constant(1.0)))
            return total

        totals = tf.map_fn(row, n, fn_output_signature=tf.float32)
        with tf.control_dependencies([totals]):
            self.rows_done.assign_add(tf.cast(tf.shape(n)[0], tf.int64))
        return {"total": tf.identity(totals)}

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="unused")])
    def done(self, unused):
        del unused
        return {"rows": self.rows_done.read_value()}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="n")])
    def wide(self, n):
        return {"values": tf.ones([tf.shape(n)[0], tf.reduce_max(n)], tf.float32) / 3}


def save_work_rows_model(path):
    """Writes `WorkRows` with signatures work, done and wide (serving_default: work)."""
    module = WorkRows()
    work = module.work.get_concrete_function()
    tf.saved_model.save(module, path, signatures={
        "serving_default": work, "work": work, "done": module.done.get_concrete_function(),
        "wide": module.wide.get_concrete_function()})
    return path


def save_tiny_model(path, version):
    """Writes version `version` of the tiny model to `path`."""
    module = TinyTranslator(version)
    signatures = {
        "serving_default": module.translate.get_concrete_function(),
        "pair": module.pair.get_concrete_function(),
        "call_count": module.call_count.get_concrete_function(),
        "slow": module.slow.get_concrete_function(),
    }
    tf.saved_model.save(module, path, signatures=signatures)
    return path


def write_warmup(version_dir, texts_per_request, signature_name="serving_default"):
    """Writes assets.extra/tf_serving_warmup_requests with one request per entry."""
    folder = os.path.join(version_dir, "assets.extra")
    os.makedirs(folder, exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(folder, "tf_serving_warmup_requests")) as writer:
        for texts in texts_per_request:
            log = prediction_log_pb2.PredictionLog()
            request = log.predict_log.request
            request.model_spec.name = "tiny"
            request.model_spec.signature_name = signature_name
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts, dtype=tf.string))
            writer.write(log.SerializeToString())


def install_version(source, base_path, version):
    """Copies a saved version in under a temporary name, then renames it."""
    os.makedirs(base_path, exist_ok=True)
    temporary = os.path.join(base_path, f"tmp-{version}")
    shutil.copytree(source, temporary)
    final = os.path.join(base_path, str(version))
    os.rename(temporary, final)
    return final


def install_corrupt_version(base_path, version):
    """A version folder whose saved_model.pb is garbage."""
    folder = os.path.join(base_path, f"tmp-{version}")
    os.makedirs(os.path.join(folder, "variables"))
    with open(os.path.join(folder, "saved_model.pb"), "wb") as file:
        file.write(b"\x08\x96\x01this is not a SavedModel\xff\xfe")
    final = os.path.join(base_path, str(version))
    os.rename(folder, final)
    return final


LABELS = ("question", "exclamation", "statement")


class TinyClassifier(tf.Module):
    """Sentence type from the last character of the `text` feature.

    `classify` takes serialized tf.Examples ("inputs") and returns "classes"
    (B, 3) and "scores" (B, 3): 0.8 for the type ("?", "!", anything else),
    0.1 for the others. `serving_default` takes the text itself.
    """

    def _scores(self, text):
        kind = tf.where(tf.strings.regex_full_match(text, r"(?s).*\?"), 0,
                        tf.where(tf.strings.regex_full_match(text, r"(?s).*!"), 1, 2))
        return tf.one_hot(kind, len(LABELS), on_value=0.8, off_value=0.1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(self, inputs):
        features = tf.io.parse_example(
            inputs, {"text": tf.io.FixedLenFeature([], tf.string, default_value="")})
        scores = self._scores(features["text"])
        classes = tf.tile(tf.constant([LABELS]), [tf.shape(inputs)[0], 1])
        return {"classes": classes, "scores": scores}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def scores_only(self, inputs):
        return {"scores": self.classify(inputs)["scores"]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def predict(self, text):
        scores = self._scores(text)
        return {"label": tf.gather(tf.constant(LABELS), tf.argmax(scores, axis=1)),
                "probabilities": scores}


def save_tiny_classifier(path):
    """Writes the tiny classifier: "classify" and "scores_only" are genuine
    classification signatures; "classify_as_predict" is the same function left
    with the predict method; serving_default predicts from text."""
    from keras_transformer.export.writer import set_method_names

    module = TinyClassifier()
    signatures = {
        "serving_default": module.predict.get_concrete_function(),
        "classify": module.classify.get_concrete_function(),
        "classify_as_predict": module.classify.get_concrete_function(),
        "scores_only": module.scores_only.get_concrete_function(),
    }
    tf.saved_model.save(module, path, signatures=signatures)
    set_method_names(path, {"classify": "tensorflow/serving/classify",
                            "scores_only": "tensorflow/serving/classify"})
    return path


def write_classify_warmup(version_dir, texts, signature_name="classify"):
    """Writes assets.extra/tf_serving_warmup_requests with one ClassificationRequest."""
    folder = os.path.join(version_dir, "assets.extra")
    os.makedirs(folder, exist_ok=True)
    log = prediction_log_pb2.PredictionLog()
    request = log.classify_log.request
    request.model_spec.name = "cls"
    request.model_spec.signature_name = signature_name
    for text in texts:
        request.input.example_list.examples.add().features.feature["text"].bytes_list.value.append(
            text.encode("utf-8"))
    with tf.io.TFRecordWriter(os.path.join(folder, "tf_serving_warmup_requests")) as writer:
        writer.write(log.SerializeToString())
