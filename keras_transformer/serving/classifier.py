"""TF Serving's Classify API: `tf.Example`s in, (label, score) lists out.

Follows tensorflow_serving/servables/tensorflow/classifier.cc and util.cc:

- A classification signature has exactly one input, keyed "inputs", that takes
  the serialized `tf.Example`s (DT_STRING, shape (B,)), and one or two outputs
  among "classes" (DT_STRING, (B, C)) and "scores" (DT_FLOAT, (B, C)).
- With a context (`example_list_with_context`), each example is fed as the
  context's bytes followed by its own: protobuf merges concatenated messages,
  so an example's feature replaces the context's feature of the same name.
- Stock TF Serving checks the method name ("tensorflow/serving/classify") only
  when started with --enable_signature_method_name_check; otherwise only the
  structure above. Both answer INVALID_ARGUMENT with TF Serving's messages.

Shapes: B examples, C classes.
"""

import numpy as np
from tensorflow_serving.apis import classification_pb2

from keras_transformer.serving import budgets
from keras_transformer.serving import errors

CLASSIFY_METHOD = "tensorflow/serving/classify"
INPUTS = "inputs"
CLASSES = "classes"
SCORES = "scores"
DEFAULT_SIGNATURE = "serving_default"


def check_signature_def(signature_def, signature_name, method_name_check=False):
    """Raises unless `signature_def` can answer Classify, as TF Serving decides.

    Args:
        signature_def: the `SignatureDef` proto, or None when there is none.
        signature_name: its key ("" means serving_default), for the message.
        method_name_check: also require the classify method name
            (TF Serving's --enable_signature_method_name_check).

    Raises:
        ServingError: INVALID_ARGUMENT with TF Serving's message.
    """
    if signature_def is None:
        raise errors.invalid_argument(
            f"No signature was found with the name: {signature_name or DEFAULT_SIGNATURE}")
    if method_name_check and signature_def.method_name != CLASSIFY_METHOD:
        raise errors.invalid_argument(
            f"Expected classification signature method_name to be {CLASSIFY_METHOD}. "
            f"Was: {signature_def.method_name}")
    if len(signature_def.inputs) != 1:
        raise errors.invalid_argument("Expected one input Tensor.")
    if len(signature_def.outputs) not in (1, 2):
        raise errors.invalid_argument(
            f"Expected one or two output Tensors, found {len(signature_def.outputs)}")
    if INPUTS not in signature_def.inputs:
        raise errors.invalid_argument(
            f"No classification inputs found in SignatureDef: {signature_def}")
    if CLASSES not in signature_def.outputs and SCORES not in signature_def.outputs:
        raise errors.invalid_argument(
            f'Expected classification signature outputs to contain at least one of "{CLASSES}" '
            f'or "{SCORES}". Signature was: {signature_def}')


def find_signature(servable, signature_name, method_name_check=False):
    """The `servable.Signature` that answers Classify for `signature_name`.

    Args:
        servable: a loaded `servable.Servable`.
        signature_name: the requested key ("" means serving_default).
        method_name_check: see `check_signature_def`.

    Raises:
        ServingError: INVALID_ARGUMENT with TF Serving's message when the
            signature is missing or cannot classify.
    """
    key = signature_name or DEFAULT_SIGNATURE
    check_signature_def(servable.signature_def_map.signature_def.get(key), key,
                        method_name_check)
    return servable.signature(key)


def signature_inputs(signature, request_input, max_bytes=None):
    """The checked inputs {"inputs": (B,) serialized examples} of a request's `Input`."""
    return signature.check_inputs({INPUTS: serialized_examples(request_input, max_bytes)})


def serialized_examples(request_input, max_bytes=None):
    """The (B,) object array of serialized examples an `Input` proto holds.

    Args:
        request_input: an `input_pb2.Input`.
        max_bytes: refuse examples of more bytes in all than this (None: no
            limit), the context counted once per example (it is copied into
            each); checked before anything is serialized.

    Raises:
        ServingError: INVALID_ARGUMENT when the input holds no example;
            RESOURCE_EXHAUSTED over `max_bytes`.
    """
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        examples, context = request_input.example_list.examples, None
    elif kind == "example_list_with_context":
        listed = request_input.example_list_with_context
        examples, context = listed.examples, listed.context
    else:
        examples, context = [], None
    if max_bytes is not None:
        size = sum(example.ByteSize() for example in examples)
        if context is not None:
            size += context.ByteSize() * len(examples)
        if size > max_bytes:
            what = f"The {len(examples)} examples"
            advice = "send fewer examples per request"
            if context is not None:
                what += " with the context copied into each"
                advice += ", or a smaller context"
            raise budgets.request_too_large(what, size, max_bytes, advice)
    if context is None:
        rows = [example.SerializeToString() for example in examples]
    else:
        context_bytes = context.SerializeToString()
        rows = [context_bytes + example.SerializeToString() for example in examples]
    if not rows:
        raise errors.invalid_argument("Input is empty.")
    array = np.empty(len(rows), dtype=object)
    array[:] = rows
    return array


def _label_text(value):
    # Labels are proto strings (UTF-8); a model's odd bytes stay visible, not fatal.
    return value.decode("utf-8", errors="backslashreplace") if isinstance(value, bytes) else value


def classification_result(outputs, num_examples):
    """Converts the signature's outputs to a `ClassificationResult`.

    Args:
        outputs: dict with "classes" (B, C) bytes and/or "scores" (B, C) float32
            arrays (other outputs are ignored).
        num_examples: B, the number of examples sent.

    Returns:
        A `ClassificationResult`: one `Classifications` per example, one `Class`
        (label, score) per column; a missing output leaves its field empty.

    Raises:
        ServingError: INVALID_ARGUMENT with TF Serving's message when an output
            has the wrong rank, dtype or batch size, or the two disagree on C.
    """
    classes = outputs.get(CLASSES)
    scores = outputs.get(SCORES)
    for name, array in ((CLASSES, classes), (SCORES, scores)):
        if array is None:
            continue
        if array.ndim != 2:
            shape = ",".join(str(d) for d in array.shape)
            raise errors.invalid_argument(
                f"Expected Tensor shape: [batch_size num_classes] but got [{shape}]")
        if name == CLASSES and array.dtype.kind not in ("O", "S"):
            raise errors.invalid_argument(
                f"Expected classes Tensor of DT_STRING. Got: {array.dtype}")
        if name == SCORES and array.dtype != np.float32:
            raise errors.invalid_argument(
                f"Expected scores Tensor of DT_FLOAT. Got: {array.dtype}")
        if array.shape[0] != num_examples:
            raise errors.invalid_argument(
                f"Expected {name} output batch size of {num_examples}. Got: {array.shape[0]}")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise errors.invalid_argument(
            f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} "
            f"vs. {scores.shape[1]}")
    num_classes = (classes if classes is not None else scores).shape[1]
    result = classification_pb2.ClassificationResult()
    for i in range(num_examples):
        row = result.classifications.add()
        for c in range(num_classes):
            entry = row.classes.add()
            if classes is not None:
                entry.label = _label_text(classes[i, c])
            if scores is not None:
                entry.score = float(scores[i, c])
    return result
