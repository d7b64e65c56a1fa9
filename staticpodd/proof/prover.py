"""Prove what the kubelet did after a swap, from the node, without an apiserver.

After ``park``: no ready sandbox and no running container is left for the pod (removing a manifest
does not always stop its containers: KUBELET.md "Identity and restarts", k/k #88402, #116880).
After ``unpark``/``apply``/``edit``/``rollback``: a ready sandbox exists whose
``kubernetes.io/config.hash`` differs from the one running before (when the pod changed), every
container of ``spec.containers`` runs in it, created after the swap, and the manifest's own probes
pass from the node (see :mod:`.probes`). When the hash never changes, the directory is searched for
another file defining the same namespace/name (KUBELET.md "Duplicate names across files").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import WaitTimeout
from .kubeletconfig import DEFAULT_FILE_CHECK_FREQUENCY
from .probes import ProbeResult, ProbeTracker, probe_specs, run_probe
from .runtime import (
    CONFIG_SOURCE,
    CONTAINER_EXITED,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    Container,
    Crictl,
    RuntimeUnavailable,
    Sandbox,
    default_node_name,
)
from .shadow import duplicate_files, find_shadowing_file

#: After one full relist period (the kubelet's fileCheckFrequency, from its config file: see
#: :mod:`.kubeletconfig`), the kubelet has re-read every file; this margin (seconds) covers the
#: kill reaching the runtime (about 1 s, KUBELET-LAB.md). A file shadowed by another is given
#: relist + margin to show a new config.hash.
RELIST_MARGIN = 3.0
#: A pod of the same full name starts again only 10 s plus jitter after the old one terminated
#: (``allowStaticPodStart`` in pod_workers.go, KUBELET-LAB.md "A changed manifest"): a pod that
#: vanished is called dropped only when no new sandbox came within this many seconds.
RESTART_BACKOFF = 20.0
DEFAULT_POLL_INTERVAL = 0.5
#: How often wait_stopped looks (seconds, at most): a look is two crictl calls of ~30 ms each.
STOP_POLL_INTERVAL = 0.2
#: A container counts as running only once it has been up this long (seconds, by its createdAt)
#: and still runs: one look at a crash-looping container must not pass for success.
DEFAULT_SETTLE = 2.0


@dataclass(frozen=True)
class Progress:
    """One progress report. ``phase``: stopping | sandbox | containers | health | relist | done.

    ``message``: what is being waited for, in words. ``elapsed``/``timeout``: seconds.
    """

    phase: str
    message: str
    elapsed: float
    timeout: float
    done: bool = False


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class PodObservation:
    """What the runtime showed for one pod at ``taken_at`` (wall-clock seconds)."""

    pod_name: str
    namespace: str
    taken_at: float
    sandboxes: tuple[Sandbox, ...] = ()
    containers: tuple[Container, ...] = ()
    similar_names: tuple[str, ...] = ()  # ready static pods named <base>-<other node name>

    @property
    def ready_sandboxes(self) -> list[Sandbox]:
        return [s for s in self.sandboxes if s.ready]

    @property
    def running_containers(self) -> list[Container]:
        return [c for c in self.containers if c.running]

    @property
    def ready_hashes(self) -> set[str]:
        """config.hash of the sandboxes that were ready (the version that ran)."""
        return {s.config_hash for s in self.ready_sandboxes if s.config_hash}

    @property
    def sandbox_ids(self) -> set[str]:
        return {s.id for s in self.sandboxes}

    @property
    def config_hash(self) -> str | None:
        """config.hash of the newest ready sandbox, else of the newest sandbox, else None."""
        pool = self.ready_sandboxes or list(self.sandboxes)
        pool = sorted(pool, key=lambda s: s.created_ns)
        return pool[-1].config_hash if pool else None

    def containers_of(self, sandbox_id: str) -> list[Container]:
        return [c for c in self.containers if c.pod_sandbox_id == sandbox_id]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": f"{self.namespace}/{self.pod_name}",
            "config_hash": self.config_hash,
            "sandboxes": [s.to_dict() for s in self.sandboxes],
            "containers": [c.to_dict() for c in self.containers],
            **({"similar_names": list(self.similar_names)} if self.similar_names else {}),
        }


@dataclass
class Outcome:
    """The result of a wait.

    ``ok``: the node did what was asked. ``state``: stopped | running (ok) | still-running |
    name-mismatch | never-started | crash-looping | unchanged | shadowed | unhealthy | dropped |
    not-relisted | runtime-unavailable. ``message``: what was observed, one or two sentences. ``details``: for
    ``--json``. ``shadowing_file``: the other file that defines the same namespace/name and wins.
    """

    ok: bool
    state: str
    message: str
    elapsed: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    shadowing_file: str | None = None
    hint: str | None = None

    @property
    def rollback_advised(self) -> bool:
        """Whether the node showed that the new version does not work (never-started,
        crash-looping, unhealthy, unchanged, shadowed, dropped). False when ok, and when nothing could be
        observed about the pod (runtime-unavailable, name-mismatch, not-relisted): rolling back blind would be a
        second change nobody can confirm either."""
        return not self.ok and self.state not in ("runtime-unavailable", "name-mismatch", "not-relisted")

    def to_dict(self) -> dict[str, Any]:
        """The ``wait`` member of a ``--json`` reply."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "rollback_advised": self.rollback_advised,
            "state": self.state,
            "message": self.message,
            "elapsed": round(self.elapsed, 3),
        }
        if self.shadowing_file:
            out["shadowing_file"] = self.shadowing_file
        if self.hint:
            out["hint"] = self.hint
        out["details"] = self.details
        return out

    def journal_fields(self) -> dict[str, Any]:
        """Upper-case journal fields (``Journal.log(..., **outcome.journal_fields())``)."""
        return {
            "WAIT_STATE": self.state,
            "WAIT_ELAPSED": f"{self.elapsed:.1f}",
            "CONFIG_HASH": self.details.get("config_hash"),
            "SHADOWING_FILE": self.shadowing_file,
        }

    def error(self) -> WaitTimeout:
        """The WaitTimeout (code ``wait-timeout``, exit 6) that reports this failed outcome."""
        return WaitTimeout(self.message, hint=self.hint, details=self.to_dict())

    def raise_for_failure(self) -> None:
        """Raise :meth:`error` unless ``ok``."""
        if not self.ok:
            raise self.error()


def _silent(_: Progress) -> None:
    return None


def _ns(wall: float) -> int:
    return int(wall * 1_000_000_000)


def pod_spec_changed(old_doc: Mapping[str, Any] | None, new_doc: Mapping[str, Any]) -> bool:
    """Whether the kubelet should see a different pod (and so a new config.hash).

    Compares decoded documents, so comments, whitespace and key order do not count, nor the
    no-op fields kubeadm writes (``metadata.creationTimestamp: null``, ``status: {}``).
    Explicitly written API defaults still count as a change although the kubelet's hash ignores
    them; a wait then ends ``unchanged`` (KUBELET.md "Identity and restarts").
    """
    if old_doc is None:
        return True

    def norm(doc: Mapping[str, Any]) -> Any:
        d = dict(doc)
        d.pop("status", None)
        meta = dict(d.get("metadata") or {})
        if meta.get("creationTimestamp") is None:
            meta.pop("creationTimestamp", None)
        d["metadata"] = meta
        return d

    return norm(old_doc) != norm(new_doc)


class Prover:
    """Watches the container runtime (and probes) for one node.

    ``crictl``: the runtime client. ``node_name``: the kubelet's node name (default: host name,
    lower-cased). ``poll_interval``: seconds between looks (default 0.5). ``probe_host``: host for
    probes that name none (default: sandbox IP for pod-network pods, 127.0.0.1 for hostNetwork).
    ``kubeconfig``: optional; when set, the mirror pod's config.hash is looked up once at the end
    of a wait and reported in ``details["mirror_pod"]`` (never decides the outcome). ``settle``:
    seconds a container must have been up (by its createdAt) before it counts (default 2).
    ``file_check_frequency``: the kubelet's relist period in seconds (default 20, the kubelet's):
    a pod that still runs the sandbox from before the swap is confirmed only after one relist
    has passed, because an inotify re-read that fails to parse keeps the old pod until then
    (KUBELET.md "What a broken file does to a running pod"). ``restart_backoff``: seconds a pod
    that vanished after the swap is given to come back before the wait calls it ``dropped``.
    ``clock``/``sleep``/``wall`` exist for tests; timeouts always use the monotonic ``clock``.
    """

    def __init__(
        self,
        crictl: Crictl | None = None,
        *,
        node_name: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        probe_host: str | None = None,
        kubeconfig: Path | None = None,
        settle: float = DEFAULT_SETTLE,
        file_check_frequency: float = DEFAULT_FILE_CHECK_FREQUENCY,
        restart_backoff: float = RESTART_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.crictl = crictl or Crictl()
        self.node_name = (node_name or default_node_name()).strip().lower()
        #: False when the node name is only the host name (a guess that may be wrong).
        self.node_name_given = bool(node_name)
        self.poll_interval = max(0.05, poll_interval)
        self.probe_host = probe_host
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None
        self.settle = max(0.0, settle)
        self.file_check_frequency = max(0.0, float(file_check_frequency))
        self.restart_backoff = max(0.0, float(restart_backoff))
        self.clock = clock
        self.sleep = sleep
        self.wall = wall
        self._inspected: dict[str, Sandbox | None] = {}

    # --- construction from the command line -------------------------------------------------
    @classmethod
    def from_args(cls, args: Any, config: Mapping[str, Any] | None = None) -> Prover:
        """Build from argparse values (see ``add_wait_arguments``) and config values.

        Precedence: command line, then ``config`` keys ``crictl``, ``runtime_endpoint``,
        ``node_name``, ``probe_host``, ``kubeconfig``, ``poll_interval``, ``settle``,
        ``file_check_frequency`` (seconds), then defaults.
        """
        cfg = dict(config or {})

        def pick(attr: str) -> Any:
            value = getattr(args, attr, None)
            return value if value not in (None, "") else cfg.get(attr)

        return cls(
            Crictl(pick("crictl") or "crictl", pick("runtime_endpoint")),
            node_name=pick("node_name"),
            probe_host=pick("probe_host"),
            kubeconfig=pick("kubeconfig"),
            poll_interval=float(cfg.get("poll_interval") or DEFAULT_POLL_INTERVAL),
            settle=float(cfg["settle"]) if cfg.get("settle") is not None else DEFAULT_SETTLE,
            file_check_frequency=float(cfg.get("file_check_frequency") or DEFAULT_FILE_CHECK_FREQUENCY),
        )

    # --- naming -------------------------------------------------------------------------------
    def pod_name(self, manifest_doc_or_name: Mapping[str, Any] | str) -> str:
        """The pod's name on the node: ``<metadata.name>-<node name>`` (KUBELET.md "How a file is
        decoded")."""
        if isinstance(manifest_doc_or_name, str):
            base = manifest_doc_or_name
        else:
            base = str((manifest_doc_or_name.get("metadata") or {}).get("name", ""))
        return f"{base}-{self.node_name}"

    def target(self, manifest_doc: Mapping[str, Any]) -> tuple[str, str]:
        """(pod name on the node, namespace) for a decoded manifest; namespace defaults to
        ``default``. Use as ``prover.snapshot(*prover.target(doc))``."""
        ns = str((manifest_doc.get("metadata") or {}).get("namespace") or "default")
        return self.pod_name(manifest_doc), ns

    # --- looking ------------------------------------------------------------------------------
    def observe(self, pod_name: str, namespace: str, *, timeout: float | None = None) -> PodObservation:
        """One look at the runtime: the pod's sandboxes (matched on metadata name/namespace or the
        ``io.kubernetes.pod.*`` labels) and their containers. Raises RuntimeUnavailable."""
        taken = self.wall()
        pods = self.crictl.pods(timeout=timeout)
        mine = [s for s in pods if _matches(s.name, s.namespace, s.labels, pod_name, namespace)]
        ids = {s.id for s in mine}
        conts = [
            c
            for c in self.crictl.containers(timeout=timeout)
            if c.pod_sandbox_id in ids
            or (c.labels.get(LABEL_POD_NAME) == pod_name and c.labels.get(LABEL_POD_NAMESPACE) == namespace)
        ]
        similar: set[str] = set()
        suffix = f"-{self.node_name}"
        if pod_name.endswith(suffix):
            base = pod_name[: -len(suffix)] + "-"
            similar = {
                s.name
                for s in pods
                if s.ready
                and s.namespace == namespace
                and s.name.startswith(base)
                and s.name != pod_name
                and s.annotations.get(CONFIG_SOURCE, "file") == "file"
            }
        return PodObservation(pod_name, namespace, taken, tuple(mine), tuple(conts), tuple(sorted(similar)))

    def snapshot(self, pod_name: str, namespace: str) -> PodObservation:
        """The pod as it is BEFORE the swap (config.hash, sandbox ids). Call it before renaming.

        Raises RuntimeUnavailable when crictl cannot answer: the caller must then not swap.
        """
        return self.observe(pod_name, namespace)

    def _inspect(self, sandbox_id: str, timeout: float) -> Sandbox | None:
        if sandbox_id not in self._inspected:
            try:
                self._inspected[sandbox_id] = self.crictl.inspect_pod(sandbox_id, timeout=timeout)
            except RuntimeUnavailable:
                return None
        return self._inspected[sandbox_id]

    # --- park ---------------------------------------------------------------------------------
    def wait_stopped(
        self,
        pod_name: str,
        namespace: str,
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
    ) -> Outcome:
        """Wait until the pod has no ready sandbox and no running container.

        ``timeout``: seconds (monotonic). Returns Outcome ``stopped`` (ok), ``still-running``
        (what still runs is listed), ``name-mismatch`` (nothing by that name, but the same pod
        runs under another node name: fix ``--node-name``) or ``runtime-unavailable``.
        Never raises for what it observes; the caller turns a failed Outcome into WaitTimeout.
        """
        report = progress or _silent
        start = self.clock()
        deadline = start + max(0.0, timeout)
        last: PodObservation | None = None
        last_error: str | None = None
        while True:
            now = self.clock()
            try:
                obs = self.observe(pod_name, namespace, timeout=max(0.5, deadline - now))
                last, last_error = obs, None
                if not obs.ready_sandboxes and not obs.running_containers:
                    elapsed = self.clock() - start
                    if obs.similar_names:
                        out = self._name_mismatch(namespace, pod_name, obs)
                        out.elapsed = elapsed
                    else:
                        out = Outcome(
                            True,
                            "stopped",
                            f"{namespace}/{pod_name}: no ready sandbox and no running container after {elapsed:.1f} s",
                            elapsed,
                            {"observation": obs.to_dict()},
                        )
                    self._add_mirror(out, pod_name, namespace)
                    report(Progress("done", out.message, elapsed, timeout, done=True))
                    return out
                running = ", ".join(sorted({c.name for c in obs.running_containers})) or "sandbox"
                msg = f"waiting for the kubelet to stop {namespace}/{pod_name} (still running: {running})"
            except RuntimeUnavailable as exc:
                last_error = exc.message
                msg = f"waiting for the container runtime to answer ({exc.message})"
            elapsed = self.clock() - start
            report(Progress("stopping", msg, elapsed, timeout))
            if self.clock() >= deadline:
                break
            # the kubelet stops a removed pod within about a second: look more often than the
            # default interval, so park --wait ends close to the moment it stopped (issue 10)
            self.sleep(min(self.poll_interval, STOP_POLL_INTERVAL, max(0.0, deadline - self.clock())))
        elapsed = self.clock() - start
        if last is None:
            out = Outcome(
                False,
                "runtime-unavailable",
                f"could not ask the container runtime about {namespace}/{pod_name} for {elapsed:.0f} s: {last_error}",
                elapsed,
                {},
                hint="check crictl and the CRI endpoint (--runtime-endpoint)",
            )
        else:
            ids = [s.id[:13] for s in last.ready_sandboxes] or sorted(
                {c.pod_sandbox_id[:13] for c in last.running_containers}
            )
            names = sorted({c.name for c in last.running_containers})
            out = Outcome(
                False,
                "still-running",
                f"{namespace}/{pod_name} still runs {elapsed:.0f} s after its manifest left the directory "
                f"(sandbox {', '.join(ids)}; containers: {', '.join(names) or 'none'})",
                elapsed,
                {"observation": last.to_dict(), **({"runtime_error": last_error} if last_error else {})},
                hint=(
                    "a kubelet restarted while the apiserver was unreachable skips removals "
                    "(KUBELET.md 'Identity and restarts'); check `journalctl -u kubelet`, restart the "
                    "kubelet, or stop it by hand: crictl stopp " + " ".join(ids)
                ),
            )
        self._add_mirror(out, pod_name, namespace)
        report(Progress("done", out.message, elapsed, timeout, done=True))
        return out

    # --- unpark / apply / edit / rollback -----------------------------------------------------
    def wait_started(
        self,
        pod_name: str,
        namespace: str,
        *,
        before: PodObservation | None,
        swap_time: float,
        manifest_doc: Mapping[str, Any],
        manifest_changed: bool,
        manifest_dir: Path,
        timeout: float,
        progress: ProgressCallback | None = None,
        manifest_file: str | None = None,
    ) -> Outcome:
        """Wait until the new pod runs and its probes pass.

        ``before``: :meth:`snapshot` taken before the swap (None: whatever was ready and created
        before ``swap_time`` at the first look counts as the old version). ``swap_time``: wall-clock seconds
        (``time.time()``) taken just before the rename. ``manifest_changed``: the pod changed as the
        kubelet sees it (:func:`pod_spec_changed`); then a config.hash different from the one
        running before is required. ``manifest_file``: our file's name in ``manifest_dir`` (optional;
        without it, ours is recognised by content). ``timeout``: seconds (monotonic).

        A sandbox from before the swap that still runs proves nothing until the kubelet has
        relisted (``file_check_frequency`` + a margin after the wait began): a file the kubelet
        refuses keeps the old pod until then, and the relist kills it. A new sandbox, or a new
        config.hash, shows the kubelet parsed the file and counts at once.

        Returns Outcome ``running`` (ok), ``never-started``, ``crash-looping``, ``unchanged``,
        ``shadowed`` (with ``shadowing_file``), ``unhealthy``, ``dropped`` (the pod that ran
        before the swap was removed at a relist and nothing replaced it: the kubelet refused the
        file), ``not-relisted`` (the old sandbox still ran but the timeout ended before a relist)
        or ``runtime-unavailable``.
        """
        report = progress or _silent
        start = self.clock()
        deadline = start + max(0.0, timeout)
        swap_ns = _ns(swap_time) - 1_000_000_000  # 1 s of slack for clock granularity
        old_ids = set(before.sandbox_ids) if before else set()
        old_hashes = set(before.ready_hashes) if before else set()
        seeded = before is not None
        want_names = [
            str(c.get("name"))
            for c in (manifest_doc.get("spec") or {}).get("containers") or []
            if isinstance(c, Mapping)
        ]
        host_network = bool((manifest_doc.get("spec") or {}).get("hostNetwork"))
        specs = probe_specs(manifest_doc)
        trackers: dict[str, list[ProbeTracker]] = {}
        health_sandbox: str | None = None
        shadow_checked = False
        last: PodObservation | None = None
        last_error: str | None = None
        chosen: Sandbox | None = None
        phase = "sandbox"
        relisted_at = start + self.file_check_frequency + RELIST_MARGIN
        old_ran_after_swap = False  # a sandbox from before the swap was seen running after it
        gone_since: float | None = None  # when nothing of the pod was ready any more

        def finish(out: Outcome) -> Outcome:
            out.elapsed = self.clock() - start
            out.details.setdefault("observation", last.to_dict() if last else None)
            out.details.setdefault("before_config_hash", before.config_hash if before else None)
            self._add_mirror(out, pod_name, namespace)
            report(Progress("done", out.message, out.elapsed, timeout, done=True))
            return out

        while True:
            now = self.clock()
            elapsed = now - start
            try:
                obs = self.observe(pod_name, namespace, timeout=max(0.5, deadline - now))
                last, last_error = obs, None
            except RuntimeUnavailable as exc:
                obs, last_error = None, exc.message
            msg = f"waiting for the container runtime to answer ({last_error})" if obs is None else ""
            if obs is not None and not seeded:
                # No snapshot from before the swap: what ran before swap_time is the old version.
                seeded = True
                pre = [s for s in obs.ready_sandboxes if s.created_ns and s.created_ns < swap_ns]
                old_ids |= {s.id for s in pre}
                old_hashes |= {s.config_hash for s in pre if s.config_hash}
            if obs is not None:
                chosen = self._pick_sandbox(obs, old_ids, old_hashes, manifest_changed, swap_ns)
                if any(s.id in old_ids for s in obs.ready_sandboxes):
                    old_ran_after_swap, gone_since = True, None
                elif not obs.ready_sandboxes and gone_since is None:
                    gone_since = now
                if (
                    chosen is None
                    and old_ran_after_swap
                    and gone_since is not None
                    and now - gone_since >= self.restart_backoff
                ):
                    return finish(self._dropped(namespace, pod_name, now - gone_since))
                if chosen is None:
                    phase = "sandbox"
                    if manifest_changed and old_hashes and obs.ready_hashes & old_hashes:
                        msg = (
                            f"waiting for the kubelet to replace {namespace}/{pod_name} "
                            f"(config.hash {sorted(obs.ready_hashes & old_hashes)[0][:12]} still runs)"
                        )
                        if not shadow_checked and elapsed >= min(self.file_check_frequency + RELIST_MARGIN, timeout):
                            shadow_checked = True
                            shadow = find_shadowing_file(manifest_dir, manifest_doc, manifest_file=manifest_file)
                            if shadow:
                                return finish(self._shadowed(namespace, pod_name, shadow, manifest_dir, manifest_doc))
                    elif manifest_changed:
                        msg = f"waiting for a new sandbox of {namespace}/{pod_name}"
                    else:
                        msg = f"waiting for the kubelet to start {namespace}/{pod_name}"
                else:
                    conts = obs.containers_of(chosen.id)
                    is_new = chosen.id not in old_ids
                    running = {c.name for c in conts if c.running and (not is_new or c.created_ns >= swap_ns)}
                    missing = [n for n in want_names if n not in running]
                    if missing:
                        phase = "containers"
                        msg = f"waiting for containers of {namespace}/{pod_name}: {', '.join(missing)}"
                        health_sandbox = None
                    else:
                        phase = "health"
                        if health_sandbox != chosen.id:
                            health_sandbox = chosen.id
                            trackers = self._trackers(specs, conts, now)
                        host = self._probe_host(chosen, host_network, deadline - now)
                        verdict = self._run_due_probes(trackers, conts, host, deadline)
                        young = [
                            c.name
                            for c in conts
                            if c.running and c.name in want_names and c.created_ns > _ns(self.wall() - self.settle)
                        ]
                        if verdict == "healthy" and young:
                            verdict = "pending"
                        elif verdict == "healthy":
                            shadow = find_shadowing_file(manifest_dir, manifest_doc, manifest_file=manifest_file)
                            if shadow:
                                return finish(self._shadowed(namespace, pod_name, shadow, manifest_dir, manifest_doc))
                            if is_new or self.clock() >= relisted_at:
                                return finish(self._running(namespace, pod_name, chosen, is_new, trackers, host))
                            verdict = "relist"
                        if verdict == "unhealthy":
                            return finish(self._unhealthy(namespace, pod_name, chosen, trackers, host, fatal=True))
                        waiting = [t.spec.describe(host) for ts in trackers.values() for t in ts if not t.succeeded]
                        if verdict == "relist":
                            phase = "relist"
                            msg = (
                                f"{namespace}/{pod_name} still runs the sandbox from before the swap; waiting for "
                                f"the kubelet's next relist (fileCheckFrequency {self.file_check_frequency:g} s) to "
                                "show it accepted the file"
                            )
                        elif waiting:
                            msg = "waiting for " + "; ".join(waiting[:2])
                        else:
                            msg = f"waiting for {', '.join(sorted(set(young)))} to stay up {self.settle:g} s"
            report(Progress(phase, msg, self.clock() - start, timeout))
            if self.clock() >= deadline:
                break
            pause = min(self.poll_interval, max(0.0, deadline - self.clock()))
            if phase == "health":  # wake for the next probe that falls due, not a poll later
                dues = [t.next_due for ts in trackers.values() for t in ts if not t.succeeded]
                if dues:
                    pause = min(pause, max(0.02, min(dues) - self.clock()))
            self.sleep(pause)

        # --- deadline passed: say exactly what was seen ----------------------------------------
        if last is None:
            return finish(
                Outcome(
                    False,
                    "runtime-unavailable",
                    f"could not ask the container runtime about {namespace}/{pod_name}: {last_error}",
                    hint="check crictl and the CRI endpoint (--runtime-endpoint)",
                )
            )
        if phase == "relist" and chosen is not None:
            return finish(
                Outcome(
                    False,
                    "not-relisted",
                    f"{namespace}/{pod_name} still runs the sandbox from before the swap, but the kubelet had "
                    f"not relisted (fileCheckFrequency {self.file_check_frequency:g} s) within {timeout:.0f} s: "
                    "a file it refuses would keep that pod until then, so this proves nothing yet",
                    details={"config_hash": chosen.config_hash, "sandbox_id": chosen.id},
                    hint="wait longer than the kubelet's relist "
                    f"(--wait={self.file_check_frequency + RELIST_MARGIN + 5:.0f}s)",
                )
            )
        exited = [c for c in last.containers if c.state == CONTAINER_EXITED and c.created_ns >= swap_ns]
        probes_pending = any(not t.succeeded for ts in trackers.values() for t in ts)
        if phase == "health" and chosen is not None and (probes_pending or not exited):
            host = self._probe_host(chosen, host_network, 1.0)
            return finish(self._unhealthy(namespace, pod_name, chosen, trackers, host, fatal=False))
        if not last.sandboxes and last.similar_names:
            return finish(self._name_mismatch(namespace, pod_name, last))
        if manifest_changed and old_hashes and last.ready_hashes & old_hashes:
            shadow = find_shadowing_file(manifest_dir, manifest_doc, manifest_file=manifest_file)
            if shadow:
                return finish(self._shadowed(namespace, pod_name, shadow, manifest_dir, manifest_doc))
            old = sorted(last.ready_hashes & old_hashes)[0]
            return finish(
                Outcome(
                    False,
                    "unchanged",
                    f"{namespace}/{pod_name} still runs config.hash {old[:12]} from before the swap; "
                    f"the kubelet did not replace it within {timeout:.0f} s",
                    details={"config_hash": old},
                    hint=(
                        "check `journalctl -u kubelet` (the kubelet may not have read the file); a change "
                        "made only of explicitly written API defaults does not change the pod "
                        "(KUBELET.md 'Identity and restarts')"
                    ),
                )
            )
        new_sb = [s for s in last.sandboxes if s.id not in old_ids]
        if chosen is not None or exited:
            sb = chosen or (sorted(new_sb, key=lambda s: s.created_ns)[-1] if new_sb else None)
            conts = last.containers_of(sb.id) if sb else exited
            summary = ", ".join(
                f"{c.name} {c.state.removeprefix('CONTAINER_').lower()} (attempt {c.attempt})" for c in conts
            )
            state = "crash-looping" if exited else "never-started"
            return finish(
                Outcome(
                    False,
                    state,
                    f"{namespace}/{pod_name}: sandbox {sb.id[:13] if sb else '?'} exists but not every "
                    "container "
                    f"runs after {timeout:.0f} s ({summary or 'no containers yet'})",
                    details={"config_hash": sb.config_hash if sb else None},
                    hint="see `crictl ps -a --pod <id>` and `crictl logs <container>`",
                )
            )
        return finish(
            Outcome(
                False,
                "never-started",
                f"no new sandbox for {namespace}/{pod_name} appeared within {timeout:.0f} s",
                hint=(
                    "the kubelet may have refused the pod (admission: OutOfcpu/OutOfmemory, host port "
                    "in use: KUBELET.md 'What the kubelet refuses'), not read the file, or still be "
                    "pulling the image; see `journalctl -u kubelet`"
                ),
            )
        )

    # --- helpers ------------------------------------------------------------------------------
    def _add_mirror(self, out: Outcome, pod_name: str, namespace: str) -> None:
        """Add ``details["mirror_pod"]`` when a kubeconfig is set (informational only)."""
        if self.kubeconfig is None:
            return
        from .mirror import mirror_pod_hash

        info = mirror_pod_hash(self.kubeconfig, pod_name, namespace)
        seen = out.details.get("config_hash")
        if info.get("found") and seen:
            info["matches_runtime"] = info.get("config_hash") == seen
        out.details["mirror_pod"] = info

    @staticmethod
    def _pick_sandbox(
        obs: PodObservation, old_ids: set[str], old_hashes: set[str], manifest_changed: bool, swap_ns: int
    ) -> Sandbox | None:
        ready = sorted(obs.ready_sandboxes, key=lambda s: s.created_ns, reverse=True)
        for s in ready:
            if s.id in old_ids:
                continue
            if manifest_changed and s.config_hash and s.config_hash in old_hashes:
                continue
            if manifest_changed and s.created_ns and s.created_ns < swap_ns:
                continue  # a sandbox from before the swap (no snapshot was taken, or it was missed)
            return s
        if not manifest_changed:
            # The same pod may never have stopped (unpark soon after park, or a no-op apply).
            return ready[0] if ready else None
        return None

    def _probe_host(self, sandbox: Sandbox, host_network: bool, timeout: float) -> str:
        if self.probe_host:
            return self.probe_host
        if host_network:
            return "127.0.0.1"
        inspected = self._inspect(sandbox.id, max(0.5, timeout))
        return (inspected.ip if inspected and inspected.ip else None) or sandbox.ip or "127.0.0.1"

    def _trackers(self, specs: list[Any], conts: list[Container], now: float) -> dict[str, list[ProbeTracker]]:
        wall_now = self.wall()
        started = {c.name: c.created_ns / 1e9 for c in conts if c.running}
        out: dict[str, list[ProbeTracker]] = {}
        for spec in specs:
            begin = started.get(spec.container, wall_now)
            due = now + max(0.0, begin + spec.initial_delay - wall_now)
            out.setdefault(spec.container, []).append(ProbeTracker(spec, due))
        return out

    def _run_due_probes(
        self, trackers: dict[str, list[ProbeTracker]], conts: list[Container], host: str, deadline: float
    ) -> str:
        """Run every probe that is due; return healthy | unhealthy | pending."""
        ids = {c.name: c.id for c in conts if c.running}
        exec_runner = self.crictl.exec_sync
        all_healthy = True
        for cname, ts in trackers.items():
            by_kind = {t.spec.kind: t for t in ts}
            startup = by_kind.get("startupProbe")
            # the startup probe first; the moment it succeeds the others run in the same look (the
            # kubelet starts them then too), not one poll interval later
            for _ in range(2):
                in_startup = bool(startup and not startup.succeeded)
                phase_probes = [startup] if in_startup else [t for t in ts if t.spec.kind != "startupProbe"]
                for t in phase_probes:
                    now = self.clock()
                    if t is None or now < t.next_due or now >= deadline:
                        continue
                    spec = t.spec
                    if now + spec.timeout > deadline:  # never let one probe overrun the wait's deadline
                        spec = replace(spec, timeout=max(0.1, deadline - now))
                    result: ProbeResult = run_probe(spec, host, container_id=ids.get(cname), exec_runner=exec_runner)
                    t.record(result, self.clock())
                    if t.spec.kind in ("startupProbe", "livenessProbe") and t.failed:
                        return "unhealthy"
                if not (in_startup and startup is not None and startup.succeeded):
                    break
            if startup and not startup.succeeded:
                all_healthy = False
                continue
            ready = by_kind.get("readinessProbe")
            live = by_kind.get("livenessProbe")
            if ready is not None:
                ok = ready.succeeded
            elif live is not None:
                ok = live.passed_once
            else:
                ok = True
            all_healthy = all_healthy and ok
        return "healthy" if all_healthy else "pending"

    def _running(
        self,
        namespace: str,
        pod_name: str,
        sb: Sandbox,
        is_new: bool,
        trackers: dict[str, list[ProbeTracker]],
        host: str,
    ) -> Outcome:
        probes = [t.to_dict(host) for ts in trackers.values() for t in ts]
        skipped = [t.spec.describe(host) for ts in trackers.values() for t in ts if t.last and t.last.skipped]
        passed = sum(1 for ts in trackers.values() for t in ts if t.passed_once)
        what = f"{passed} probe(s) passed" if probes else "no probes in the manifest"
        note = (
            ""
            if is_new
            else f" (the same sandbox as before the swap: it never stopped, and survived the kubelet's relist "
            f"of {self.file_check_frequency:g} s)"
        )
        return Outcome(
            True,
            "running",
            f"{namespace}/{pod_name} runs with config.hash {(sb.config_hash or '?')[:12]} in sandbox "
            f"{sb.id[:13]}{note}; {what}",
            details={
                "config_hash": sb.config_hash,
                "sandbox_id": sb.id,
                "new_sandbox": is_new,
                "probes": probes,
                **({"probes_not_run": skipped} if skipped else {}),
            },
        )

    def _unhealthy(
        self,
        namespace: str,
        pod_name: str,
        sb: Sandbox,
        trackers: dict[str, list[ProbeTracker]],
        host: str,
        *,
        fatal: bool,
    ) -> Outcome:
        bad = [t for ts in trackers.values() for t in ts if not t.succeeded and t.runs]
        bad = bad or [t for ts in trackers.values() for t in ts if not t.succeeded]
        first = bad[0] if bad else None
        if first is not None:
            seen = first.last.message if first.last else "never run"
            why = f"{first.spec.describe(host)} -> {seen} ({first.failures} failure(s) in a row)"
        else:
            why = f"its containers had not stayed up {self.settle:g} s yet"
        lead = (
            "failed its probe as many times as failureThreshold allows (the kubelet restarts it now)"
            if fatal
            else "did not become healthy before the deadline"
        )
        return Outcome(
            False,
            "unhealthy",
            f"{namespace}/{pod_name} (config.hash {(sb.config_hash or '?')[:12]}) {lead}: {why}",
            details={
                "config_hash": sb.config_hash,
                "sandbox_id": sb.id,
                "probes": [t.to_dict(host) for ts in trackers.values() for t in ts],
            },
            hint="see `crictl logs` of the container; probes ran from the node with the manifest's settings",
        )

    def _dropped(self, namespace: str, pod_name: str, gone_for: float) -> Outcome:
        return Outcome(
            False,
            "dropped",
            f"{namespace}/{pod_name} ran after the swap, then the kubelet removed it and started nothing in "
            f"its place for {gone_for:.0f} s: it refused the new file at its relist (fileCheckFrequency "
            f"{self.file_check_frequency:g} s)",
            hint=(
                "see `journalctl -u kubelet` for 'Could not process manifest file'; `staticpodctl validate` "
                "the file (KUBELET.md 'What a broken file does to a running pod')"
            ),
        )

    def _name_mismatch(self, namespace: str, pod_name: str, obs: PodObservation) -> Outcome:
        return Outcome(
            False,
            "name-mismatch",
            f"no pod named {namespace}/{pod_name} on this node, but {', '.join(obs.similar_names)} "
            f"runs: the kubelet's node name is probably not {self.node_name!r}",
            details={"observation": obs.to_dict(), "probable_node_names": self.probable_node_names(obs)},
            hint="pass --node-name (or set node_name in the config) to the kubelet's node name",
        )

    def probable_node_names(self, obs: PodObservation) -> list[str]:
        """Node names the similar pods suggest (``kube-scheduler-cp-1`` -> ``cp-1``)."""
        suffix = f"-{self.node_name}"
        if not obs.pod_name.endswith(suffix):
            return []
        base = obs.pod_name[: -len(suffix)] + "-"
        return sorted({n[len(base) :] for n in obs.similar_names if n.startswith(base)})

    @staticmethod
    def _shadowed(
        namespace: str, pod_name: str, shadow: str, manifest_dir: Path, manifest_doc: Mapping[str, Any]
    ) -> Outcome:
        return Outcome(
            False,
            "shadowed",
            f"{shadow} also defines {namespace}/{_base_name(manifest_doc)} and sorts last, so the kubelet "
            "runs it instead of the file just written; the new version never took effect",
            details={"files_defining_pod": duplicate_files(manifest_dir, manifest_doc)},
            shadowing_file=shadow,
            hint=(
                f"move {shadow} out of {manifest_dir} (KUBELET.md 'Duplicate names across files': the "
                "lexically last file wins)"
            ),
        )


def _base_name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name", ""))


def _matches(name: str, ns: str, labels: Mapping[str, str], pod_name: str, namespace: str) -> bool:
    if name == pod_name and ns == namespace:
        return True
    return labels.get(LABEL_POD_NAME) == pod_name and labels.get(LABEL_POD_NAMESPACE) == namespace
