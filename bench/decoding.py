"""Decoding speed: the cached search versus the TensorFlow tutorial's uncached loop.

Sentences per second at batch 1 and 32, exactly `new_tokens` tokens each (an end
token the model never produces makes every row run to the limit), greedy, on one
model with random weights. The baseline reruns the whole model on the full prefix
at every step, as the tutorial's `Translator` does. Beam 4's cost is reported
relative to greedy.
"""

import numpy as np

from bench.common import time_call


def run(results, preset="small", new_tokens=32, source_length=20, batch_sizes=(1, 32), jit=False):
    import keras

    from keras_transformer.decoding import SequenceSearch, make_uncached_greedy
    from keras_transformer.models import build_transformer

    keras.utils.set_random_seed(0)
    model = build_transformer(preset, source_vocab_size=8000, target_vocab_size=8000)
    never = 10**6  # an end token outside the vocabulary: every row decodes new_tokens
    greedy = SequenceSearch(model, max_length=new_tokens, eos_id=never, jit_compile=jit)
    beam = SequenceSearch(model, max_length=new_tokens, eos_id=never, beam_width=4, jit_compile=jit)
    uncached = make_uncached_greedy(model, max_length=new_tokens, eos_id=never)
    rng = np.random.default_rng(0)
    label = f"{preset}, {new_tokens} tokens" + (", XLA" if jit else "")
    for batch_size in batch_sizes:
        source = rng.integers(4, 8000, size=(batch_size, source_length)).astype("int32")
        ours = time_call(lambda: greedy.greedy(source, new_tokens)["tokens"].numpy(), repeats=3)
        baseline = time_call(lambda: uncached(source).numpy(), repeats=3)
        beam_time = time_call(lambda: beam.beam_search(source, new_tokens)["tokens"].numpy(), repeats=3)
        case = f"{label}, batch {batch_size}"
        results.add("decoding", case, "greedy sentences/s (uncached tutorial loop)",
                    batch_size / baseline, "sent/s")
        results.add("decoding", case, "greedy sentences/s (cached, ours)", batch_size / ours,
                    "sent/s", ratio=baseline / ours, baseline="uncached tutorial loop")
        results.add("decoding", case, "beam 4 sentences/s (cached, ours)", batch_size / beam_time,
                    "sent/s", ratio=ours / beam_time, baseline="our greedy (cost of beam 4)")
