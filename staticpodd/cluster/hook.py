"""Where the cluster view meets the verbs and the daemon: the journal observer that queues, the
wake-up of the daemon's publisher, and what a verb says afterwards ("published" or "queued").

Whatever logs an event the cluster is told about (:data:`staticpodd.cluster.view.EVENT_REASONS`)
goes through :class:`ClusterHook`: one row in the outbox, then one datagram to the daemon's
publisher socket (``<run_dir>/cluster.sock``) so it publishes at once. At the end of the verb
:meth:`ClusterHook.report` waits a moment (at most ``cluster.timeout``) for those rows to be
published; with no daemon running, the verb publishes them itself. Nothing here raises into a
verb: the verb's own work is done and stays done whatever the API server says.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

TYPE_CHECKING = False  # typing is for mypy: every changing verb imports this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: The daemon's publisher socket, in ``Layout.run_dir``.
SOCKET_NAME = "cluster.sock"
#: The kubelet's own kubeconfig on a kubeadm node, the default credentials (under --root).
KUBELET_KUBECONFIG = "/etc/kubernetes/kubelet.conf"


def socket_path(layout: Any) -> Path:
    """``<run_dir>/cluster.sock``."""
    return Path(layout.run_dir) / SOCKET_NAME


def poke(layout: Any) -> bool:
    """Wake the daemon's publisher; True when a daemon took the datagram (False: none runs for
    this root, or its socket is not root's or ours). Never raises."""
    path = socket_path(layout)
    try:
        from ..node.trust import problem_of

        if problem_of(os.lstat(path)) is not None:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.setblocking(False)
            s.sendto(b"flush", str(path))
        return True
    except OSError:
        return False


def publish_settings(layout: Any, cfg: Any) -> tuple[str, str]:
    """``(kubeconfig, node_name)`` to publish with: ``cluster.kubeconfig`` under --root (default
    the kubelet's ``kubelet.conf``), refused when another user could have written it; the node
    name from ``node_name``, else the kubeconfig's ``system:node:NAME`` identity, else the host
    name (the kubelet's default). Raises StaticpodError/Untrusted/FileNotFoundError."""
    from ..errors import StaticpodError
    from ..layout import under_root

    given = getattr(cfg.cluster, "kubeconfig", None)
    path = under_root(layout.root, given or KUBELET_KUBECONFIG)
    try:
        # the directories too: a user who may rename in one swaps the file for a kubeconfig
        # whose exec credential plugin the client runs as root
        from ..node.trust import trusted_kubeconfig

        trusted_kubeconfig(path, "cluster kubeconfig", parents_up_to=Path(layout.root))
    except FileNotFoundError:
        raise StaticpodError(f"{path}: no kubeconfig to publish the cluster view with",
                             hint="set cluster.kubeconfig, or cluster.publish: false") from None
    name = getattr(cfg, "node_name", None)
    if not name:
        from .client import _kubeconfig_user, node_name_from_user

        name = node_name_from_user(_kubeconfig_user(str(path)))
    if not name:
        from ..proof.runtime import default_node_name

        name = default_node_name()
    return str(path), str(name)




def make_publisher(layout: Any, cfg: Any) -> Any:
    """A :class:`~staticpodd.cluster.publisher.Publisher` for this node (its API connection made
    at its first flush). Raises what :func:`publish_settings` raises."""
    from .publisher import Publisher, node_state

    kubeconfig, node = publish_settings(layout, cfg)
    timeout = float(cfg.cluster.timeout)

    def connect() -> Any:
        from .client import Api

        return Api(kubeconfig, timeout=timeout)

    return Publisher(layout.state_dir, node_name=node, connect=connect, desired=lambda: node_state(layout),
                     limit=int(cfg.cluster.queue_limit))


class ClusterHook:
    """A :class:`staticpodd.journal.Journal` observer (``journal.observers.append(hook)``).

    ``layout`` and ``config`` are callables returning the current ones (the CLI loads its
    configuration lazily; the daemon's changes on reload). ``wake``: whether to poke the daemon
    after queuing (the daemon's own hook wakes its publisher directly, through ``on_queued``)."""

    def __init__(self, layout: Callable[[], Any], config: Callable[[], Any], *,
                 on_queued: Callable[[], None] | None = None) -> None:
        self._layout = layout
        self._config = config
        self._on_queued = on_queued
        self.seqs: list[int] = []
        self.state_changed = False
        self.state_request = 0  # the outbox's request_state() number for a change with no Event
        self.error: str | None = None

    def enabled(self) -> bool:
        """Whether ``cluster.publish`` is set (False when there is no configuration, or it cannot
        be read)."""
        try:
            cfg = self._config()
            return cfg is not None and bool(cfg.cluster.publish)
        except Exception:  # noqa: BLE001 - a bad configuration is reported by the verb itself
            return False

    def __call__(self, event: Any, message: str, priority: int, fields: dict[str, Any]) -> None:
        """Observe one journal entry: queue its Event (if the cluster is told about it) and wake
        the publisher. Never raises (a failure is kept in ``error`` for :meth:`report`)."""
        if not self.enabled():
            return
        from ..store.versions import iso
        from .view import EVENT_REASONS, STATE_EVENTS, entry_for

        name = getattr(event, "name", str(event))
        if name not in EVENT_REASONS and name not in STATE_EVENTS:
            return
        try:
            entry = entry_for(name, message, fields, at=iso(time.time()))
            layout = self._layout()
            from .outbox import Outbox

            with Outbox(layout.state_dir, limit=int(self._config().cluster.queue_limit)) as box:
                if entry is not None:
                    self.seqs.append(box.put(entry))
                else:  # only the annotations change: no row to wait for, so ask for a flush after this
                    self.state_request = box.request_state()
            self.state_changed = True
            if self._on_queued is not None:
                self._on_queued()
            else:
                poke(layout)
        except Exception as exc:  # noqa: BLE001 - the verb's own work stands; say why in report()
            hint = getattr(exc, "hint", None)
            self.error = f"cannot queue for the cluster: {exc}" + (f"; {hint}" if hint else "")

    def report(self, *, budget: float | None = None) -> dict[str, Any] | None:
        """After a verb: None when it told the cluster nothing; else ``{"state": "published" |
        "queued" | "failed", "node", "events", "error"}`` (``failed``: an entry could not even be
        queued, an outbox that cannot be used, or the API server refused its Event for good: only
        the journal has it). Waits at most ``budget`` seconds (default ``cluster.timeout``) for
        the daemon to publish this verb's rows; with no daemon running, publishes them in this
        process. Never raises."""
        if not self.seqs and not self.state_changed and self.error is None:
            return None
        out: dict[str, Any] = {"state": "queued", "node": None, "events": len(self.seqs), "error": self.error}
        if self.error is not None:
            out["state"] = "failed"
            return out
        try:
            cfg = self._config()
            layout = self._layout()
            limit = float(cfg.cluster.timeout) if budget is None else budget
            from .outbox import Outbox

            if poke(layout):  # a daemon runs: it publishes; wait a moment to say which it was
                end = time.monotonic() + limit
                mine = max(self.seqs, default=0)
                with Outbox(layout.state_dir, limit=int(cfg.cluster.queue_limit)) as box:
                    # Older Events still waiting after a failed flush: the API server is away, and
                    # this verb's rows go out after them whenever it answers. Say so at once.
                    behind = bool(self.seqs) and box.get("error") is not None and \
                        box.waiting() > box.waiting(self.seqs)
                    # else until this verb's rows are published, or a flush that saw them failed
                    # (an API server that refuses at once must not hold the verb for the budget)
                    while not behind and box.waiting(self.seqs) and time.monotonic() < end:
                        if mine and int(box.get("attempted_through") or 0) >= mine:
                            break
                        time.sleep(0.002)
                    # a change with no Event of its own: until a flush that began after it ends
                    while not behind and box.served() < self.state_request and time.monotonic() < end:
                        time.sleep(0.002)
                    left = box.waiting(self.seqs) + (box.served() < self.state_request)
                    # published: this verb's Events went out and the flush that took them had no
                    # error (the annotations it patched first are the rest of what the verb changed)
                    out["error"] = box.get("error")
                    out["state"] = "published" if not left and out["error"] is None else "queued"
                    out["node"] = box.get("node")  # the daemon's word: no kubeconfig (nor YAML) read here
                    refused = box.refusals(self.seqs)
                if refused:
                    out["state"], out["error"] = "failed", refused[0]
                return out
            pub = make_publisher(layout, cfg)
            out["node"] = pub.node_name
            end = time.monotonic() + limit
            try:  # the client's imports (0.2 s or more) before the outbox's lock, not under it
                pub.api()
            except Exception:  # noqa: BLE001 - the flush says why
                pass
            res = pub.flush(deadline=end)
            # another verb is flushing: it may have read the queue before this verb's rows; wait
            # for it and look again (within the budget), so that nothing is left for no one
            while res["busy"] and time.monotonic() < end:
                time.sleep(0.01)
                res = pub.flush(deadline=end)
            with Outbox(layout.state_dir, limit=int(cfg.cluster.queue_limit)) as box:
                left = box.waiting(self.seqs)
                refused = box.refusals(self.seqs)
            out["state"] = "published" if not left and res["error"] is None else "queued"
            out["error"] = res["error"]
            if refused:
                out["state"], out["error"] = "failed", refused[0]
        except Exception as exc:  # noqa: BLE001 - Untrusted, StaticpodError, OSError ...
            out["error"] = str(exc)
        return out


def report_line(rep: dict[str, Any]) -> str:
    """The sentence a verb prints about the cluster view."""
    node = f" on Node {rep['node']}" if rep.get("node") else ""
    events = f"{rep['events']} Event(s)" if rep.get("events") else "the annotations"
    if rep["state"] == "published":
        return f"  cluster: published{node} ({events})"
    if rep["state"] == "failed":
        return f"  cluster: NOT published{node}: {rep['error']}; the journal has it, the Node will not"
    why = f": {rep['error']}" if rep.get("error") else ""
    return (f"  cluster: queued{node} ({events}){why}; staticpodd publishes it, in order, when the API "
            "server answers")
