"""One job: make :mod:`hashlib`'s sha256 CPython's own in this process, not OpenSSL's.

Every digest staticpodd takes is sha256 of a manifest (a few KB) or of its own keys. Mapping
OpenSSL's libcrypto for that costs about 3.5 MB of the daemon's RSS and about a third of a bare
interpreter's start-up in every ``staticpodctl`` verb that hashes, while the builtin
sha256 hashes some 300 MB/s. Nothing here needs OpenSSL (no TLS, no algorithm only it has).
"""

from __future__ import annotations

import sys


def builtin_hashes() -> None:
    """Have the coming ``import hashlib`` skip OpenSSL (``_hashlib``) and use CPython's sha256.

    A no-op when hashlib is already imported (e.g. ``main`` run inside a test process), and when
    this interpreter has no builtin sha256 module (``_sha256`` up to 3.11, ``_sha2`` from 3.12):
    hashlib then keeps OpenSSL, which it needs. Never raises.
    """
    if "hashlib" in sys.modules or "_hashlib" in sys.modules:
        return
    for builtin in ("_sha2", "_sha256"):
        try:
            __import__(builtin)
        except ImportError:
            continue
        sys.modules.setdefault("_hashlib", None)  # type: ignore[arg-type]  # import _hashlib: ImportError
        return
