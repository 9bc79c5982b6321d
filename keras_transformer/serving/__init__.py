"""A TF Serving-compatible model server for any SavedModel folder.

Modules (one idea each):
    config        model config / batching / monitoring text protos
    servable      one loaded SavedModel version and its signatures
    warmup        assets.extra/tf_serving_warmup_requests replay
    manager       version policy, loading, atomic switch, ref-counted unload
    batching      dynamic batching of concurrent requests
    budgets       byte budgets; model calls run in slices that stop at a deadline
    scheduling    a model's threads shared between its calls slice by slice
    inference     the request path shared by REST and gRPC
    json_tensor   REST JSON formats <-> numpy
    tensors       TensorProto <-> numpy
    rest          REST API (aiohttp)
    grpc_service  PredictionService and ModelService (grpc.aio)
    metrics       Prometheus metrics under TF Serving's names
    server        ModelServer, ServerThread, serve_until_signal() (no flags here)
    command       the flags (tensorflow_model_server's names), serve(), main()
    __main__      `python -m keras_transformer.serving`
    client        ServingClient / TranslationClient (REST or gRPC)
    static/       the translation web page served at / (index.html, app.js, style.css)

The page's headless-Chromium driver (screenshots, page tests) is
tests/web/screenshot.py; the runtime package does not need it.

The version-folder convention lives in `keras_transformer.versions` (shared with
the exporter). The package imports nothing heavy at import time and never imports
the Keras model code.
"""
