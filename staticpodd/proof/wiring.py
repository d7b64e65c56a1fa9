"""The two calls ``staticpodctl`` makes around a changing verb.

``commands/changing.py`` calls :func:`before_operation` before the engine swaps anything (for
``park`` always, for the other verbs only with ``--wait``) and :func:`run_wait` after a swap when ``--wait`` was
given. Between them, the engine's verb does the swap; nothing here writes to the manifest
directory except through the engine (``Engine.rollback``/``Engine.park`` for
``--rollback-on-failure``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

from ..errors import (
    EXIT_OK,
    EXIT_TIMEOUT,
    NeedsForce,
    NodeNameMismatch,
    RuntimeUnavailable,
    StaticpodError,
    UnknownComponent,
)
from ..journal import ERR, NOTICE, WARNING, Event
from ..record import Record
from .critical import critical_component_reason
from .options import ROLLBACK_VERBS, TerminalProgress, WaitOptions

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:  # the prover pulls in http/ssl; park without --wait must not pay for it
    from typing import Any

    from .prover import Outcome, PodObservation, Prover


class BeforeSwap(Record):
    """What :func:`before_operation` saw. ``snapshot`` is None when not waiting."""

    verb: str
    component: str | None
    doc: dict[str, Any] | None
    pod: str | None
    namespace: str | None
    snapshot: PodObservation | None
    taken_at: float
    prover: Prover | None

    def __init__(self, verb: str, component: str | None, doc: dict[str, Any] | None, pod: str | None,
                 namespace: str | None, snapshot: PodObservation | None, taken_at: float,
                 prover: Prover | None = None) -> None:
        self.verb = verb
        self.component = component
        self.doc = doc
        self.pod = pod
        self.namespace = namespace
        self.snapshot = snapshot
        self.taken_at = taken_at
        self.prover = prover


def config_values(eng: Any) -> dict[str, Any]:
    """The proof settings from the engine's Config (``node_name``, ``wait.*``) as a flat mapping:
    ``crictl``, ``runtime_endpoint``, ``node_name``, ``wait_timeout``, ``rollback_on_failure``,
    and, when the config grows them, ``wait.kubeconfig`` (taken under ``--root``), ``wait.probe_host``,
    ``wait.settle``; and ``file_check_frequency``, the kubelet's relist period in seconds from
    ``<root>/var/lib/kubelet/config.yaml`` (20 when it sets none)."""
    cfg = getattr(eng, "config", None)
    if cfg is None:
        return {}
    wait = getattr(cfg, "wait", None)
    out = {
        "node_name": getattr(cfg, "node_name", None),
        "crictl": getattr(wait, "crictl", None),
        "runtime_endpoint": getattr(wait, "runtime_endpoint", None),
        "wait_timeout": getattr(wait, "timeout", None),
        "rollback_on_failure": getattr(wait, "rollback_on_failure", None),
        "kubeconfig": getattr(wait, "kubeconfig", None),
        "probe_host": getattr(wait, "probe_host", None),
        "settle": getattr(wait, "settle", None),
    }
    layout = getattr(eng, "layout", None)
    if layout is not None and getattr(layout, "root", None) is not None:
        from .kubeletconfig import node_file_check_frequency

        out["file_check_frequency"] = node_file_check_frequency(layout.root)
    if out["kubeconfig"] and layout is not None:  # a node path from the config: under --root
        from ..layout import under_root

        out["kubeconfig"] = str(under_root(layout.root, out["kubeconfig"]))
    elif layout is not None and getattr(layout, "root", None) is not None:
        out["kubeconfig"] = kubelet_kubeconfig(layout.root)
    return {k: v for k, v in out.items() if v is not None}


#: The kubelet's own kubeconfig on a kubeadm node (docs/kubelet-contract.md; kubeadm writes it 0600 root).
KUBELET_KUBECONFIG = "etc/kubernetes/kubelet.conf"


def kubelet_kubeconfig(root: Any) -> str | None:
    """``<root>/etc/kubernetes/kubelet.conf`` when it is there and only its owner could have
    written it (owned by root or by us, no group/other write), else None: the default
    credentials ``--wait`` reads the mirror pod's Ready condition with. A file another user
    could have written is never used."""
    import os

    path = os.path.join(str(root), KUBELET_KUBECONFIG)
    try:
        st = os.stat(path)
    except OSError:
        return None
    import stat as _stat

    from ..node.trust import problem_of

    if not _stat.S_ISREG(st.st_mode) or problem_of(st) is not None:
        return None
    return path


def _decode(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        from ..manifest.decoding import decode

        doc = decode(data).doc
    except Exception:  # noqa: BLE001 - any undecodable bytes: no document
        try:
            from ..manifest.yamlsafe import safe_load

            doc = safe_load(data)
        except Exception:  # noqa: BLE001
            return None
    return doc if isinstance(doc, dict) else None


def _other_files_run_it(eng: Any, comp: str, data: bytes) -> bool:
    """Whether another live file defines the pod of ``comp``'s live bytes ``data``: then the
    kubelet runs the pod from that file once ``comp`` is parked (of files defining one pod it
    reads all and runs the lexically last, docs/kubelet-contract.md "Duplicate names across files"), so parking
    ``comp`` (a leftover ``kube-apiserver.yaml.bak``, typically) does not take the pod away."""
    try:
        fn = eng.resolve(comp, allow_recorded=False).file_name
        ident = eng.pod_identity(data)
        return bool(ident is not None and eng.files_defining(ident, besides=fn))
    except (StaticpodError, AttributeError):
        return False


def _component_arg(args: Any, verb: str) -> str | None:
    if verb == "apply":
        if getattr(args, "as_", None):
            return str(args.as_)
        src = getattr(args, "file", None)
        if not src or src == "-":
            return None
        from ..layout import component_of

        return component_of(os.path.basename(src))
    return getattr(args, "component", None)


def before_operation(args: Any, eng: Any, verb: str) -> BeforeSwap:
    """Check and record what runs BEFORE the swap of ``verb``.

    For ``park`` (even without --wait): refuse with NeedsForce (exit 4) a component the kubelet's
    own apiserver connection depends on (:func:`critical_component_reason`) unless ``--force``.
    With ``--wait``: take the runtime snapshot (config.hash, sandbox ids) of the pod. Raises
    RuntimeUnavailable (exit 1) when crictl cannot answer, so nothing is swapped that cannot be
    proven. Unknown components are left for the engine to report.
    """
    comp = _component_arg(args, verb)
    data: bytes | None = None
    loc: str | None = None
    if comp:
        try:
            _, data, loc = eng.current_bytes(comp)
        except (UnknownComponent, StaticpodError):
            data = None
    if data is None and verb == "apply" and getattr(args, "file", "-") != "-":
        try:
            with open(args.file, "rb") as fh:
                data = fh.read()
        except OSError:
            data = None
    if verb == "park" and data is not None and loc == "live" and not getattr(args, "force", False):
        def compute() -> str | None:
            d = _decode(data)
            return critical_component_reason(d) if d is not None else None

        # memoised by digest: a steady-state park parses no YAML
        memo = getattr(eng, "memo", None)
        reason = memo("critical-reason", data, compute) if memo is not None else compute()
        if reason and comp and _other_files_run_it(eng, comp, data):
            reason = None  # the pod keeps running from the other file: parking this one stops nothing
        if reason:
            raise NeedsForce(
                f"{comp}: {reason}",
                hint=f"park it anyway with: staticpodctl park {comp} --force",
            )
    now = time.time()
    if getattr(args, "wait", None) is None:
        return BeforeSwap(verb, comp, None, None, None, None, now)
    doc = _decode(data)
    from .prover import Prover

    prover = Prover.from_args(args, config_values(eng))
    pod = ns = None
    snap = None
    if doc is not None and isinstance(doc.get("metadata"), Mapping) and doc["metadata"].get("name"):
        pod, ns = prover.target(doc)
    try:
        if pod is not None and ns is not None:
            snap = prover.snapshot(pod, ns)
        else:
            prover.crictl.pods()  # still prove that the runtime answers before anything is swapped
    except RuntimeUnavailable as exc:
        exc.message += "; nothing was changed"
        exc.args = (exc.message,)
        raise
    if snap is not None and not snap.sandboxes and snap.similar_names and not prover.node_name_given:
        names = prover.probable_node_names(snap)
        raise NodeNameMismatch(
            f"{ns}/{pod} is not on this node's runtime, but {', '.join(snap.similar_names)} is: the "
            f"kubelet's node name is probably not the host name {prover.node_name!r}; nothing was changed",
            hint=f"pass --node-name {names[0] if names else 'NAME'} (or set node_name in the config)",
        )
    return BeforeSwap(verb, comp, doc, pod, ns, snap, time.time(), prover)


def _read_doc(eng: Any, location: str, file_name: str) -> dict[str, Any] | None:
    layout = eng.layout
    path = layout.parked_path(file_name) if location == "parked" else layout.live_path(file_name)
    try:
        return _decode(path.read_bytes())
    except OSError:
        return None


def run_wait(args: Any, out: Any, eng: Any, verb: str, res: Any, *, before: BeforeSwap | None = None) -> int:
    """Prove what the kubelet did after ``verb`` swapped ``res`` (an engine Result); return the
    exit status: 0 confirmed, 6 (WaitTimeout) not confirmed.

    Puts ``wait`` (Outcome.to_dict) into ``out.body``, and on failure ``error`` (WaitTimeout) and,
    after an automatic rollback, ``rollback``. Logs WAIT_CONFIRMED / WAIT_FAILED / AUTO_ROLLBACK.
    With ``--rollback-on-failure`` (or config ``wait.rollback_on_failure``) after apply, edit or
    rollback: puts the previous version back through ``Engine.rollback`` (atomic, gated, recorded
    as a new version with the reason), or parks a component that had no previous version.
    """
    cfg = config_values(eng)
    opts = WaitOptions.from_args(args, cfg)
    if opts.timeout is None:
        return EXIT_OK
    from .prover import Prover, pod_spec_changed

    prover = (before.prover if before and before.prover else None) or Prover.from_args(args, cfg)
    progress = None if getattr(out, "json", False) else TerminalProgress(sys.stderr)
    comp, fn = res.component, res.file_name
    outcome: Outcome
    try:
        if verb == "park":
            doc = (before.doc if before else None) or _read_doc(eng, "parked", fn)
            if doc is None:
                out.warn(f"{comp}: cannot read the parked manifest; nothing to wait for")
                return EXIT_OK
            pod, ns = prover.target(doc)
            outcome = prover.wait_stopped(pod, ns, timeout=opts.timeout, progress=progress)
        else:
            if res.location == "parked":
                out.say(f"  {comp} stays parked: nothing to wait for")
                out.body["wait"] = {"ok": True, "state": "parked", "message": "the component stays parked"}
                return EXIT_OK
            doc = _read_doc(eng, "live", fn)
            if doc is None:
                out.warn(f"{comp}: cannot read {fn} back; nothing to wait for")
                return EXIT_OK
            pod, ns = prover.target(doc)
            snap = before.snapshot if before and (before.pod, before.namespace) == (pod, ns) else None
            if verb == "unpark":
                changed = False
            elif before is not None and before.doc is not None:
                changed = pod_spec_changed(before.doc, doc)
            else:
                changed = res.previous_digest != res.digest
            if before is not None:
                swap_time = before.taken_at
            elif getattr(res, "version", None) is not None:
                swap_time = res.version.created_at - 2.0
            else:
                swap_time = time.time() - 5.0
            outcome = prover.wait_started(
                pod,
                ns,
                before=snap,
                swap_time=swap_time,
                manifest_doc=doc,
                manifest_changed=changed,
                manifest_dir=eng.layout.manifest_dir,
                manifest_file=fn,
                timeout=opts.timeout,
                progress=progress,
            )
    finally:
        if progress is not None:
            progress.close()
    out.body["wait"] = outcome.to_dict()
    fields = {"component": comp, "file_name": fn, **outcome.journal_fields()}
    if outcome.ok:
        out.say(f"  confirmed: {outcome.message}")
        eng.journal.log(Event.WAIT_CONFIRMED, f"{comp}: {outcome.message}", priority=NOTICE, **fields)
        return EXIT_OK
    err = outcome.error()
    eng.journal.log(Event.WAIT_FAILED, f"{comp}: {verb} not confirmed: {outcome.message}", priority=ERR, **fields)
    out.warn(f"staticpodctl: {verb} not confirmed ({outcome.state}): {outcome.message}")
    if outcome.hint:
        out.warn(f"  hint: {outcome.hint}")
    if verb in ROLLBACK_VERBS and opts.rollback_on_failure:
        if outcome.rollback_advised:
            _auto_rollback(out, eng, verb, res, outcome, prover=prover, timeout=opts.timeout)
        else:
            out.warn(f"staticpodctl: not rolling back {comp}: nothing shows the new version failed ({outcome.state})")
            out.body["rollback"] = {"ok": False, "skipped": True, "why": outcome.state}
    out.body["error"] = err.to_dict()
    return EXIT_TIMEOUT


def _auto_rollback(
    out: Any, eng: Any, verb: str, res: Any, outcome: Outcome, *, prover: Prover | None = None, timeout: float = 300
) -> None:
    """Put the previous version back (or park a component that had none) and, with a prover,
    confirm the rolled-back pod runs as well (``rollback.wait`` in ``--json``): a rollback the
    kubelet did not act on is no rollback."""
    comp = res.component
    reason = f"automatic rollback after {verb}: {outcome.state}: {outcome.message}"[:500]
    failed_doc = _read_doc(eng, "live", res.file_name)
    snap: PodObservation | None = None
    rb_time = time.time()
    if prover is not None and failed_doc is not None and res.previous_digest is not None:
        try:
            snap = prover.snapshot(*prover.target(failed_doc))
        except RuntimeUnavailable:
            snap = None
    try:
        if res.previous_digest is None:
            rb = eng.park(comp, reason=reason)
            what = f"{comp} had no previous version: parked the new one"
        else:
            seq = next(
                (v.seq for v in reversed(eng.store.history(comp)) if v.digest == res.previous_digest),
                None,
            )
            # the bytes in force right before this apply: back to their pod even across a --rename
            rb = eng.rollback(comp, to=seq, reason=reason, rename=True)
            what = f"{comp}: put version {seq} back" if seq is not None else f"{comp}: rolled back"
    except StaticpodError as exc:
        out.warn(f"staticpodctl: automatic rollback of {comp} FAILED: {exc}")
        out.body["rollback"] = {"ok": False, "error": exc.to_dict()}
        eng.journal.log(Event.AUTO_ROLLBACK, f"{comp}: automatic rollback failed: {exc}", priority=ERR, component=comp)
        return
    out.warn(f"staticpodctl: {what} ({rb.msg})")
    out.body["rollback"] = {"ok": True, **rb.to_dict()}
    eng.journal.log(
        Event.AUTO_ROLLBACK,
        f"{what}; reason: {reason}",
        priority=WARNING,
        component=comp,
        file_name=res.file_name,
        digest=getattr(rb, "digest", None),
        reason=reason,
        wait_state=outcome.state,
    )
    if prover is None or res.previous_digest is None:
        return
    from .prover import pod_spec_changed

    doc = _read_doc(eng, "live", res.file_name)
    if doc is None:
        return
    pod, ns = prover.target(doc)
    progress = None if getattr(out, "json", False) else TerminalProgress(sys.stderr)
    try:
        again = prover.wait_started(
            pod,
            ns,
            before=snap if snap is not None and (snap.pod_name, snap.namespace) == (pod, ns) else None,
            swap_time=rb_time,
            manifest_doc=doc,
            manifest_changed=failed_doc is None or pod_spec_changed(failed_doc, doc),
            manifest_dir=eng.layout.manifest_dir,
            manifest_file=res.file_name,
            timeout=timeout,
            progress=progress,
        )
    finally:
        if progress is not None:
            progress.close()
    out.body["rollback"]["wait"] = again.to_dict()
    fields = {"component": comp, "file_name": res.file_name, **again.journal_fields()}
    if again.ok:
        out.warn(f"  rollback confirmed: {again.message}")
        eng.journal.log(Event.WAIT_CONFIRMED, f"{comp}: rollback confirmed: {again.message}", priority=NOTICE, **fields)
    else:
        out.warn(f"staticpodctl: the rolled-back {comp} is not confirmed either ({again.state}): {again.message}")
        eng.journal.log(
            Event.WAIT_FAILED, f"{comp}: rollback not confirmed: {again.message}", priority=ERR, **fields
        )
