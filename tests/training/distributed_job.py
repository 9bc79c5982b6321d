"""A few training steps of the tiny preset under a chosen strategy (run as a script).

Used by test_distributed.py in subprocesses, because logical CPU devices and
multi-worker collectives must be configured before TensorFlow initialises. Every
run trains on the same synthetic batches from the same initial weights, so runs
under different strategies can be compared number for number.

    python distributed_job.py --strategies default,mirrored --logical-cpus 2 \
        --init init.weights.h5 --out result.json
"""

import argparse
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VOCAB = 40
GLOBAL_BATCH = 8
STEPS = 3
WIDTH = 12


def synthetic_batches():
    """(encoder, decoder, labels) int32 arrays: STEPS batches, ragged real lengths."""
    import numpy as np

    rng = np.random.default_rng(7)
    count = GLOBAL_BATCH * STEPS
    encoder = np.zeros((count, WIDTH), "int32")
    decoder = np.zeros((count, WIDTH), "int32")
    labels = np.zeros((count, WIDTH), "int32")
    for row in range(count):
        # Rows of one batch differ a lot in length, so replicas get unequal token counts.
        source_length = int(rng.integers(1, WIDTH + 1))
        target_length = int(rng.integers(1, WIDTH))
        encoder[row, :source_length] = rng.integers(4, VOCAB, source_length)
        target = rng.integers(4, VOCAB, target_length)
        decoder[row, : target_length + 1] = [2, *target]
        labels[row, : target_length + 1] = [*target, 3]
    return encoder, decoder, labels


def dataset(strategy):
    """The global batches; under a multi-worker strategy, this worker's share of each
    (its consecutive rows), as each worker reads its own share of a run's corpus."""
    import tensorflow as tf

    from keras_transformer.training.strategy import worker_share

    encoder, decoder, labels = synthetic_batches()
    data = tf.data.Dataset.from_tensor_slices(
        ({"encoder_tokens": encoder, "decoder_tokens": decoder}, labels)
    ).batch(GLOBAL_BATCH)
    index, count = worker_share(strategy)
    if count > 1:
        rows = GLOBAL_BATCH // count
        data = data.map(lambda features, labels: tf.nest.map_structure(
            lambda t: t[index * rows:(index + 1) * rows], (features, labels)))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.with_options(options)


def run(strategy, init_path):
    """Trains STEPS steps; returns the per-step losses and the final weights' sums."""
    import keras
    import numpy as np

    from keras_transformer.models import build_transformer
    from keras_transformer.training.trainer import compile_model
    from keras_transformer.training.trainer import prepare_for_fit

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_transformer("tiny", source_vocab_size=VOCAB, target_vocab_size=VOCAB)
        compile_model(model, warmup_steps=2, lr_scale=0.05, label_smoothing=0.1)
    if os.path.exists(init_path):
        model.load_weights(init_path)
    else:
        model.save_weights(init_path)

    running = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            running.append(float(logs["loss"]))

    data, _ = prepare_for_fit(model, strategy, dataset(strategy))
    model.fit(data, epochs=1, verbose=0, shuffle=False, callbacks=[Record()])
    # Keras logs the running mean of the epoch; recover each step's loss.
    losses = [(k + 1) * m - k * p for k, (m, p) in enumerate(zip(running, [0.0] + running))]
    return {
        "losses": losses,
        "weight_sums": [float(np.sum(np.abs(w))) for w in model.get_weights()],
        "replicas": strategy.num_replicas_in_sync,
    }


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategies", default="default")
    parser.add_argument("--logical-cpus", type=int, default=1)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    import tensorflow as tf

    # The model is tiny and the tests run several processes on a small machine.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    if args.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus
        )
    from keras_transformer.training.strategy import make_strategy

    results = {}
    for kind in args.strategies.split(","):
        devices = None
        if kind == "mirrored":
            devices = [f"/cpu:{i}" for i in range(args.logical_cpus)]
        results[kind] = run(make_strategy(kind, devices=devices), args.init)
    with open(args.out, "w") as file:
        json.dump(results, file)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.exit(main())
