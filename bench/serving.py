"""Serving speed: translations/s and latency of the embedded server, batching on and off.

A translator (the preset's model with random weights, greedy search, at most
`MAX_OUTPUT` output subwords, the benchmark's SentencePiece models; random
weights rarely produce the end token, so nearly every request decodes the full
`MAX_OUTPUT` tokens: a fixed, repeatable amount of work) is exported with
`write_export` and served by `ServerThread` on 127.0.0.1, once with dynamic
batching (max_batch_size 32, batch_timeout_micros 5000, num_batch_threads 2)
and once without. For each, `concurrency` clients (1, 8, 32; asyncio + aiohttp,
one keep-alive connection each, in this process) send one-sentence REST
`:predict` requests back to back for `seconds`; translations/s = answered
requests / elapsed time, with p50/p99 of the request latencies. Ratio = batched /
unbatched throughput at the same concurrency.
"""

import asyncio
import itertools
import tempfile
import time

import numpy as np

MAX_OUTPUT = 16
MODEL_NAME = "zh_en"
CONCURRENCY = (1, 8, 32)
BATCHING = dict(max_batch_size=32, batch_timeout_micros=5000, num_batch_threads=2)


def _export(base, preset, sentences):
    import keras

    from bench.training import corpus_and_tokenizers
    from keras_transformer.export import TranslationModule
    from keras_transformer.export import write_export
    from keras_transformer.models import build_transformer

    _, _, source, target = corpus_and_tokenizers()
    keras.utils.set_random_seed(0)
    model = build_transformer(preset, source_vocab_size=source.vocab_size,
                              target_vocab_size=target.vocab_size)
    module = TranslationModule(model, source, target, max_source_length=64, beam_width=1,
                               max_output_length=MAX_OUTPUT)
    return write_export(module, base, MODEL_NAME, version=1, warmup_texts=sentences[:4])


async def _load(url, sentences, concurrency, seconds):
    """(answered, failed, elapsed seconds, latencies) of `concurrency` clients."""
    import aiohttp

    texts = itertools.cycle(sentences)
    latencies, failures = [], []
    deadline = time.perf_counter() + seconds

    async def client(session):
        while time.perf_counter() < deadline:
            body = {"instances": [next(texts)]}
            begin = time.perf_counter()
            async with session.post(url, json=body) as response:
                await response.read()
                if response.status == 200:
                    latencies.append(time.perf_counter() - begin)
                else:
                    failures.append(response.status)

    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return len(latencies), len(failures), elapsed, latencies


def _measure(base, batching, sentences, concurrencies, seconds):
    from keras_transformer.serving import config as config_lib
    from keras_transformer.serving import server as server_lib

    options = server_lib.ServerOptions.from_model(
        MODEL_NAME, base, port=0, rest_api_port=0, poll_seconds=0,
        batching=config_lib.BatchingOptions(**BATCHING) if batching else None)
    measured = {}
    with server_lib.ServerThread(options) as running:
        url = f"{running.rest_url}/v1/models/{MODEL_NAME}:predict"
        for concurrency in concurrencies:
            asyncio.run(_load(url, sentences, concurrency, min(1.0, seconds)))  # warm up
            measured[concurrency] = asyncio.run(_load(url, sentences, concurrency, seconds))
    return measured


def run(results, quick=False, concurrencies=CONCURRENCY):
    from bench.training import corpus_and_tokenizers

    preset = results.options.get("serving_preset", "small")
    seconds = 3.0 if quick else 15.0
    sources = corpus_and_tokenizers()[0]
    sentences = [text for text in sources[::97] if text][:256]
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as folder:
        base = f"{folder}/{MODEL_NAME}"
        _export(folder, preset, sentences)
        measured = {mode: _measure(base, mode, sentences, concurrencies, seconds)
                    for mode in (False, True)}
    for concurrency in concurrencies:
        rates = {}
        for batching in (False, True):
            answered, failed, elapsed, latencies = measured[batching][concurrency]
            rates[batching] = answered / elapsed
            mode = "batching on" if batching else "batching off"
            case = f"{preset}, greedy ≤{MAX_OUTPUT} tokens, concurrency {concurrency}, {mode}"
            ratio = rates[True] / rates[False] if batching and rates[False] else None
            results.add("serving", case, "translations/s", rates[batching], "req/s", ratio=ratio,
                        baseline=batching and "batching off, same concurrency" or None)
            if latencies:
                p50, p99 = np.percentile(np.asarray(latencies) * 1e3, [50, 99])
                results.add("serving", case, "latency p50", p50, "ms")
                results.add("serving", case, "latency p99", p99, f"ms ({answered} requests"
                            + (f", {failed} failed)" if failed else ")"))
