"""`keras-transformer average`: average a run's epoch checkpoints into one weights file.

    keras-transformer average --run runs/zh-en --last 5
    keras-transformer average --run runs/zh-en --best 3
    keras-transformer evaluate --run runs/zh-en --weights average

The model weights (not the optimizer state) of the chosen checkpoints are
averaged, element by element, into `average.weights.h5` in the run folder, with
`average.json` naming the checkpoints (`runs.weights.average_checkpoints`).
Training keeps the newest `--keep-epoch-checkpoints` (default 5) epoch-end
checkpoints for this.
"""


def add_arguments(parser):
    parser.add_argument("--run", required=True, help="the run folder written by `train`")
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--last", type=int, help="average the newest N epoch checkpoints")
    choice.add_argument("--best", type=int, help="average the N epoch checkpoints of lowest validation loss")


def run(args):
    import os

    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.runs.weights import average_checkpoints
    from keras_transformer.runs.weights import select_checkpoints

    folder = RunFolder(args.run)
    if not os.path.isdir(folder.path):
        raise FileNotFoundError(f"{folder.path} does not exist: train a run first.")
    folder.config  # read for its clear error when this is not a run folder
    select_checkpoints(folder, last=args.last, best=args.best)  # checked before TensorFlow loads
    from keras_transformer.tasks.loading import task_for

    model = task_for(folder.config).build_model(folder.config)
    weights = average_checkpoints(folder, model, last=args.last, best=args.best)
    print(f"averaged {len(weights.sources)} checkpoints ({', '.join(weights.sources)}): {weights.path}")
    print("use them with --weights average (evaluate, export, translate, plot-attention)")
    return 0
