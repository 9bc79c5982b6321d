"""Data layer: corpus files, the streamed split, subword tokenizers, tf.data pipelines.

Depends only on ``keras_transformer.constants`` within the project. The
tokenizer, pipeline and streaming names load lazily, so that reading a small
file does not import TensorFlow.
"""


from keras_transformer.data.corpus import (
    CMN_ENG_COLUMNS,
    DEFAULT_CMN_ENG_PATH,
    SentencePair,
    columns_for,
    read_aligned,
    read_cmn_eng,
    read_tsv,
    sources_and_targets,
)
from keras_transformer.lazy import lazy_getattr

_LAZY = {
    "SOURCE_MODEL_NAME": "tokenizer",
    "TARGET_MODEL_NAME": "tokenizer",
    "SubwordTokenizer": "tokenizer",
    "train_sentencepiece": "tokenizer",
    "train_tokenizers": "tokenizer",
    "bucket_batch_sizes": "pipeline",
    "bucket_boundaries_for": "pipeline",
    "encode_source": "pipeline",
    "encode_target": "pipeline",
    "make_eval_dataset": "pipeline",
    "make_training_dataset": "pipeline",
    "SplitRule": "streaming",
    "layout_of": "streaming",
    "pass_strings": "streaming",
    "scan": "streaming",
}

__all__ = [
    "CMN_ENG_COLUMNS",
    "DEFAULT_CMN_ENG_PATH",
    "SentencePair",
    "columns_for",
    "read_aligned",
    "read_cmn_eng",
    "read_tsv",
    "sources_and_targets",
    *_LAZY,
]

__getattr__ = lazy_getattr(__name__, _LAZY)
