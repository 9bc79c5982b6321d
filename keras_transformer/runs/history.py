"""A run's history: one record per epoch, in history.json and history.csv.

Training appends a record at each epoch end (`training.callbacks.RunHistory`):
the epoch, the optimizer step, the learning rate, the training seconds of the
whole run so far and the logs (loss, metrics, val_*). The plots and the choice of
weights read it. This module imports only the standard library at import time.
"""

import csv
import io
import os

from keras_transformer import files


class History:
    """The epoch records of one run folder.

    Args:
        folder: the `RunFolder` (its paths).
    """

    def __init__(self, folder):
        self.folder = folder

    def read(self, required=False):
        """The epoch records of history.json.

        Args:
            required: raise when there is no record yet (for the plots); otherwise
                return [] (training starts a history).

        Raises:
            FileNotFoundError: `required` and no folder or no history.json.
            ValueError: a history.json that is not a list of records (or, when
                `required`, an empty one).
        """
        path = self.folder.history_path
        if not os.path.exists(path):
            if not required:
                return []
            if not os.path.isdir(self.folder.path):
                raise FileNotFoundError(f"{self.folder.path} does not exist: train a run first.")
            raise FileNotFoundError(
                f"{path} does not exist: training writes it at the end of each "
                "epoch; wait for the first epoch to end."
            )
        records = files.read_json(path)
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError(f"{path} must hold a list of epoch records.")
        if required and not records:
            raise ValueError(f"{path} has no epochs yet: wait for the first epoch to end.")
        return records

    def write(self, records):
        """Writes history.json and history.csv (columns: every key seen, in order)."""
        files.write_json(self.folder.history_path, records, indent=1)
        keys = []
        for record in records:
            keys.extend(key for key in record if key not in keys)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        files.write_text(self.folder.history_csv_path, text.getvalue())

    def record(self, epoch=None, step=None):
        """The newest record of `epoch` or of `step` ({} when there is none)."""
        for record in reversed(self.read()):
            if (epoch is not None and record.get("epoch") == epoch) or (
                step is not None and record.get("step") == step
            ):
                return record
        return {}
