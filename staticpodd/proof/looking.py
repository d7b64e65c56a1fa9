"""How the prover looks at the runtime and judges what it sees (the :class:`Prover`'s base).

One look (:meth:`PodLooks.observe`: sandboxes matched by name or label, their containers, the
static-pod source check), and the judgements :meth:`Prover.wait_started` makes from looks: which
sandbox to follow, which probes are due and how they went, whether the containers run, and the
outcomes for a pod that was dropped, renamed (node name) or shadowed by another file
(docs/kubelet-contract.md "Duplicate names across files"). Split out of prover.py so that the
Prover class holds its two waits; the methods are unchanged and reached through ``Prover``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .outcome import Outcome, PodObservation
from .probes import ProbeResult, ProbeTracker, run_probe
from .runtime import (
    CONFIG_SOURCE,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    Container,
    Crictl,
    RuntimeUnavailable,
    Sandbox,
)
from .shadow import duplicate_files


class PodLooks:
    """The looking half of :class:`staticpodd.proof.prover.Prover` (a base class; not used alone).

    The attributes are set by ``Prover.__init__`` (see there).
    """

    crictl: Crictl
    node_name: str
    node_name_given: bool
    probe_host: str | None
    kubeconfig: Path | None
    settle: float
    file_check_frequency: float
    restart_backoff: float
    clock: Callable[[], float]
    wall: Callable[[], float]
    _inspected: dict[str, Sandbox | None]

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

    # --- helpers ------------------------------------------------------------------------------
    def _add_mirror(self, out: Outcome, pod_name: str, namespace: str) -> None:
        """Add ``details["mirror_pod"]`` when a kubeconfig is set (informational only)."""
        if self.kubeconfig is None or "mirror_pod" in out.details:  # already read by the Ready wait
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
                        spec = spec.replace(timeout=max(0.1, deadline - now))
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
                "the file (docs/kubelet-contract.md 'What a broken file does to a running pod')"
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
                f"move {shadow} out of {manifest_dir} (docs/kubelet-contract.md 'Duplicate names across files': the "
                "lexically last file wins)"
            ),
        )


def _base_name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name", ""))


def _matches(name: str, ns: str, labels: Mapping[str, str], pod_name: str, namespace: str) -> bool:
    if name == pod_name and ns == namespace:
        return True
    return labels.get(LABEL_POD_NAME) == pod_name and labels.get(LABEL_POD_NAMESPACE) == namespace
