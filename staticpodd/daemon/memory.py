"""Giving memory back to the system after a pass that validated the directory.

Validating every manifest of a large node parses them all (about 20 MB at 1,000 manifests, issue
14), and the journal entries such a pass queues are sent by the writer thread afterwards. Python
frees those objects, but glibc keeps the freed heap pages mapped until ``malloc_trim``: left
alone, the idle daemon's RSS stays some 4 MB above what it holds. :func:`release_memory` is
called once such work is over (:meth:`staticpodd.daemon.loop.LoopMixin._loop`).
"""

from __future__ import annotations

from typing import Any

_libc: Any = None


def release_memory() -> None:
    """Collect garbage, then hand the heap pages it freed back to the kernel (glibc's
    ``malloc_trim(0)``). A no-op where that is unavailable (another libc)."""
    global _libc
    import gc

    gc.collect()
    if _libc is False:
        return
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL("libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):
        _libc = False  # not glibc: never try again
