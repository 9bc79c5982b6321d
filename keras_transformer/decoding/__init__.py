"""Floor 2: decoding with the key/value cache and teacher-forced scoring.

One loop (`loop.decode`) runs the one-token step under a strategy (`GreedySearch`
with a sampler, `BeamSearch`); `SequenceSearch` (the translator's greedy and beam
search) and `Generator` (the language model's greedy and sampled generation) run it.
"""

from keras_transformer.decoding.generation import Generator
from keras_transformer.decoding.loop import Rows
from keras_transformer.decoding.loop import decode
from keras_transformer.decoding.loop import next_token_log_probs
from keras_transformer.decoding.samplers import BestSampler
from keras_transformer.decoding.samplers import RandomSampler
from keras_transformer.decoding.samplers import choose_tokens
from keras_transformer.decoding.scoring import score_sequences
from keras_transformer.decoding.search import SequenceSearch
from keras_transformer.decoding.strategies import BeamSearch
from keras_transformer.decoding.strategies import GreedySearch
from keras_transformer.decoding.strategies import coverage_penalty
from keras_transformer.decoding.strategies import length_penalty

__all__ = [
    "BeamSearch",
    "BestSampler",
    "Generator",
    "GreedySearch",
    "RandomSampler",
    "Rows",
    "SequenceSearch",
    "choose_tokens",
    "coverage_penalty",
    "decode",
    "length_penalty",
    "next_token_log_probs",
    "score_sequences",
]
