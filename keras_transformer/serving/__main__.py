"""`python -m keras_transformer.serving --model_name=zh_en --model_base_path=export/zh_en`.

The same flags as tensorflow_model_server; see `keras_transformer.serving.command`.
"""

from keras_transformer.serving import command

if __name__ == "__main__":
    raise SystemExit(command.main())
