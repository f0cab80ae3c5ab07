"""Keys numba's on-disk cache of this package's kernels on the source of the whole package.

numba invalidates a cached kernel only when the file that defines it changes, but the kernels
here inline kernels and constants of other modules (``dynamics.run_steps`` inlines the 6-D
helpers of ``spatial`` and ``buffers.block_view``; ``jacobians`` inlines the buffer layouts and
the sweeps of ``dynamics``; ``redundancy.kernels`` those of ``dynamics`` and ``kinematics``):
after an edit of ``spatial.py`` alone, ``dynamics.py`` would load stale machine code. The
locators registered here give every kernel defined anywhere in this package (every ``*.py``
under ``underactuated_control/``, subpackages included) one stamp, the hash of all of those
files, so that any edit recompiles everything once (~15-30 s).

This uses numba's cache-locator classes (``numba.core.caching``), which are not public API; if
they are missing, numba's own per-file keying stays in place.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def source_stamp(directory: Path) -> str:
    """SHA-256 over the ``*.py`` files under ``directory``, recursively (relative paths and
    contents)."""
    directory = Path(directory)
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*.py")):
        digest.update(path.relative_to(directory).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def package_source_stamp() -> str:
    """The stamp of this package's modules, subpackages included (computed once per process)."""
    return source_stamp(_PACKAGE_DIR)


def _keyed_on_package(base: type) -> type:
    class PackageKeyedLocator(base):
        @classmethod
        def from_function(cls, py_func, py_file):
            if not Path(py_file).resolve().is_relative_to(_PACKAGE_DIR):
                return None  # not ours: numba's usual locators apply
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return package_source_stamp()

    PackageKeyedLocator.__name__ = f"PackageKeyed{base.__name__}"
    return PackageKeyedLocator


def install() -> bool:
    """Register the package-keyed locators ahead of numba's (idempotent)."""
    try:
        from numba.core import caching

        bases = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                 caching.UserWideCacheLocator)
        locators = caching.CacheImpl._locator_classes
    except (ImportError, AttributeError):  # pragma: no cover - other numba versions
        return False
    if not any(getattr(c, "__name__", "").startswith("PackageKeyed") for c in locators):
        locators[:0] = [_keyed_on_package(b) for b in bases]
    return True


def is_cached(kernel, signature) -> bool | None:
    """Whether numba's on-disk cache holds ``kernel`` (a dispatcher with ``cache=True``)
    compiled for ``signature`` under the current stamp, read from its index without loading
    the machine code; None if that cannot be told (numba's cache internals changed)."""
    try:
        cache = kernel._cache
        key = cache._index_key(signature, kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except (AttributeError, TypeError, ValueError, OSError, EOFError,
            pickle.UnpicklingError):  # pragma: no cover - other numba versions, a torn index
        return None
