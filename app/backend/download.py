"""Bring a Hugging Face checkpoint into the local cache: disk checked first, with progress.

huggingface_hub does the transfer: a dropped connection resumes where it stopped (a Range
request), and a stopped run keeps every finished file, so the next one fetches only the rest
(a file cut mid-way starts over: the library discards partial files). This module decides
what is missing, refuses a download the disk cannot hold, works offline from the cache, and
turns the library's progress hook into `Progress`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.errors import BackendError, ModelNotFound

if TYPE_CHECKING:
    from huggingface_hub import HfApi

REPORT_EVERY_S = 0.25
"""Progress goes out at most this often (and once more at the end)."""
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})


class NotEnoughDisk(BackendError):
    """The download would not fit on the disk that holds the cache."""


class DownloadFailed(BackendError):
    """The transfer stopped; the files that arrived whole stay in the cache for the next try."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a download is: bytes of the whole checkpoint on disk, and the current rate."""

    done: int
    total: int
    rate: float
    """Bytes per second since this download began."""

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the current rate (None before any byte arrived)."""
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def line(self) -> str:
        """`12.3 GB of 70.1 GB · 85.2 MB/s · 11:20 left`."""
        left = f"{clock(self.eta_s)} left" if self.eta_s is not None else "starting"
        return f"{size(self.done)} of {size(self.total)} · {size(self.rate)}/s · {left}"


@dataclass(frozen=True, slots=True)
class HubPlace:
    """Where checkpoints come from and go: the cache folder and whether the network is off."""

    cache_dir: Path
    offline: bool

    @classmethod
    def from_env(cls) -> HubPlace:
        """huggingface_hub's own settings (HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE)."""
        from huggingface_hub import constants

        cache = os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE
        flag = os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE
        return cls(Path(cache).expanduser(), flag or constants.HF_HUB_OFFLINE)


def is_hub_id(model_path: str) -> bool:
    """True for `org/name`; False for anything that names a local path."""
    path = Path(model_path).expanduser()
    return not (path.is_absolute() or model_path.startswith((".", "~")) or path.exists())


def repo_files(repo: str, api: HfApi | None = None) -> dict[str, tuple[int, str]]:
    """Each file of the repo's main revision: (size, the blob name the cache stores it under).

    Raises:
        ModelNotFound: no such repo (or no access to it).
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        info = (api or HfApi()).model_info(repo, files_metadata=True)
    except GatedRepoError as exc:
        raise ModelNotFound(f"{repo} is gated: accept its terms on the Hub and log in") from exc
    except RepositoryNotFoundError as exc:
        raise ModelNotFound(f"{repo}: no such model on the Hugging Face Hub") from exc
    files = {}
    for sibling in info.siblings or []:
        blob = sibling.lfs.sha256 if sibling.lfs else sibling.blob_id
        files[sibling.rfilename] = (int(sibling.size or 0), str(blob))
    return files


def bytes_missing(repo: str, *, api: HfApi | None = None, place: HubPlace | None = None) -> int:
    """Bytes of `repo`'s files not yet in the cache.

    Raises:
        ModelNotFound: no such repo.
    """
    place = place or HubPlace.from_env()
    return _missing(repo_files(repo, api), _blobs(place, repo))


def fetch_checkpoint(
    model_path: str,
    on_progress: Callable[[Progress], None] | None = None,
    *,
    api: HfApi | None = None,
    place: HubPlace | None = None,
    disk_free: Callable[[Path], int] | None = None,
) -> Path:
    """The local checkpoint folder for `model_path`, downloading what the cache lacks.

    A local path is returned as is. Offline (HF_HUB_OFFLINE), or when the Hub cannot be
    reached, the cached snapshot is used.

    Raises:
        ModelNotFound: no such repo, or offline and not cached.
        NotEnoughDisk: the missing bytes exceed the free space of the cache's disk.
        DownloadFailed: the transfer stopped; running again resumes it.
    """
    if not is_hub_id(model_path):
        return Path(model_path).expanduser()
    place = place or HubPlace.from_env()
    if place.offline:
        return _cached(model_path, place, "HF_HUB_OFFLINE is set")
    try:
        files = repo_files(model_path, api)
    except ModelNotFound:
        raise
    except Exception as exc:  # no network: the cache may still hold it
        return _cached(model_path, place, f"the Hub cannot be reached ({_brief(exc)})")
    blobs = _blobs(place, model_path)
    missing = _missing(files, blobs)
    total = sum(file_size for file_size, _ in files.values())
    if missing:
        free = (disk_free or _free_bytes)(place.cache_dir)
        if missing > free:
            raise NotEnoughDisk(
                f"{model_path} needs {size(missing)} more in {place.cache_dir}, "
                f"which has {size(free)} free"
            )
    _drop_stale_partials(place, model_path)
    meter = _Meter(total, lambda: _on_disk(files, blobs), on_progress)
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            model_path, cache_dir=place.cache_dir, tqdm_class=_hook(meter.tick)
        )
    except Exception as exc:
        left = size(_missing(files, blobs))
        raise DownloadFailed(
            f"the download of {model_path} stopped ({_brief(exc)}); {left} still missing, "
            "run again to resume"
        ) from exc
    meter.tick(final=True)
    return Path(folder)


def size(count: float) -> str:
    """Bytes in decimal units: `70.1 GB`."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def clock(seconds: float | None) -> str:
    """`1:02:03` or `11:20`."""
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class _Meter:
    """Turns the library's progress calls into `Progress`, at most every REPORT_EVERY_S."""

    def __init__(
        self,
        total: int,
        on_disk: Callable[[], int],
        report: Callable[[Progress], None] | None,
    ) -> None:
        self._total = total
        self._on_disk = on_disk
        self._report = report
        self._started = time.monotonic()
        self._first = on_disk()
        self._last = 0.0
        self._lock = threading.Lock()

    def tick(self, final: bool = False) -> None:
        if self._report is None:
            return
        now = time.monotonic()
        with self._lock:
            if not final and now - self._last < REPORT_EVERY_S:
                return
            self._last = now
            done = min(self._on_disk(), self._total)
        rate = (done - self._first) / max(now - self._started, 1e-3)
        self._report(Progress(done, self._total, rate))


def _hook(tick: Callable[[], None]) -> type:
    """A tqdm class for `snapshot_download` that prints nothing and ticks on every update."""
    from huggingface_hub.utils import tqdm

    class Hook(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            tick()
            return None

    return Hook


def _blobs(place: HubPlace, repo: str) -> Path:
    return blob_dir(place.cache_dir, repo)


def blob_dir(cache_dir: Path, repo: str) -> Path:
    """Where huggingface_hub's cache at `cache_dir` keeps a model repo's file contents."""
    from huggingface_hub.file_download import repo_folder_name

    return cache_dir / repo_folder_name(repo_id=repo, repo_type="model") / "blobs"


def _missing(files: Mapping[str, tuple[int, str]], blobs: Path) -> int:
    return sum(file_size for file_size, blob in files.values() if not (blobs / blob).is_file())


def _drop_stale_partials(place: HubPlace, repo: str) -> None:
    """Delete the partial files a killed run left: huggingface_hub resumes none of them.

    A blob whose lock is held (another process downloads it now) keeps its partial file.
    """
    from filelock import FileLock, Timeout
    from huggingface_hub.file_download import repo_folder_name

    locks = place.cache_dir / ".locks" / repo_folder_name(repo_id=repo, repo_type="model")
    blobs = _blobs(place, repo)
    for path in blobs.glob("*.incomplete") if blobs.is_dir() else ():
        blob = path.name.split(".")[0]
        locks.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Timeout), FileLock(locks / f"{blob}.lock", timeout=0):
            path.unlink(missing_ok=True)


def _on_disk(files: Mapping[str, tuple[int, str]], blobs: Path) -> int:
    """Bytes of `files` in the cache, counting the temporary files still being written."""
    partial: dict[str, int] = {}
    for path in blobs.glob("*.incomplete") if blobs.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):  # finished (moved) meanwhile
            blob = path.name.split(".")[0]
            partial[blob] = partial.get(blob, 0) + path.stat().st_size
    return sum(
        file_size if (blobs / blob).is_file() else min(partial.get(blob, 0), file_size)
        for file_size, blob in files.values()
    )


def cached_snapshot(repo: str, place: HubPlace | None = None) -> Path:
    """The folder of `repo`'s snapshot in the cache, once downloaded.

    Raises:
        ModelNotFound: it is not in the cache.
    """
    return _cached(repo, place or HubPlace.from_env(), "it has not been downloaded")


def _cached(repo: str, place: HubPlace, why: str) -> Path:
    """The cached snapshot of `repo`, or one line saying it is not there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo, cache_dir=place.cache_dir, local_files_only=True))
    except LocalEntryNotFoundError as exc:
        raise ModelNotFound(
            f"{repo} is not in the cache ({place.cache_dir}) and {why}: "
            f"run `ling-chat download {repo}` where the Hub can be reached"
        ) from exc


def _free_bytes(folder: Path) -> int:
    """Free bytes on the disk that holds `folder` (or its nearest existing parent)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def _brief(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__
