"""``staticpodctl pin POD --node NODE``: place a Pending pod on a node by hand, with the kubelet's
checks and the scheduler's warnings, and remember it on this node.

Order, each step only when the one before went through:

1. read the pod and the node (admin kubeconfig); refuse a pod already bound (``spec.nodeName`` is
   immutable) and, without ``--force-owned``, one a controller owns (``ownerReferences``: the
   controller would create a replacement, and the pinned copy would be bare anyway);
2. strip it (:mod:`staticpodd.pin.strip`) and set ``spec.nodeName``;
3. the checks (:mod:`staticpodd.pin.checks`): a kubelet refusal stops here, in the kubelet's words;
   a scheduler warning stops here under ``--strict``; ``--dry-run`` prints the manifest and stops;
4. keep the pod as read under the state dir (:func:`staticpodd.pin.local.keep_original`);
5. delete it (preconditions: its uid and resourceVersion as read, so a pod bound or changed
   meanwhile is left alone), wait until it is gone, create the pinned pod; when the create fails,
   create the original again from what was read (stripped the same way, without nodeName) and
   say so;
6. journal ``PINNED``, write the node's record, and with ``--wait`` confirm Running (and Ready
   with ``--ready``) from the pod's status, failing with the kubelet's reason when it ends Failed.
"""

from __future__ import annotations

import argparse
import time

from ..errors import EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, Conflict, StaticpodError
from ..journal import ERR, NOTICE, WARNING, Event
from .loading import attach_cluster_hook, build_layout, checked_config
from .output import PROG, Out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The admin kubeconfig kubeadm writes (taken under --root).
ADMIN_KUBECONFIG = "/etc/kubernetes/admin.conf"

#: What every pinned pod's record and message reminds of.
BARE_REMINDER = ("bare: no controller recreates it if the node dies, and `kubectl drain` refuses it without "
                 "--force (which deletes it for good)")


class PinRefused(StaticpodError):
    """The pin was refused before anything was replaced (the kubelet would refuse, or --strict)."""

    code = "pin-refused"


class ReplaceFailed(StaticpodError):
    """The delete went through and the create did not (``details`` says whether the original is back)."""

    code = "replace-failed"


def _journal(layout: Any) -> Any:
    from ..journal import Journal

    return Journal(PROG, str(layout.root))


def cmd_pin(args: argparse.Namespace, out: Out) -> int:
    """Pin ``args.pod`` to ``args.node`` (module docstring); exit 0, 1 refused/failed, 4 conflict,
    6 ``--wait`` timed out.

    Long because: it is one transaction read top to bottom: read the pod and the node, strip
    and judge it, refuse or stop at --dry-run, keep the original, delete, create, record and
    journal. Every step either raises with what was left untouched or hands its result to the
    next; split, the order that makes it safe would be hidden behind calls.
    """
    from ..layout import under_root
    from ..pin.checks import kubelet_refusals, scheduler_warnings
    from ..pin.local import keep_original, record_pin
    from ..pin.strip import pinned, strip_pod

    layout = build_layout(args)
    kubeconfig = str(under_root(layout.root, args.kubeconfig or ADMIN_KUBECONFIG))
    _trusted_kubeconfig(kubeconfig, layout.root)
    from ..pin.cluster import Cluster, ClusterError

    cl = Cluster(kubeconfig)
    ns, name, node_name = args.namespace, args.pod, args.node
    pod = cl.pod(name, ns)
    if pod is None:
        raise StaticpodError(f"pod {ns}/{name} not found", hint="kubectl get pods -n " + ns)
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound:
        raise Conflict(f"pod {ns}/{name} is already bound to node {bound}: spec.nodeName cannot change",
                       hint="delete it and create it again with another nodeName, or leave it where it is")
    owners = [f"{o.get('kind')}/{o.get('name')}" for o in (pod.get("metadata") or {}).get("ownerReferences") or []]
    if owners and not args.force_owned:
        raise Conflict(f"pod {ns}/{name} is owned by {', '.join(owners)}: that controller would create a "
                       "replacement and the pinned pod would be bare",
                       hint="pin it anyway with --force-owned (its ownerReferences are dropped), or pin a bare pod")
    node = cl.node(node_name)
    if node is None:
        raise StaticpodError(f"node {node_name} not found", hint="kubectl get nodes")
    stripped, removed = strip_pod(pod)
    if owners:
        stripped["metadata"].pop("ownerReferences", None)
        removed.append("metadata.ownerReferences")
    manifest = pinned(stripped, node_name)
    others = [p for p in cl.pods_on(node_name)
              if (p.get("metadata") or {}).get("uid") != (pod.get("metadata") or {}).get("uid")]
    refusals = kubelet_refusals(manifest, node, others)
    warnings = scheduler_warnings(manifest, node, others)
    checks = refusals + warnings
    out.body.update(pod=name, namespace=ns, node=node_name, removed=removed, checks=checks)
    for r in refusals:
        out.warn(f"{PROG}: the kubelet on {node_name} would refuse it: {r['reason']}: {r['message']} ({r['rule']})")
    for w in warnings:
        out.warn(f"{PROG}: warning: scheduler rule {w['rule']}: {w['message']}")
    if args.dry_run:
        import yaml

        if out.json:
            out.body["manifest"] = manifest
        else:
            out.say(yaml.safe_dump(manifest, sort_keys=False).rstrip())
            out.say(f"# checks: {len(refusals)} kubelet refusal(s), {len(warnings)} scheduler warning(s); "
                    "--dry-run: nothing replaced")
        ok = not refusals and not (args.strict and warnings)
        out.finish(ok, dry_run=True)
        return EXIT_OK if ok else EXIT_FAILURE
    if refusals:
        r = refusals[0]
        raise PinRefused(f"the kubelet on node {node_name} would refuse pod {ns}/{name}: {r['reason']}: "
                         f"{r['message']}; nothing was replaced",
                         hint="pick another node or lower the pod's requests", details={"checks": checks})
    if warnings and args.strict:
        raise PinRefused(f"--strict: pinning {ns}/{name} to {node_name} walks around "
                         f"{', '.join(w['rule'] for w in warnings)}; nothing was replaced",
                         hint="drop --strict to pin anyway, or fix the pod or the node", details={"checks": checks})
    meta = pod.get("metadata") or {}
    kept = keep_original(layout.state_dir, pod)
    out.body["original_kept"] = kept
    jr = _journal(layout)
    attach_cluster_hook(args, jr, lambda: layout, lambda: checked_config(args, layout))
    uid = str(meta.get("uid") or "")
    try:
        cl.delete(name, ns, uid, meta.get("resourceVersion"))
    except ClusterError as exc:
        if exc.status == 409:
            raise Conflict(f"pod {ns}/{name} changed after it was read (bound by a scheduler, relabelled?): "
                           f"nothing was replaced ({exc})", hint="run pin again to judge it as it is now") from None
        raise
    if not cl.wait_gone(name, ns, uid, timeout=args.delete_timeout):
        raise ReplaceFailed(f"pod {ns}/{name} was deleted but is still there after {args.delete_timeout:g} s "
                            "(a finalizer?); nothing was created", hint=f"the pod as read is kept in {kept}")
    try:
        created = cl.create(manifest)
    except ClusterError as exc:
        raise _restore_original(cl, jr, stripped, ns, name, node_name, kept, exc) from None
    from ..engine.model import Actor
    from ..store.versions import iso

    actor = str(Actor.current())
    entry = {"namespace": ns, "name": name, "node": node_name, "uid": (created.get("metadata") or {}).get("uid"),
             "pinned_at": iso(time.time()), "actor": actor,
             "bare": True, "owners_dropped": owners, "warnings": [w["rule"] for w in warnings],
             "original": kept}
    entry["record"] = record_pin(layout.state_dir, entry)
    jr.log(Event.PINNED, f"{ns}/{name}: pinned to node {node_name} by hand ({BARE_REMINDER})",
           priority=WARNING if warnings else NOTICE, pod=name, pod_namespace=ns, node=node_name,
           pod_uid=entry["uid"], actor=actor, warnings=",".join(entry["warnings"]) or None, original_kept=kept)
    out.body.update(pinned=entry)
    out.say(f"{ns}/{name}: pinned to node {node_name} (the scheduler was not asked)")
    out.say(f"  {BARE_REMINDER}")
    rc = EXIT_OK
    if args.wait is not None:
        rc = _wait(cl, out, ns, name, entry["uid"], args)
    out.finish(rc == EXIT_OK)
    return rc


def _trusted_kubeconfig(path: str, root: Any = "/") -> None:
    """Raise unless ``path`` and every directory above it (up to ``root`` when it lies under it,
    else up to ``/``) are only root's or ours to write, and it is a regular file: its credentials
    decide which API server pin talks to, and the client runs what it says (``users[].user.exec``)
    as the caller (:func:`staticpodd.node.trust.trusted_kubeconfig`). A missing file is left to
    the client's own error."""
    import os
    from pathlib import Path

    from ..errors import Untrusted
    from ..node.trust import trusted_kubeconfig

    top = Path(str(root))
    where = Path(os.path.abspath(path))
    try:
        trusted_kubeconfig(where, "kubeconfig", parents_up_to=top if top in where.parents else Path("/"))
    except FileNotFoundError:
        return
    except Untrusted as exc:
        raise StaticpodError(f"{path}: another user could have written this kubeconfig; not used ({exc})",
                             path=path, hint="chown root and chmod 600 it, in directories only root may write "
                             "(kubeadm writes admin.conf so)") from None


def _restore_original(cl: Any, jr: Any, stripped: dict[str, Any], ns: str, name: str, node: str, kept: str,
                      exc: Exception) -> ReplaceFailed:
    """The create failed after the delete: put the original back (without nodeName); returns the
    ReplaceFailed to raise, saying both what failed and whether the original is back."""
    from ..pin.cluster import ClusterError

    try:
        back = cl.create(stripped)
    except ClusterError as again:
        jr.log(Event.PIN_FAILED, f"{ns}/{name}: deleted for the pin to node {node}, but neither the pinned pod nor the "
               f"original could be created ({exc}; {again}); the pod as read is kept in {kept}",
               priority=ERR, pod=name, pod_namespace=ns, node=node, original_kept=kept)
        return ReplaceFailed(f"pod {ns}/{name} was deleted, the pinned pod was refused ({exc}) and recreating the "
                             f"original failed too ({again})",
                             hint=f"the pod as read is kept in {kept}: create it again from there",
                             details={"original_back": False, "original_kept": kept})
    uid = (back.get("metadata") or {}).get("uid")
    jr.log(Event.PIN_FAILED, f"{ns}/{name}: the pinned pod was refused after the delete ({exc}); the original pod "
           f"was created again (Pending, uid {uid})", priority=ERR, pod=name, pod_namespace=ns, node=node,
           pod_uid=uid, original_kept=kept)
    return ReplaceFailed(f"pod {ns}/{name}: the delete went through but creating it with nodeName {node} was refused "
                         f"({exc}); the original pod was created again as read (Pending, no node, new uid {uid})",
                         hint=f"the pod as read is also kept in {kept}",
                         details={"original_back": True, "original_uid": uid, "original_kept": kept})


def _wait(cl: Any, out: Out, ns: str, name: str, uid: str | None, args: argparse.Namespace) -> int:
    """Poll the pod's status until Running (and Ready with --ready), Failed, or the timeout."""
    from ..proof.options import WAIT_DEFAULT

    timeout = 300.0 if args.wait == WAIT_DEFAULT else float(args.wait)
    end = time.monotonic() + timeout
    state = "pending"
    while time.monotonic() < end:
        pod = cl.pod(name, ns)
        if pod is None or (pod.get("metadata") or {}).get("uid") != uid:
            out.body["wait"] = {"state": "gone"}
            out.warn(f"{PROG}: {ns}/{name} is gone (deleted or replaced) before it ran")
            return EXIT_FAILURE
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase == "Failed":
            out.body["wait"] = {"state": "failed", "reason": status.get("reason"), "message": status.get("message")}
            out.warn(f"{PROG}: the kubelet refused {ns}/{name}: {status.get('reason')}: {status.get('message')}")
            return EXIT_FAILURE
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if phase in ("Running", "Succeeded") and (ready or not args.ready):
            state = "ready" if ready and args.ready else phase.lower()
            out.body["wait"] = {"state": state, "ready": ready}
            out.say(f"  confirmed: {ns}/{name} is {phase}" + (" and Ready" if ready and args.ready else "")
                    + " (the pod's status, as the kubelet reports it)")
            return EXIT_OK
        time.sleep(0.5)
    out.body["wait"] = {"state": "timeout", "seconds": timeout}
    out.warn(f"{PROG}: {ns}/{name} is not Running after {timeout:g} s")
    return EXIT_TIMEOUT

