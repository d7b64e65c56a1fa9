"""Prove what the kubelet did with a swap: stopped or started the static pod.

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

    # what staticpodctl (commands/changing.py) calls around a changing verb:
    before = before_operation(args, engine, verb)   # park: --force check; --wait: snapshot
    status = run_wait(args, out, engine, verb, result, before=before)  # 0, or 6 (WaitTimeout)
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

# Submodules load on first use (PEP 562): `staticpodctl park` imports only options and
# critical, never the prover (http.client, ssl) unless --wait asks for it.
_WHERE = {
    'BeforeSwap': 'wiring',
    'Container': 'runtime',
    'Crictl': 'runtime',
    'DEFAULT_WAIT_TIMEOUT': 'options',
    'NeedsForce': 'wiring',
    'NodeNameMismatch': 'wiring',
    'Outcome': 'prover',
    'PodObservation': 'prover',
    'ProbeResult': 'probes',
    'ProbeSpec': 'probes',
    'Progress': 'prover',
    'ProgressCallback': 'prover',
    'Prover': 'prover',
    'RuntimeUnavailable': 'runtime',
    'Sandbox': 'runtime',
    'TerminalProgress': 'options',
    'WAIT_DEFAULT': 'options',
    'WaitOptions': 'options',
    'add_wait_arguments': 'options',
    'before_operation': 'wiring',
    'config_values': 'wiring',
    'critical_component_reason': 'critical',
    'duplicate_files': 'shadow',
    'files_defining': 'shadow',
    'find_shadowing_file': 'shadow',
    'parse_duration': 'options',
    'pod_spec_changed': 'prover',
    'probe_specs': 'probes',
    'run_wait': 'wiring',
}


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


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
