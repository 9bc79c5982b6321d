"""Data layer: corpus reading and splitting, subword tokenizers, tf.data pipelines.

Depends only on ``keras_transformer.constants`` within the project.
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
from keras_transformer.data.pipeline import (
    bucket_batch_sizes,
    bucket_boundaries_for,
    encode_source,
    encode_target,
    make_eval_dataset,
    make_training_dataset,
)
from keras_transformer.data.tokenizer import (
    SOURCE_MODEL_NAME,
    TARGET_MODEL_NAME,
    SubwordTokenizer,
    train_sentencepiece,
    train_tokenizers,
)

__all__ = [
    "CMN_ENG_COLUMNS",
    "DEFAULT_CMN_ENG_PATH",
    "SOURCE_MODEL_NAME",
    "TARGET_MODEL_NAME",
    "CorpusSplit",
    "SentencePair",
    "SubwordTokenizer",
    "bucket_batch_sizes",
    "bucket_boundaries_for",
    "columns_for",
    "encode_source",
    "encode_target",
    "group_pairs",
    "make_eval_dataset",
    "make_training_dataset",
    "read_aligned",
    "read_cmn_eng",
    "read_tsv",
    "sources_and_targets",
    "split_pairs",
    "train_sentencepiece",
    "train_tokenizers",
]
