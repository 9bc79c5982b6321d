"""Floor 2: decoding with the key/value cache (greedy, beam; language-model
generation with sampling) and teacher-forced scoring."""

from keras_transformer.decoding.generation import Generator
from keras_transformer.decoding.generation import choose_tokens
from keras_transformer.decoding.scoring import score_sequences
from keras_transformer.decoding.search import SequenceSearch
from keras_transformer.decoding.search import length_penalty
from keras_transformer.decoding.uncached import make_uncached_greedy

__all__ = [
    "Generator",
    "SequenceSearch",
    "choose_tokens",
    "length_penalty",
    "make_uncached_greedy",
    "score_sequences",
]
