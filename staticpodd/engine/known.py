"""What the checks across files already know about another live file's bytes, without reading it.

The checks of new bytes against the other live files (a second file defining the same pod, a
host port another pod holds) need one fact of each other file: the pod it defines, or whether
it claims host ports. Those facts are cached in the store by the file's digest (identities,
``facts``), and the digest of a file is known without reading it in two ways:

- the store's observed row: the file's stat signature is the one its bytes were read and
  recorded with (``observed.sig``, written only outside git's "racy" window, so equal
  signatures mean equal bytes);
- this lock hold's drift scan, which read and hashed every file whose signature was not stored
  (a file written in the last two seconds, whose signature is racy and so never stored): while
  the lock is held and the file's stat is still the one taken before that read, the digest the
  scan found is the one the checks use. A write landing in the same timestamp tick after the
  scan's read leaves the stat as it was; the checks then judge the bytes the scan read a few
  milliseconds earlier, which is what they would have judged had that write come just after
  them (nothing holds another writer back between a check and the rename; the daemon's next
  pass and the next verb's scan read the file again, as its signature was never stored). The
  memo is forgotten when the lock is released.

And for a big file whose pod is not known (it was never decoded: a 10 MiB pod costs seconds and
hundreds of MB to decode), the duplicate check's answer for one pod name is cached by digest too:
"the bytes with digest D surely define no pod named N" (:func:`staticpodd.validate.podfacts.may_name`
said so), kind ``no-pod-named/<validator id>/<name>``. So an unrelated verb neither decodes nor reads
a big neighbour: one stat, and a row of the store.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from .core import EngineCore


def remember_read(engine: EngineCore, file_name: str, sig: str, digest: str) -> None:
    """Note that live ``file_name``, with stat signature ``sig`` (``_sig_text``), holds the bytes
    ``digest``, as this lock hold's scan found (only while the lock is held: see the module)."""
    if not engine.lock_held:
        return
    if engine._held_digests is None:
        engine._held_digests = {}
    engine._held_digests[file_name] = (sig, digest)


def known_digest(engine: EngineCore, file_name: str, sig: str | None) -> str | None:
    """The digest of the bytes live ``file_name`` holds while its stat signature is ``sig``,
    known without reading it (this hold's scan, or the store's observed row whose signature is
    ``sig``); None when it is not known (the caller reads the file)."""
    if sig is None:
        return None
    if engine.lock_held and engine._held_digests is not None:
        seen = engine._held_digests.get(file_name)
        if seen is not None and seen[0] == sig:
            return seen[1]
    if not engine.layout.db_path.exists():
        return None
    row = engine.store.sig_digests([f"live/{file_name}"]).get(f"live/{file_name}")
    return row[1] if row is not None and row[0] == sig else None


def _no_pod_named_kind(name: str) -> str:
    """The ``facts`` kind of "these bytes define no pod named ``name``": changes with the
    validator's code (:func:`staticpodd.resources.validator_id`, which covers
    :func:`~staticpodd.validate.podfacts.may_name`), so a new rule is never answered from an old memo."""
    from ..resources import validator_id

    return f"no-pod-named/{validator_id()}/{name}"


def surely_not_named(engine: EngineCore, digest: str, name: str) -> bool:
    """Whether the store holds that the bytes ``digest`` define no pod named ``name``."""
    if not engine.layout.db_path.exists():
        return False
    found, value = engine.store.fact(digest, _no_pod_named_kind(name))
    return found and value is False


def note_not_named(engine: EngineCore, data: bytes, name: str) -> None:
    """Cache, by the digest of ``data`` (hashed here: the bytes actually judged), that they
    define no pod named ``name``. Written only under the lock, as every cache of the checks."""
    if not engine.layout.db_path.exists() or not engine.lock_held or engine.store.readonly:
        return
    from ..store.versions import digest_of

    engine.store.set_fact(digest_of(data), _no_pod_named_kind(name), False)
