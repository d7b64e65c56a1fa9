"""The heartbeat file ``/run/staticpodd/daemon.json`` (``Layout.heartbeat_path``).

The running daemon rewrites it atomically on every pass of its loop (:func:`write_heartbeat`);
``staticpodctl status`` and ``staticpodd --reload`` read it (:func:`read_heartbeat`). Its format
and its interval are defined here; what goes into it is built by
:meth:`staticpodd.daemon.status.StatusReporter.heartbeat_data`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from ..layout import Layout

HEARTBEAT_FORMAT = 1
#: Longest sleep of the main loop, seconds: the heartbeat is never older than this when healthy.
HEARTBEAT_INTERVAL = 10.0


class ProblemList(Sequence[dict[str, Any]]):
    """The heartbeat's ``problems``: the dicts of ``head`` (the few problems that come and go
    between passes: runtime errors, invalid live files, broken parks), then one per item of
    ``tail`` (the directory's findings, thousands on a large node), made by ``as_dict`` only
    when read. So a node's findings are held once, as findings, not a second time as dicts
    (RSS); :class:`HeartbeatEncoder` encodes ``tail`` again only when it changed."""

    def __init__(self, head: list[dict[str, Any]], tail: list[Any], as_dict: Callable[[Any], dict[str, Any]]) -> None:
        self.head = head
        self.tail = tail
        self.as_dict = as_dict

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        n = len(self.head)
        return self.head[index] if index < n else self.as_dict(self.tail[index - n])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.head
        for item in self.tail:
            yield self.as_dict(item)


class HeartbeatEncoder:
    """``json.dumps(data, sort_keys=True)`` of a heartbeat, byte for byte, re-encoding the
    ``problems`` only when they changed since the last call.

    A node with thousands of findings has a heartbeat of about 1.5 MB, rewritten every
    :data:`HEARTBEAT_INTERVAL` seconds for its ``last_loop``: encoding it was most of the idle
    daemon's CPU. ``problems`` is a list of dicts, compared (``==``) with the list
    encoded last, or a :class:`ProblemList`, whose ``head`` is compared so and whose ``tail`` is
    encoded again only when it is another list (``is``) with other contents (``==``). The daemon
    replaces a problem dict when it changes, never edits one in place, and never changes a
    ``tail`` list once given (no copy is kept: 1 MB at 3,000 problems). :meth:`chunks` hands the
    kept encoding out as it is: copied into one larger text every 10 s, it left some 4 MB of
    freed heap behind each time (glibc keeps it), which is how a large node's RSS crept up.
    """

    def __init__(self) -> None:
        self._problems: list[dict[str, Any]] | None = None
        self._encoded = b""
        self._head: list[dict[str, Any]] | None = None
        self._head_text = ""
        self._tail: list[Any] | None = None
        self._tail_bytes = b""

    def encode(self, data: dict[str, Any]) -> str:
        """The heartbeat ``data`` (a dict with str keys) as JSON text, keys sorted."""
        return b"".join(self.chunks(data)).decode()

    def chunks(self, data: dict[str, Any]) -> list[bytes]:
        """:meth:`encode`'s text as UTF-8, in pieces to be written one after the other; the
        problems' kept encoding is one piece, never copied."""
        out: list[bytes] = []
        pending = "{"
        for i, key in enumerate(sorted(data)):
            value = data[key]
            pending += ("" if i == 0 else ", ") + json.dumps(key) + ": "
            if key == "problems" and isinstance(value, ProblemList):
                head, tail = self._problem_list(value)
                pending += "[" + head
                if tail:
                    out += [(pending + (", " if head else "")).encode(), tail]
                    pending = ""
                pending += "]"
            elif key == "problems" and isinstance(value, list):
                if self._problems is None or value != self._problems:
                    self._encoded = json.dumps(value, sort_keys=True).encode()
                    self._problems = value
                out += [pending.encode(), self._encoded]
                pending = ""
            else:
                pending += json.dumps(value, sort_keys=True)
        out.append((pending + "}").encode())
        return out

    def _problem_list(self, problems: ProblemList) -> tuple[str, bytes]:
        """The JSON of ``problems.head`` and of ``problems.tail``, each without its brackets."""
        if problems.tail is not self._tail:
            if self._tail is None or problems.tail != self._tail:
                text = json.dumps([problems.as_dict(x) for x in problems.tail], sort_keys=True)
                self._tail_bytes = text[1:-1].encode()
            self._tail = problems.tail  # the newer list: the older one can go
        if self._head is None or problems.head != self._head:
            self._head_text = json.dumps(problems.head, sort_keys=True)[1:-1]
            self._head = problems.head
        return self._head_text, self._tail_bytes


def write_heartbeat(path: Path, data: dict[str, Any], encoder: HeartbeatEncoder | None = None) -> None:
    """Atomically replace the heartbeat JSON at ``path`` (temp file + rename in the same dir).
    ``encoder``: one kept across calls makes an unchanged problem list free to encode."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if encoder is not None:
        chunks = encoder.chunks(data)
    else:
        chunks = [json.dumps(data, sort_keys=True, default=list).encode()]
    chunks.append(b"\n")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_heartbeat(layout: Layout) -> dict[str, Any] | None:
    """The daemon's heartbeat, or None when absent or unreadable.

    Shape (format 1; times are epoch seconds): ``format, pid, version, root, manifest_dir,
    state ("starting"|"running"|"reloading"|"stopping"|"stopped"), ready, started_at,
    last_loop, last_rescan, heartbeat_interval`` (the daemon rewrites it at least every ``interval``
    seconds while alive: treat ``now - last_loop > 3 * heartbeat_interval`` as unhealthy), ``status``
    (the STATUS= line), ``summary {live, parked, missing, problems}``, ``problems [{code,
    severity, path, component, message}]``, ``parks [ParkRecord.to_dict()]``, ``config {path,
    digest, generation, loaded_at}``, ``reload {seq, status ("ok"|"refused"|null), error, at}``,
    ``watch {watching, generation, error}``.
    """
    try:
        data = json.loads(layout.heartbeat_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
