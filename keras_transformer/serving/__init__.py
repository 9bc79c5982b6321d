"""A TF Serving-compatible model server for any SavedModel folder.

Modules (one idea each):
    config        model config / batching / monitoring text protos
    servable      one loaded SavedModel version and its signatures
    warmup        assets.extra/tf_serving_warmup_requests replay
    manager       version policy, loading, atomic switch, ref-counted unload
    batching      dynamic batching of concurrent requests
    inference     the request path shared by REST and gRPC
    json_tensor   REST JSON formats <-> numpy
    tensors       TensorProto <-> numpy
    rest          REST API (aiohttp)
    grpc_service  PredictionService and ModelService (grpc.aio)
    metrics       Prometheus metrics under TF Serving's names
    server        ModelServer, ServerThread, serve(), add_arguments(), main()
    client        ServingClient / TranslationClient (REST or gRPC)
    static/       the translation web page served at / (index.html, app.js, style.css)
    screenshot    drives that page in headless Chromium (tests, README picture)

The version-folder convention lives in `keras_transformer.versions` (shared with
the exporter). The package imports nothing heavy at import time and never imports
the Keras model code.
"""
