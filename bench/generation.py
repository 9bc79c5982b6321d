"""Language-model generation speed: the cached loop versus the uncached reference.

New tokens per second at batch 1 and 32, prompts of 8 tokens, exactly `new_tokens`
new tokens a row (an end token outside the vocabulary), one `LanguageModel` of the
preset's sizes with random weights. The baseline (`bench.uncached.UncachedGenerator`) reruns
the whole model on the full prefix at every step; it cannot use XLA (its prefix
grows), so it runs in graph mode in both modes. Sampling (temperature 1, top-k 50,
top-p 0.9: a sort of the vocabulary and one stateless draw a row per step) is
reported relative to cached greedy.
"""

import numpy as np

from bench.common import jit_modes
from bench.common import rounds_for_batch
from bench.common import time_interleaved


def run(results, quick=False, preset=None, new_tokens=None, prompt_length=8,
        batch_sizes=(1, 32), jit=None):
    """Adds the generation rows to `results`.

    `preset`, `jit` and the precision default to the command line's options
    (`results.options`: preset, xla "on"/"off"/"both", mixed_precision).
    """
    options = results.options
    preset = preset or options.get("preset", "small")
    if jit is None:
        modes = jit_modes(options, default="off")
    else:
        modes = (jit,)
    precision = options.get("mixed_precision", "none")
    new_tokens = new_tokens or (8 if quick else 32)
    repeats = 3 if quick else 5
    for jit_mode in modes:
        _run(results, preset, new_tokens, prompt_length, batch_sizes, jit_mode, precision,
             repeats)


def _run(results, preset, new_tokens, prompt_length, batch_sizes, jit, precision, repeats):
    import keras

    from bench.uncached import UncachedGenerator
    from keras_transformer.decoding import Generator
    from keras_transformer.models import build_language_model

    keras.utils.set_random_seed(0)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32" if precision == "none" else precision)
    try:
        model = build_language_model(preset, vocab_size=8000)
    finally:
        keras.config.set_dtype_policy(previous)
    never = 10**6  # every row generates exactly new_tokens
    length = prompt_length + new_tokens
    cached = Generator(model, max_length=length, eos_id=never, jit_compile=jit)
    uncached = UncachedGenerator(model, max_length=length, eos_id=never)
    label = (f"{preset}, {new_tokens} new tokens" + (", XLA" if jit else "")
             + ("" if precision == "none" else f", {precision}"))
    baseline_name = "greedy tokens/s (uncached" + (", no XLA)" if jit else ")")
    sampling = dict(temperature=1.0, top_k=50, top_p=0.9, seed=1)
    rng = np.random.default_rng(0)
    for batch_size in batch_sizes:
        prompts = rng.integers(4, 8000, size=(batch_size, prompt_length)).astype("int32")
        ours, baseline, sampled = time_interleaved(
            [
                lambda: cached.generate(prompts, new_tokens)["tokens"].numpy(),
                lambda: uncached.generate(prompts, new_tokens)["tokens"].numpy(),
                lambda: cached.generate(prompts, new_tokens, **sampling)["tokens"].numpy(),
            ],
            repeats=rounds_for_batch(batch_size, repeats),
        )
        tokens = batch_size * new_tokens
        case = f"{label}, batch {batch_size}"
        results.add("generation", case, baseline_name, tokens / baseline, "tokens/s")
        results.add("generation", case, "greedy tokens/s (cached, ours)", tokens / ours,
                    "tokens/s", ratio=baseline / ours, baseline="uncached")
        results.add("generation", case, "sampled tokens/s (cached, top-k 50, top-p 0.9)",
                    tokens / sampled, "tokens/s", ratio=ours / sampled,
                    baseline="cached greedy (cost of sampling)")
