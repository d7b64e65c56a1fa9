"""Prove what the kubelet did after a swap, from the node, without an apiserver.

After ``park``: no ready sandbox and no running container is left for the pod (removing a manifest
does not always stop its containers: docs/kubelet-contract.md "Identity and restarts", k/k #88402, #116880).
After ``unpark``/``apply``/``edit``/``rollback``: a ready sandbox exists whose
``kubernetes.io/config.hash`` differs from the one running before (when the pod changed), every
container of ``spec.containers`` runs in it, created after the swap, and the manifest's own probes
pass from the node (see :mod:`.probes`). When the hash never changes, the directory is searched for
another file defining the same namespace/name (docs/kubelet-contract.md "Duplicate names across files").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kubeletconfig import DEFAULT_FILE_CHECK_FREQUENCY
from .looking import PodLooks
from .outcome import Outcome, PodObservation, Progress, ProgressCallback
from .probes import ProbeTracker, probe_specs
from .runtime import (
    CONTAINER_EXITED,
    Crictl,
    RuntimeUnavailable,
    Sandbox,
    default_node_name,
)
from .shadow import find_shadowing_file

#: After one full relist period (the kubelet's fileCheckFrequency, from its config file: see
#: :mod:`.kubeletconfig`), the kubelet has re-read every file; this margin (seconds) covers the
#: kill reaching the runtime (about 1 s on a real kubelet, tests/e2e). A file shadowed by another is given
#: relist + margin to show a new config.hash.
RELIST_MARGIN = 3.0
#: A pod of the same full name starts again only 10 s plus jitter after the old one terminated
#: (``allowStaticPodStart`` in pod_workers.go; docs/kubelet-contract.md, "Identity and restarts"): a pod that
#: vanished is called dropped only when no new sandbox came within this many seconds.
RESTART_BACKOFF = 20.0
DEFAULT_POLL_INTERVAL = 0.5
#: How often wait_stopped looks (seconds, at most): a look is two crictl calls of ~30 ms each.
STOP_POLL_INTERVAL = 0.2
#: A container counts as running only once it has been up this long (seconds, by its createdAt)
#: and still runs: one look at a crash-looping container must not pass for success.
DEFAULT_SETTLE = 2.0
#: How long (seconds) an unanswering apiserver may keep ``--wait`` from reading the kubelet's
#: Ready on the mirror pod before the wait settles for its own probe checks (and says so): the
#: apiserver may be the very component being started.
MIRROR_GRACE = 30.0


def _silent(_: Progress) -> None:
    return None


def _ns(wall: float) -> int:
    return int(wall * 1_000_000_000)


def pod_spec_changed(old_doc: Mapping[str, Any] | None, new_doc: Mapping[str, Any]) -> bool:
    """Whether the kubelet should see a different pod (and so a new config.hash).

    Compares decoded documents, so comments, whitespace and key order do not count, nor the
    no-op fields kubeadm writes (``metadata.creationTimestamp: null``, ``status: {}``).
    Explicitly written API defaults still count as a change although the kubelet's hash ignores
    them; a wait then ends ``unchanged`` (docs/kubelet-contract.md "Identity and restarts").
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


class Prover(PodLooks):
    """Watches the container runtime (and probes) for one node.

    About 420 lines, over the ~400 a module should stay under, on purpose: most of it is :meth:`wait_started`, one
    poll loop whose states (sandbox, containers, health, relist) share its locals; cut into
    pieces it would be harder to follow. How it looks and judges is in :class:`.looking.PodLooks`.

    ``crictl``: the runtime client. ``node_name``: the kubelet's node name (default: host name,
    lower-cased). ``poll_interval``: seconds between looks (default 0.5). ``probe_host``: host for
    probes that name none (default: sandbox IP for pod-network pods, 127.0.0.1 for hostNetwork).
    ``kubeconfig``: optional; when set, the mirror pod's config.hash is looked up once at the end
    of a wait and reported in ``details["mirror_pod"]`` (never decides the outcome). ``settle``:
    seconds a container must have been up (by its createdAt) before it counts (default 2).
    ``file_check_frequency``: the kubelet's relist period in seconds (default 20, the kubelet's):
    a pod that still runs the sandbox from before the swap is confirmed only after one relist
    has passed, because an inotify re-read that fails to parse keeps the old pod until then
    (docs/kubelet-contract.md "What a broken file does to a running pod"). ``restart_backoff``: seconds a pod
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
        """The pod's name on the node: ``<metadata.name>-<node name>`` (docs/kubelet-contract.md "How a file is
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
            # default interval, so park --wait ends close to the moment it stopped
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
                    "(docs/kubelet-contract.md 'Identity and restarts'); check `journalctl -u kubelet`, restart the "
                    "kubelet, or stop it by hand: crictl stopp " + " ".join(ids)
                ),
            )
        self._add_mirror(out, pod_name, namespace)
        report(Progress("done", out.message, elapsed, timeout, done=True))
        return out

    # --- the kubelet's own Ready -----------------------------------------------------------------
    def _kubelet_ready(
        self,
        out: Outcome,
        pod_name: str,
        namespace: str,
        chosen: Sandbox,
        deadline: float,
        report: ProgressCallback,
        start: float,
        timeout: float,
    ) -> Outcome:
        """After our own probes passed, wait for the kubelet's Ready condition on the mirror pod
        when a kubeconfig is known, and say which signal confirmed the pod.

        Our probe check can pass up to one probe period before the kubelet's: its prober's first
        tick may fall just before ``initialDelaySeconds`` (kubeadm's 10 s), and then Ready comes
        10 s later (seen in 6 runs of 9 on a real kubeadm v1.37.2 control plane). So the kubelet's
        word, read from the mirror pod whose ``config.hash`` is the running sandbox's, is what
        ``--wait`` confirms when it can be had. ``details["ready_signal"]``: ``kubelet`` (mirror pod
        Ready=True) or ``probes`` (staticpodd's own probe checks: no kubeconfig, or the apiserver
        did not answer within ``MIRROR_GRACE`` seconds). A mirror pod that stays not Ready until
        the deadline fails the wait (``not-ready``).
        """
        if self.kubeconfig is None:
            out.details["ready_signal"] = "probes"
            out.message += "; the kubelet's Ready condition was not read (no kubeconfig)"
            return out
        from .mirror import mirror_pod_hash

        errors_since: float | None = None
        info: dict[str, Any] = {}
        while True:
            info = mirror_pod_hash(self.kubeconfig, pod_name, namespace)
            if info.get("found") and chosen.config_hash:
                info["matches_runtime"] = info.get("config_hash") == chosen.config_hash
            out.details["mirror_pod"] = info  # the last answer: finish() does not ask again
            now = self.clock()
            if info.get("error"):
                errors_since = errors_since if errors_since is not None else now
                if now - errors_since >= MIRROR_GRACE or now >= deadline:
                    out.details["ready_signal"] = "probes"
                    out.message += f"; the kubelet's Ready condition could not be read ({info['error']})"
                    return out
                what = f"waiting for the apiserver to show the kubelet's Ready ({info['error']})"
            else:
                errors_since = None
                same = info.get("config_hash") == chosen.config_hash
                if info.get("found") and same and info.get("ready"):
                    out.details["ready_signal"] = "kubelet"
                    out.message += f"; the kubelet reports it Ready (mirror pod {namespace}/{pod_name})"
                    return out
                if now >= deadline:
                    out.ok, out.state = False, "not-ready"
                    out.details["ready_signal"] = "kubelet"
                    out.message = (
                        f"{namespace}/{pod_name} runs and staticpodd's probe checks passed, but the kubelet "
                        f"did not report it Ready within {timeout:.0f} s (mirror pod: "
                        + ("not found" if not info.get("found") else
                           "another config.hash" if not same else "Ready is not True") + ")"
                    )
                    out.hint = "see `kubectl describe pod -n " + namespace + " " + pod_name + "` and the kubelet's log"
                    return out
                what = (f"waiting for the kubelet to report {namespace}/{pod_name} Ready (mirror pod: "
                        + ("not yet created" if not info.get("found") else
                           "still the previous config.hash" if not same else "not Ready yet") + ")")
            report(Progress("ready", what, self.clock() - start, timeout))
            self.sleep(min(self.poll_interval, max(0.0, deadline - self.clock())))

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

        The steps: each look at the runtime (:meth:`_start_look`) either settles the outcome or
        says what is awaited; when the deadline passes, :meth:`_start_verdict` says exactly
        what was seen.
        """
        report = progress or _silent
        start = self.clock()
        spec = manifest_doc.get("spec") or {}
        w = _StartWatch(
            pod_name=pod_name,
            namespace=namespace,
            before=before,
            manifest_doc=manifest_doc,
            manifest_changed=manifest_changed,
            manifest_dir=manifest_dir,
            manifest_file=manifest_file,
            timeout=timeout,
            start=start,
            deadline=start + max(0.0, timeout),
            swap_ns=_ns(swap_time) - 1_000_000_000,  # 1 s of slack for clock granularity
            relisted_at=start + self.file_check_frequency + RELIST_MARGIN,
            want_names=[str(c.get("name")) for c in spec.get("containers") or [] if isinstance(c, Mapping)],
            host_network=bool(spec.get("hostNetwork")),
            specs=probe_specs(manifest_doc),
            old_ids=set(before.sandbox_ids) if before else set(),
            old_hashes=set(before.ready_hashes) if before else set(),
            seeded=before is not None,
        )

        def finish(out: Outcome) -> Outcome:
            out.elapsed = self.clock() - start
            out.details.setdefault("observation", w.last.to_dict() if w.last else None)
            out.details.setdefault("before_config_hash", before.config_hash if before else None)
            self._add_mirror(out, pod_name, namespace)
            report(Progress("done", out.message, out.elapsed, timeout, done=True))
            return out

        while True:
            settled, msg = self._start_look(w, report)
            if settled is not None:
                return finish(settled)
            report(Progress(w.phase, msg, self.clock() - start, timeout))
            if self.clock() >= w.deadline:
                break
            self.sleep(self._start_pause(w))
        return finish(self._start_verdict(w))

    def _start_look(self, w: _StartWatch, report: ProgressCallback) -> tuple[Outcome | None, str]:
        """One look at the runtime: (the outcome, if this look settles it; else what is awaited)."""
        now = self.clock()
        try:
            obs = self.observe(w.pod_name, w.namespace, timeout=max(0.5, w.deadline - now))
            w.last, w.last_error = obs, None
        except RuntimeUnavailable as exc:
            w.last_error = exc.message
            return None, f"waiting for the container runtime to answer ({w.last_error})"
        if not w.seeded:
            # No snapshot from before the swap: what ran before swap_time is the old version.
            w.seeded = True
            pre = [s for s in obs.ready_sandboxes if s.created_ns and s.created_ns < w.swap_ns]
            w.old_ids |= {s.id for s in pre}
            w.old_hashes |= {s.config_hash for s in pre if s.config_hash}
        w.chosen = self._pick_sandbox(obs, w.old_ids, w.old_hashes, w.manifest_changed, w.swap_ns)
        if any(s.id in w.old_ids for s in obs.ready_sandboxes):
            w.old_ran_after_swap, w.gone_since = True, None
        elif not obs.ready_sandboxes and w.gone_since is None:
            w.gone_since = now
        if (
            w.chosen is None
            and w.old_ran_after_swap
            and w.gone_since is not None
            and now - w.gone_since >= self.restart_backoff
        ):
            return self._dropped(w.namespace, w.pod_name, now - w.gone_since), ""
        if w.chosen is None:
            return self._start_no_sandbox(w, obs, now - w.start)
        return self._start_in_sandbox(w, obs, w.chosen, now, report)

    def _start_no_sandbox(self, w: _StartWatch, obs: PodObservation, elapsed: float) -> tuple[Outcome | None, str]:
        """No sandbox of the new version yet: is the old one still there, or shadowed by a file?"""
        w.phase = "sandbox"
        namespace, pod_name = w.namespace, w.pod_name
        if w.manifest_changed and w.old_hashes and obs.ready_hashes & w.old_hashes:
            msg = (
                f"waiting for the kubelet to replace {namespace}/{pod_name} "
                f"(config.hash {sorted(obs.ready_hashes & w.old_hashes)[0][:12]} still runs)"
            )
            if not w.shadow_checked and elapsed >= min(self.file_check_frequency + RELIST_MARGIN, w.timeout):
                w.shadow_checked = True
                shadow = find_shadowing_file(w.manifest_dir, w.manifest_doc, manifest_file=w.manifest_file)
                if shadow:
                    return self._shadowed(namespace, pod_name, shadow, w.manifest_dir, w.manifest_doc), msg
            return None, msg
        if w.manifest_changed:
            return None, f"waiting for a new sandbox of {namespace}/{pod_name}"
        return None, f"waiting for the kubelet to start {namespace}/{pod_name}"

    def _start_in_sandbox(
        self, w: _StartWatch, obs: PodObservation, chosen: Sandbox, now: float, report: ProgressCallback
    ) -> tuple[Outcome | None, str]:
        """A sandbox counts: wait for every container, then for the probes and the settle time."""
        namespace, pod_name = w.namespace, w.pod_name
        conts = obs.containers_of(chosen.id)
        is_new = chosen.id not in w.old_ids
        running = {c.name for c in conts if c.running and (not is_new or c.created_ns >= w.swap_ns)}
        missing = [n for n in w.want_names if n not in running]
        if missing:
            w.phase = "containers"
            w.health_sandbox = None
            return None, f"waiting for containers of {namespace}/{pod_name}: {', '.join(missing)}"
        w.phase = "health"
        if w.health_sandbox != chosen.id:
            w.health_sandbox = chosen.id
            w.trackers = self._trackers(w.specs, conts, now)
        host = self._probe_host(chosen, w.host_network, w.deadline - now)
        verdict = self._run_due_probes(w.trackers, conts, host, w.deadline)
        young = [
            c.name
            for c in conts
            if c.running and c.name in w.want_names and c.created_ns > _ns(self.wall() - self.settle)
        ]
        if verdict == "healthy" and young:
            verdict = "pending"
        elif verdict == "healthy":
            shadow = find_shadowing_file(w.manifest_dir, w.manifest_doc, manifest_file=w.manifest_file)
            if shadow:
                return self._shadowed(namespace, pod_name, shadow, w.manifest_dir, w.manifest_doc), ""
            if is_new or self.clock() >= w.relisted_at:
                out = self._running(namespace, pod_name, chosen, is_new, w.trackers, host)
                return self._kubelet_ready(out, pod_name, namespace, chosen, w.deadline,
                                           report, w.start, w.timeout), ""
            verdict = "relist"
        if verdict == "unhealthy":
            return self._unhealthy(namespace, pod_name, chosen, w.trackers, host, fatal=True), ""
        waiting = [t.spec.describe(host) for ts in w.trackers.values() for t in ts if not t.succeeded]
        if verdict == "relist":
            w.phase = "relist"
            return None, (
                f"{namespace}/{pod_name} still runs the sandbox from before the swap; waiting for "
                f"the kubelet's next relist (fileCheckFrequency {self.file_check_frequency:g} s) to "
                "show it accepted the file"
            )
        if waiting:
            return None, "waiting for " + "; ".join(waiting[:2])
        return None, f"waiting for {', '.join(sorted(set(young)))} to stay up {self.settle:g} s"

    def _start_pause(self, w: _StartWatch) -> float:
        """Seconds until the next look: a poll interval, or sooner when a probe falls due."""
        pause = min(self.poll_interval, max(0.0, w.deadline - self.clock()))
        if w.phase == "health":  # wake for the next probe that falls due, not a poll later
            dues = [t.next_due for ts in w.trackers.values() for t in ts if not t.succeeded]
            if dues:
                pause = min(pause, max(0.02, min(dues) - self.clock()))
        return pause

    def _start_verdict(self, w: _StartWatch) -> Outcome:
        """The deadline passed: say exactly what was seen at the last look."""
        namespace, pod_name, timeout, chosen, last = w.namespace, w.pod_name, w.timeout, w.chosen, w.last
        if last is None:
            return Outcome(
                False,
                "runtime-unavailable",
                f"could not ask the container runtime about {namespace}/{pod_name}: {w.last_error}",
                hint="check crictl and the CRI endpoint (--runtime-endpoint)",
            )
        if w.phase == "relist" and chosen is not None:
            return Outcome(
                False,
                "not-relisted",
                f"{namespace}/{pod_name} still runs the sandbox from before the swap, but the kubelet had "
                f"not relisted (fileCheckFrequency {self.file_check_frequency:g} s) within {timeout:.0f} s: "
                "a file it refuses would keep that pod until then, so this proves nothing yet",
                details={"config_hash": chosen.config_hash, "sandbox_id": chosen.id},
                hint="wait longer than the kubelet's relist "
                f"(--wait={self.file_check_frequency + RELIST_MARGIN + 5:.0f}s)",
            )
        exited = [c for c in last.containers if c.state == CONTAINER_EXITED and c.created_ns >= w.swap_ns]
        probes_pending = any(not t.succeeded for ts in w.trackers.values() for t in ts)
        if w.phase == "health" and chosen is not None and (probes_pending or not exited):
            host = self._probe_host(chosen, w.host_network, 1.0)
            return self._unhealthy(namespace, pod_name, chosen, w.trackers, host, fatal=False)
        if not last.sandboxes and last.similar_names:
            return self._name_mismatch(namespace, pod_name, last)
        if w.manifest_changed and w.old_hashes and last.ready_hashes & w.old_hashes:
            shadow = find_shadowing_file(w.manifest_dir, w.manifest_doc, manifest_file=w.manifest_file)
            if shadow:
                return self._shadowed(namespace, pod_name, shadow, w.manifest_dir, w.manifest_doc)
            old = sorted(last.ready_hashes & w.old_hashes)[0]
            return Outcome(
                False,
                "unchanged",
                f"{namespace}/{pod_name} still runs config.hash {old[:12]} from before the swap; "
                f"the kubelet did not replace it within {timeout:.0f} s",
                details={"config_hash": old},
                hint=(
                    "check `journalctl -u kubelet` (the kubelet may not have read the file); a change "
                    "made only of explicitly written API defaults does not change the pod "
                    "(docs/kubelet-contract.md 'Identity and restarts')"
                ),
            )
        return self._start_not_running(w, last, exited)

    def _start_not_running(self, w: _StartWatch, last: PodObservation, exited: list[Any]) -> Outcome:
        """The deadline passed with no sandbox whose containers all run: crash-looping or never-started."""
        namespace, pod_name, timeout, chosen = w.namespace, w.pod_name, w.timeout, w.chosen
        new_sb = [s for s in last.sandboxes if s.id not in w.old_ids]
        if chosen is not None or exited:
            sb = chosen or (sorted(new_sb, key=lambda s: s.created_ns)[-1] if new_sb else None)
            conts = last.containers_of(sb.id) if sb else exited
            summary = ", ".join(
                f"{c.name} {c.state.removeprefix('CONTAINER_').lower()} (attempt {c.attempt})" for c in conts
            )
            state = "crash-looping" if exited else "never-started"
            return Outcome(
                False,
                state,
                f"{namespace}/{pod_name}: sandbox {sb.id[:13] if sb else '?'} exists but not every "
                "container "
                f"runs after {timeout:.0f} s ({summary or 'no containers yet'})",
                details={"config_hash": sb.config_hash if sb else None},
                hint="see `crictl ps -a --pod <id>` and `crictl logs <container>`",
            )
        return Outcome(
            False,
            "never-started",
            f"no new sandbox for {namespace}/{pod_name} appeared within {timeout:.0f} s",
            hint=(
                "the kubelet may have refused the pod (admission: OutOfcpu/OutOfmemory, host port "
                "in use: docs/kubelet-contract.md 'What the kubelet refuses'), not read the file, or still be "
                "pulling the image; see `journalctl -u kubelet`"
            ),
        )


@dataclass
class _StartWatch:
    """What :meth:`Prover.wait_started` knows between two looks at the runtime.

    The first block is fixed for the wait; the second changes with each look. Times are the
    prover's monotonic clock (seconds) except ``swap_ns`` (wall-clock nanoseconds, as the runtime
    reports ``createdAt``).
    """

    pod_name: str
    namespace: str
    before: PodObservation | None
    manifest_doc: Mapping[str, Any]
    manifest_changed: bool
    manifest_dir: Path
    manifest_file: str | None
    timeout: float
    start: float
    deadline: float
    swap_ns: int
    relisted_at: float
    want_names: list[str]
    host_network: bool
    specs: list[Any]
    old_ids: set[str]
    old_hashes: set[str]
    seeded: bool
    trackers: dict[str, list[ProbeTracker]] = field(default_factory=dict)
    health_sandbox: str | None = None
    shadow_checked: bool = False
    last: PodObservation | None = None
    last_error: str | None = None
    chosen: Sandbox | None = None
    phase: str = "sandbox"
    old_ran_after_swap: bool = False  # a sandbox from before the swap was seen running after it
    gone_since: float | None = None  # when nothing of the pod was ready any more
