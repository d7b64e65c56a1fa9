"""Prove what the kubelet did with a swap: stopped or started the static pod (issue 7).

No apiserver is needed: the container runtime (through ``crictl``) and the manifest's own probes,
run from the node, are the evidence. Public API::

    add_wait_arguments(parser, verb=...)            # --wait[=TIMEOUT], --rollback-on-failure, --force, ...
    WaitOptions.from_args(args, config)             # timeout / rollback_on_failure / force
    critical_component_reason(doc, node_has_other_apiservers=None) -> str | None
    prover = Prover.from_args(args, config)
    pod, ns = prover.target(doc)                    # "<metadata.name>-<node name>", namespace
    before = prover.snapshot(pod, ns)               # BEFORE the swap; raises RuntimeUnavailable
    outcome = prover.wait_stopped(pod, ns, timeout=..., progress=...)
    outcome = prover.wait_started(pod, ns, before=..., swap_time=..., manifest_doc=...,
                                  manifest_changed=..., manifest_dir=..., timeout=..., progress=...)
    outcome.ok / .state / .message / .details / .shadowing_file / .to_dict() / .raise_for_failure()

    # what staticpodctl (cli.py) calls around a changing verb:
    before = before_operation(args, engine, verb)   # park: --force check; --wait: snapshot
    status = run_wait(args, out, engine, verb, result, before=before)  # 0, or 6 (WaitTimeout)
"""

from __future__ import annotations

from .critical import critical_component_reason
from .options import (
    DEFAULT_WAIT_TIMEOUT,
    WAIT_DEFAULT,
    TerminalProgress,
    WaitOptions,
    add_wait_arguments,
    parse_duration,
)
from .probes import ProbeResult, ProbeSpec, probe_specs
from .prover import Outcome, PodObservation, Progress, ProgressCallback, Prover, pod_spec_changed
from .runtime import Container, Crictl, RuntimeUnavailable, Sandbox
from .shadow import duplicate_files, files_defining, find_shadowing_file
from .wiring import BeforeSwap, NeedsForce, NodeNameMismatch, before_operation, config_values, run_wait

__all__ = [
    "DEFAULT_WAIT_TIMEOUT",
    "WAIT_DEFAULT",
    "BeforeSwap",
    "NeedsForce",
    "NodeNameMismatch",
    "before_operation",
    "config_values",
    "run_wait",
    "Container",
    "Crictl",
    "Outcome",
    "PodObservation",
    "ProbeResult",
    "ProbeSpec",
    "Progress",
    "ProgressCallback",
    "Prover",
    "RuntimeUnavailable",
    "Sandbox",
    "TerminalProgress",
    "WaitOptions",
    "add_wait_arguments",
    "critical_component_reason",
    "duplicate_files",
    "files_defining",
    "find_shadowing_file",
    "parse_duration",
    "pod_spec_changed",
    "probe_specs",
]
