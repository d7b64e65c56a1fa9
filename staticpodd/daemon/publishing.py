"""The daemon's publisher of the cluster view: one thread, woken by a datagram.

When ``cluster.publish`` is set, :class:`ClusterPublishing` binds ``<run_dir>/cluster.sock`` (a
datagram socket, 0600) and runs one thread that flushes the outbox
(:class:`staticpodd.cluster.publisher.Publisher`) whenever a datagram arrives (a verb, or the
daemon's own journal, queued something), retries with a growing delay while the API server does
not answer, and re-asserts the annotations every :data:`RESYNC` seconds. The main loop never
waits for it: watching, the watchdog and restores go on whatever the API server does.

When the socket path is too long for ``AF_UNIX`` (a deep ``--root``), the thread looks at the
outbox's size and time every :data:`POLL` seconds instead.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..journal import NOTICE, WARNING, Event

#: Seconds between re-assertions of the annotations (someone may have edited them by hand).
RESYNC = 300.0
#: The first and the longest delay before publishing again after a failure, in seconds: an API
#: server that comes back (an unpark of kube-apiserver) is told within seconds; a refused
#: connection costs next to nothing, one that times out costs ``cluster.timeout``.
RETRY_MIN = 1.0
RETRY_MAX = 5.0
#: Seconds between looks at the outbox when no socket could be bound.
POLL = 0.5
#: Seconds between looks at the outbox while waiting for a datagram: a row queued by a verb
#: killed before it woke the daemon goes out within this, not at the next resync.
LOOK = 5.0


class _Run:
    """One publishing thread's own things: a reload starts a new run and leaves the old one to end
    by itself (it may be waiting for an API server that does not answer, up to
    ``cluster.timeout``), so nothing here is shared between runs."""

    def __init__(self, sock: socket.socket | None, sock_path: str | None) -> None:
        self.sock = sock
        self.sock_path = sock_path
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None


class ClusterPublishing:
    """Start with :meth:`configure` (again on every reload), end with :meth:`stop`. ``log`` is
    the daemon's journal entry function, ``say`` its stderr line. ``state`` is for the heartbeat:
    ``{"enabled", "node", "waiting", "error", "published_at"}``."""

    def __init__(self, log: Callable[..., None], say: Callable[[str], None]) -> None:
        self._log = log
        self._say = say
        self._run_now: _Run | None = None
        self.state: dict[str, Any] = {"enabled": False}

    def configure(self, layout: Any, config: Any) -> None:
        """Stop what runs (without waiting for a flush under way: the main loop never waits for
        the API server), then start publishing when ``config.cluster.publish`` is set. A
        configuration it cannot publish with (no kubeconfig, one another user could have written)
        is said once in the journal; the daemon runs on without the cluster view."""
        self.stop(timeout=0.0)
        if not config.cluster.publish:
            self.state = {"enabled": False}
            return
        from ..cluster.hook import make_publisher, socket_path

        try:
            publisher = make_publisher(layout, config)
        except Exception as exc:  # noqa: BLE001 - StaticpodError, Untrusted, OSError
            self.state = {"enabled": True, "node": None, "waiting": None, "error": str(exc), "published_at": None}
            self._log(Event.CLUSTER_PUBLISH_FAILED, f"cannot publish the cluster view: {exc}", priority=WARNING,
                      error="cluster-config")
            return
        self.state = {"enabled": True, "node": publisher.node_name, "waiting": None, "error": None,
                      "published_at": None}
        path = str(socket_path(layout))
        sock = self._bind(path)
        run = _Run(sock, path if sock is not None else None)
        run.thread = threading.Thread(target=self._run, args=(publisher, run), name="staticpodd-cluster",
                                      daemon=True)
        self._run_now = run
        run.thread.start()

    def _bind(self, path: str) -> socket.socket | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            try:
                os.unlink(path)  # a socket left by a daemon that died: ours (run_dir is root's)
            except FileNotFoundError:
                pass
            old = os.umask(0o177)
            try:
                sock.bind(path)
            finally:
                os.umask(old)
            os.chmod(path, 0o600)
        except OSError as exc:
            sock.close()
            self._say(f"cluster view: cannot bind {path} ({exc.strerror or exc}); "
                      f"looking at the outbox every {POLL:g} s")
            return None
        return sock

    def poke(self) -> None:
        """Publish soon (from any thread)."""
        run = self._run_now
        if run is None:
            return
        run.wake.set()
        if run.sock_path:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                    s.setblocking(False)
                    s.sendto(b"flush", run.sock_path)
            except OSError:
                pass

    def stop(self, timeout: float = 3.0) -> None:
        """Stop the thread (waiting at most ``timeout`` s for a flush under way; it ends by itself
        after it, its socket closed) and remove the socket path."""
        run, self._run_now = self._run_now, None
        if run is None:
            return
        run.stop.set()
        run.wake.set()
        if run.sock_path:
            try:
                os.unlink(run.sock_path)  # no verb wakes it any more; the next run binds anew
            except OSError:
                pass
        if run.sock is not None:
            try:  # wake a thread waiting in select() (a datagram to the unbound socket cannot)
                run.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if run.thread is not None and timeout > 0:
            run.thread.join(timeout)

    def _outbox_mark(self, publisher: Any) -> int | None:
        """The highest ``seq`` ever queued in the outbox (None: no outbox, or one that cannot be
        read; the flush says why): a row queued raises it, and nothing else does.

        Not the files' times and sizes: taken after a flush, they already held a row queued while
        the flush ran, after it had read the queue, and that row then waited for the resync (CI
        saw it, about one run in four); taken before, the flush's own writes changed them."""
        from ..cluster.outbox import Outbox

        try:
            with Outbox(publisher.state_dir, create=False) as box:
                return box.last_seq()
        except Exception:  # noqa: BLE001 - FileNotFoundError, Untrusted, sqlite3.Error: the flush says
            return None

    def _run(self, publisher: Any, run: _Run) -> None:
        try:
            self._loop(publisher, run)
        finally:
            if run.sock is not None:
                run.sock.close()

    def _loop(self, publisher: Any, run: _Run) -> None:
        resync_at = 0.0
        delay = 0.0
        last_error: str | None = None
        failing_since: float | None = None
        while not run.stop.is_set():
            now = time.monotonic()
            # before the flush: a row queued while it runs (by a verb that died before it woke us)
            # is above this mark, so the sleep below ends at its next look
            mark = self._outbox_mark(publisher)
            try:
                res = publisher.flush(resync=now >= resync_at)
            except Exception as exc:  # noqa: BLE001 - a bug must not end the daemon's publishing for good
                res = {"error": f"internal error: {type(exc).__name__}: {exc}", "waiting": None, "published": 0,
                       "busy": False}
            if run.stop.is_set():  # a reload or the end came while this flush waited: say nothing
                return
            for why in res.get("refused") or []:  # dropped for good: each one said, not only the first
                self._log(Event.CLUSTER_PUBLISH_FAILED, f"{why}; it is dropped (the journal has it)",
                          priority=WARNING, node=publisher.node_name, error="cluster-refused")
            if res.get("busy"):
                delay = RETRY_MIN  # another process flushes; look again soon
            elif res["error"]:
                delay = min(max(delay * 2, RETRY_MIN), RETRY_MAX)
                if res["error"] != last_error:
                    self._log(Event.CLUSTER_PUBLISH_FAILED,
                              f"cannot publish the cluster view to Node {publisher.node_name}: {res['error']}; "
                              f"{res['waiting']} Event(s) wait, next try in {delay:g} s",
                              priority=WARNING, node=publisher.node_name, waiting=res["waiting"], error="cluster")
                    last_error = res["error"]
                    failing_since = failing_since or time.time()
            else:
                if now >= resync_at:
                    resync_at = now + RESYNC
                if last_error is not None:
                    self._log(Event.CLUSTER_PUBLISHED,
                              f"the cluster view is published to Node {publisher.node_name} again "
                              f"({res['published']} queued Event(s) sent, in order)",
                              priority=NOTICE, node=publisher.node_name, published=res["published"])
                last_error, failing_since = None, None
                delay = max(0.0, resync_at - time.monotonic())
            self.state = {"enabled": True, "node": publisher.node_name, "waiting": res.get("waiting"),
                          "error": res["error"], "published_at": time.time() if not res["error"] else
                          self.state.get("published_at")}
            self._sleep(publisher, run, delay, mark)

    def _sleep(self, publisher: Any, run: _Run, delay: float, mark: int | None) -> None:
        """Wait ``delay`` seconds or until woken: a datagram, or a row queued above ``mark``
        (looked at every :data:`LOOK` seconds; every :data:`POLL` seconds with no socket)."""
        end = time.monotonic() + delay
        while not run.stop.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            if run.sock is not None:
                ready, _w, _x = select.select([run.sock], [], [], min(left, LOOK))
                if ready:
                    try:
                        while run.sock.recv(64, socket.MSG_DONTWAIT):
                            pass
                    except OSError:  # drained (or shut down: stopping)
                        pass
                    return
            elif run.wake.wait(min(POLL, left)):
                run.wake.clear()
                return
            if self._outbox_mark(publisher) != mark:
                return
