"""Version manager: which SavedModel versions are loaded, and when they change.

For each configured model the manager polls the base path (every
`--file_system_poll_wait_seconds`), picks the versions its policy aspires to
(latest N, all, or specific), loads new ones (warmup included) while the old
ones keep serving, then retires versions that are no longer aspired. As in
TF Serving's availability-preserving policy, a version is only retired once an
aspired version is AVAILABLE, so a version that fails to load leaves the
previous one serving; the failure shows in the model status.

A failed load is retried like TF Serving's (`--max_num_load_retries` times,
`--load_retry_interval_micros` apart), on the polls that follow, so a folder
that was still being copied is served once complete. A failed version whose
files change later (a new copy) is loaded afresh.

Requests hold a reference-counted handle on the version they run on; a retired
version is UNLOADING until its last handle is released, then END.
"""

import concurrent.futures
import dataclasses
import enum
import logging
import os
import threading
import time

from keras_transformer.serving import config as config_lib
from keras_transformer.serving import errors
from keras_transformer import versions as versions_lib

_log = logging.getLogger(__name__)

_MAX_ENDED_RECORDS = 16  # Retired versions kept for status reports.


class State(enum.Enum):
    """ModelVersionStatus.State names."""

    START = "START"
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"
    UNLOADING = "UNLOADING"
    END = "END"


@dataclasses.dataclass
class VersionStatus:
    """One row of a model status report."""

    version: int
    state: State
    error: errors.ServingError | None = None


class _VersionRecord:
    def __init__(self, version, path):
        self.version = version
        self.path = path
        self.state = State.START
        self.error = None
        self.servable = None
        self.batchers = {}
        self.refcount = 0
        self.fingerprint = None
        self.failed_loads = 0
        self.retry_at = 0.0


def _fingerprint(path):
    """Changes when a version folder is replaced or still being written."""
    stats = []
    for name in ("", "saved_model.pb", "saved_model.pbtxt", "variables",
                 os.path.join("variables", "variables.index")):
        try:
            stat = os.stat(os.path.join(path, name))
            stats.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            stats.append(None)
    return tuple(stats)


@dataclasses.dataclass(frozen=True)
class LoadRetryPolicy:
    """How often a failed load is tried again (TF Serving's flags).

    Attributes:
        max_retries: --max_num_load_retries; 0 never retries.
        interval_s: --load_retry_interval_micros, in seconds.
    """

    max_retries: int = 5
    interval_s: float = 60.0


class ServableHandle:
    """A reference on one AVAILABLE version; release it exactly once.

    Attributes:
        model_name: the model's name.
        version: the integer version.
        servable: the `servable.Servable`.
    """

    def __init__(self, model, record):
        self._model = model
        self._record = record
        self._released = False
        self.model_name = model.name
        self.version = record.version
        self.servable = record.servable

    def batcher(self, signature_name):
        """The BatchScheduler for a signature, or None when it runs unbatched."""
        return self._record.batchers.get(signature_name)

    def release(self):
        if not self._released:
            self._released = True
            self._model._release(self._record)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()


class ModelVersions:
    """The versions of one model.

    Args:
        model_config: a `ModelConfig` proto (name, base_path, policy, labels).
        load_servable: callable(path) -> servable, loads and warms up one
            version; raises on failure.
        make_batchers: callable(model_name, servable) -> dict {signature name:
            BatchScheduler}, or None when batching is off.
        retry: a `LoadRetryPolicy`.
    """

    def __init__(self, model_config, load_servable, make_batchers=None, retry=None):
        self.name = model_config.name
        self._lock = threading.RLock()
        self._records = {}
        self._load_servable = load_servable
        self._make_batchers = make_batchers
        self._retry = retry or LoadRetryPolicy()
        self.update_config(model_config)

    def update_config(self, model_config):
        with self._lock:
            self.config = model_config
            self.base_path = model_config.base_path
            self.policy = config_lib.version_policy(model_config)
            self.labels = dict(model_config.version_labels)

    # -------------------------------------------------------------- requests

    def acquire(self, version=None, label=None):
        """Takes a handle on the requested version.

        Args:
            version: an integer version, or None.
            label: a version label, or None. With neither, the latest
                AVAILABLE version is used.

        Returns:
            A `ServableHandle`.

        Raises:
            ServingError: INVALID_ARGUMENT for an unknown label, NOT_FOUND when
                the version is not AVAILABLE.
        """
        with self._lock:
            if label is not None:
                version = self._version_for_label(label)
            if version is None:
                available = [v for v, r in self._records.items() if r.state is State.AVAILABLE]
                if not available:
                    raise errors.not_found(f"Servable not found for request: Latest({self.name})")
                version = max(available)
            record = self._records.get(version)
            if record is None or record.state is not State.AVAILABLE:
                raise errors.not_found(
                    f"Servable not found for request: Specific({self.name}, {version})")
            record.refcount += 1
            return ServableHandle(self, record)

    def _version_for_label(self, label):
        if label not in self.labels:
            raise errors.invalid_argument(f"Unrecognized servable version label: {label}")
        return self.labels[label]

    def _release(self, record):
        with self._lock:
            record.refcount -= 1
            finish = record.state is State.UNLOADING and record.refcount == 0
        if finish:
            self._finish_unload(record)

    def status(self, version=None, label=None):
        """Returns the status rows TF Serving's GetModelStatus reports.

        Raises:
            ServingError: NOT_FOUND when the model or version was never seen,
                INVALID_ARGUMENT for an unknown label.
        """
        with self._lock:
            if label is not None:
                version = self._version_for_label(label)
            if version is not None:
                record = self._records.get(version)
                if record is None:
                    raise errors.not_found(f"Could not find version {version} of model {self.name}")
                records = [record]
            else:
                records = sorted(self._records.values(), key=lambda r: r.version, reverse=True)
                if not records:
                    raise errors.not_found(f"Could not find any versions of model {self.name}")
            return [VersionStatus(r.version, r.state, r.error) for r in records]

    def in_flight_requests(self):
        """{version: number of handles held}, for versions with any."""
        with self._lock:
            return {v: r.refcount for v, r in self._records.items() if r.refcount}

    # --------------------------------------------------------------- polling

    def _aspired(self, on_disk):
        kind, value = self.policy
        if kind == "all":
            return set(on_disk)
        if kind == "specific":
            return set(on_disk) & value
        return set(sorted(on_disk)[-value:])

    def poll(self):
        """Loads newly aspired versions and retires those no longer aspired.

        Loads run in the calling thread, newest version first; requests keep
        being served meanwhile.
        """
        on_disk = versions_lib.version_paths(self.base_path)
        if not on_disk:
            # Like TF Serving, an empty or missing base path (a transient file
            # system problem, or nothing exported yet) unloads nothing.
            return
        aspired = self._aspired(on_disk)
        for version in sorted(aspired, reverse=True):
            self._maybe_load(version, on_disk[version])
        with self._lock:
            keep_old = not any(self._records[v].state is State.AVAILABLE
                               for v in aspired if v in self._records)
            if keep_old:
                return
            retire = [r for v, r in self._records.items()
                      if v not in aspired and r.state is State.AVAILABLE]
        for record in retire:
            self.retire(record)

    def _maybe_load(self, version, path):
        fingerprint = _fingerprint(path)
        with self._lock:
            previous = self._records.get(version)
            failed_loads = 0
            if previous is not None:
                if previous.state is not State.END or previous.error is None:
                    return
                if previous.fingerprint == fingerprint:  # Same files: a retry, if due.
                    if (previous.failed_loads > self._retry.max_retries
                            or time.monotonic() < previous.retry_at):
                        return
                    failed_loads = previous.failed_loads
            record = _VersionRecord(version, path)
            record.fingerprint = fingerprint
            record.failed_loads = failed_loads
            record.state = State.LOADING
            self._records[version] = record
        _log.info("Loading servable: {name: %s version: %d} from %s", self.name, version, path)
        try:
            servable = self._load_servable(path)
            batchers = self._make_batchers(self.name, servable) if self._make_batchers else {}
        except Exception as error:
            failure = errors.from_exception(error)
            if failure.code == "INVALID_ARGUMENT" and not isinstance(error, errors.ServingError):
                failure = errors.ServingError("UNKNOWN", failure.message)
            with self._lock:
                record.state, record.error = State.END, failure
                record.failed_loads += 1
                record.retry_at = time.monotonic() + self._retry.interval_s
                retries_left = self._retry.max_retries - record.failed_loads + 1
            _log.error("Loading servable: {name: %s version: %d} failed: %s (%s)",
                       self.name, version, failure.message,
                       f"retrying in {self._retry.interval_s:g} s, {retries_left} retries left"
                       if retries_left > 0 else "no retries left; a new copy is loaded afresh")
            return
        with self._lock:
            record.servable, record.batchers = servable, batchers
            record.state = State.AVAILABLE  # Atomic switch: the next acquire sees it.
        _log.info("Successfully loaded servable version {name: %s version: %d}", self.name, version)

    def retire(self, record):
        """Marks a version UNLOADING; it ends when its last request finishes."""
        with self._lock:
            if record.state is not State.AVAILABLE:
                return
            record.state = State.UNLOADING
            finish = record.refcount == 0
        _log.info("Unloading servable version {name: %s version: %d}", self.name, record.version)
        if finish:
            self._finish_unload(record)

    def retire_all(self):
        with self._lock:
            records = list(self._records.values())
        for record in records:
            self.retire(record)

    def _finish_unload(self, record):
        for batcher in record.batchers.values():
            batcher.stop()
        with self._lock:
            if record.servable is not None:
                record.servable.unload()
            record.servable, record.batchers = None, {}
            record.state = State.END
            ended = sorted((r.version for r in self._records.values()
                            if r.state is State.END and r.error is None))
            for version in ended[:-_MAX_ENDED_RECORDS]:
                del self._records[version]


class ModelRegistry:
    """All configured models, and the thread that keeps them up to date.

    Args:
        model_server_config: a validated `ModelServerConfig`.
        load_servable: callable(path) -> servable (load and warm up).
        make_batchers: see `ModelVersions`.
        poll_seconds: file system poll period; <= 0 polls only at start.
        retry: a `LoadRetryPolicy` for failed loads.
        num_load_threads: models polled (and loaded) in parallel; 0 or 1 loads
            one model at a time.
    """

    def __init__(self, model_server_config, load_servable, make_batchers=None, poll_seconds=1.0,
                 retry=None, num_load_threads=0):
        self._load_servable = load_servable
        self._make_batchers = make_batchers
        self._poll_seconds = poll_seconds
        self._retry = retry or LoadRetryPolicy()
        self._num_load_threads = max(1, num_load_threads)
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()  # One poll (and load) at a time.
        self._models = {}
        self._stop = threading.Event()
        self._thread = None
        self._apply_config(model_server_config)

    @property
    def model_names(self):
        with self._lock:
            return sorted(self._models)

    def model(self, name):
        """Returns the ModelVersions for a name.

        Raises:
            ServingError: INVALID_ARGUMENT for a name that is not a plain
                identifier, NOT_FOUND for an unknown one.
        """
        try:
            config_lib.check_model_name(name)
        except config_lib.ConfigError as error:
            raise errors.invalid_argument(str(error)) from error
        with self._lock:
            model = self._models.get(name)
        if model is None:
            raise errors.not_found(f"Servable not found for request: Latest({name})")
        return model

    def status(self, name, version=None, label=None):
        """Status rows of a model; an unknown model is NOT_FOUND like in TF Serving."""
        try:
            model = self.model(name)
        except errors.ServingError as error:
            if error.code == "NOT_FOUND":
                raise errors.not_found(f"Could not find any versions of model {name}") from None
            raise
        return model.status(version, label)

    def acquire(self, name, version=None, label=None):
        return self.model(name).acquire(version, label)

    def _apply_config(self, model_server_config):
        with self._lock:
            wanted = {c.name: c for c in model_server_config.model_config_list.config}
            removed = [m for n, m in self._models.items()
                       if n not in wanted or m.base_path != wanted[n].base_path]
            for model in removed:
                del self._models[model.name]
            for name, model_config in wanted.items():
                if name in self._models:
                    self._models[name].update_config(model_config)
                else:
                    self._models[name] = ModelVersions(
                        model_config, self._load_servable, self._make_batchers, self._retry)
        for model in removed:
            model.retire_all()

    def reload_config(self, model_server_config):
        """Replaces the model list (HandleReloadConfigRequest) and loads at once."""
        config_lib.validate_model_config(model_server_config)
        self._apply_config(model_server_config)
        self.poll_once()

    @property
    def model_server_config(self):
        """The model list now served, as a `ModelServerConfig`."""
        from tensorflow_serving.config import model_server_config_pb2

        config = model_server_config_pb2.ModelServerConfig()
        with self._lock:
            for name in sorted(self._models):
                config.model_config_list.config.add().CopyFrom(self._models[name].config)
        return config

    def poll_once(self):
        with self._poll_lock:
            with self._lock:
                models = list(self._models.values())
            if self._num_load_threads > 1 and len(models) > 1:
                with concurrent.futures.ThreadPoolExecutor(
                        self._num_load_threads, thread_name_prefix="load") as pool:
                    list(pool.map(self._poll_model, models))
            else:
                for model in models:
                    self._poll_model(model)

    @staticmethod
    def _poll_model(model):
        try:
            model.poll()
        except Exception:  # One bad model must not stop the others.
            _log.exception("Polling model %s failed", model.name)

    def start(self):
        """Loads the initial versions (blocking), then polls in the background."""
        self.poll_once()
        if self._poll_seconds > 0:
            self._thread = threading.Thread(target=self._poll_loop, name="version-poller",
                                            daemon=True)
            self._thread.start()

    def _poll_loop(self):
        while not self._stop.wait(self._poll_seconds):
            self.poll_once()

    def stop(self, timeout=10.0):
        """Stops polling and retires every version (in-flight requests finish)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            models = list(self._models.values())
        for model in models:
            model.retire_all()
