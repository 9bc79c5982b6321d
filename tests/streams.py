"""Reading a run's training stream in tests, as strings before tokenization."""


def training_pass(run_dir, epoch=0, shard=0, num_shards=1):
    """One pass of a run's training examples as tuples of strings: a translation run's
    (source, target) pairs (dictionary entries and both directions included), a
    language model's (text,), a classifier's (label, text)."""
    from keras_transformer.data.streaming import SplitRule, layout_from_record, pass_strings
    from keras_transformer.tasks.translator import training_pairs

    config = run_dir.config
    if config["task"] == "translate":
        examples = training_pairs(run_dir, config, epoch, shard=shard, num_shards=num_shards)
    else:
        data = config["data"]
        examples = pass_strings(layout_from_record(data), SplitRule.from_dict(data["split"]), epoch,
                                shard=shard, num_shards=num_shards, max_examples=data["max_examples"])
    return [tuple(field.decode("utf-8") for field in example) for example in examples.as_numpy_iterator()]
