"""A named layer around the padding-mask helper, so model summaries read well."""

import keras

from keras_transformer.constants import PAD_ID
from keras_transformer.ops import checks
from keras_transformer.ops.masks import padding_mask


@keras.saving.register_keras_serializable(package="keras_transformer")
class PaddingMask(keras.layers.Layer):
    """Token ids (B, L) → booleans (B, L), True for real tokens (id != pad_id)."""

    def __init__(self, pad_id=PAD_ID, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = int(pad_id)

    def call(self, token_ids):
        checks.check_integer("token_ids", token_ids.dtype)
        return padding_mask(token_ids, self.pad_id)

    def compute_output_shape(self, token_ids_shape):
        return tuple(token_ids_shape)

    def compute_output_spec(self, token_ids):
        return keras.KerasTensor(self.compute_output_shape(token_ids.shape), dtype="bool")

    def get_config(self):
        config = super().get_config()
        config.update({"pad_id": self.pad_id})
        return config
