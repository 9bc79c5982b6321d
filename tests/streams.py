"""Reading a run's training stream in tests, as strings before tokenization."""


def training_pass(run_dir, epoch=0, shard=0, num_shards=1):
    """One pass of a translation run's training pairs: a list of (source, target) strings."""
    from keras_transformer.tasks.translator import training_pairs

    return [(source.decode("utf-8"), target.decode("utf-8")) for source, target in
            training_pairs(run_dir, run_dir.config, epoch, shard=shard,
                           num_shards=num_shards).as_numpy_iterator()]
