"""Data layer: corpus reading and splitting, subword tokenizers, tf.data pipelines.

Depends only on ``keras_transformer.constants`` within the project. The
tokenizer and pipeline names load lazily, so that reading and splitting a
corpus does not import TensorFlow.
"""


from keras_transformer.data.corpus import (
    CMN_ENG_COLUMNS,
    DEFAULT_CMN_ENG_PATH,
    CorpusSplit,
    SentencePair,
    columns_for,
    group_pairs,
    read_aligned,
    read_cmn_eng,
    read_tsv,
    sources_and_targets,
    split_pairs,
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
}

__all__ = [
    "CMN_ENG_COLUMNS",
    "DEFAULT_CMN_ENG_PATH",
    "CorpusSplit",
    "SentencePair",
    "columns_for",
    "group_pairs",
    "read_aligned",
    "read_cmn_eng",
    "read_tsv",
    "sources_and_targets",
    "split_pairs",
    *_LAZY,
]

__getattr__ = lazy_getattr(__name__, _LAZY)
