"""Floor 3: the exported translator (`TranslationModule`) and the versioned writer."""

from keras_transformer.export.module import TranslationModule
from keras_transformer.export.writer import check_model_name
from keras_transformer.export.writer import write_export

__all__ = ["TranslationModule", "check_model_name", "write_export"]
