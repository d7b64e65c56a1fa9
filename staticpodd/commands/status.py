"""``staticpodctl status``: every component (live, parked, drift) and the daemon's health."""

from __future__ import annotations

import argparse
import re
import time

from ..errors import EXIT_OK
from ..termsafe import note_names, one_line, shell_word
from .health import heartbeat
from .loading import build_engine, build_layout
from .output import PROG, Out, ago

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _local_pins(layout: Any) -> list[dict[str, Any]]:
    """The pods ``staticpodctl pin`` placed from this node (:func:`staticpodd.pin.local.list_local_pins`);
    the module is imported only when its directory exists (status's start-up cost)."""
    import os

    if not os.path.isdir(os.path.join(str(layout.state_dir), "pins")):
        return []
    from ..pin.local import list_local_pins

    return list_local_pins(layout.state_dir)


def cmd_status(args: argparse.Namespace, out: Out) -> int:
    """Print the directory, the daemon and one row per component; exit 0. With ``--cluster``:
    the cluster view instead (:func:`cmd_status_cluster`)."""
    if getattr(args, "cluster", False):
        return cmd_status_cluster(args, out)
    eng = build_engine(args, verbs="read")
    st = eng.status()
    note_names(n for r in st["components"] for n in (r["component"], r["file_name"]))
    daemon = heartbeat(eng.layout)
    now = time.time()
    out.say(f"manifest directory: {st['manifest_dir']}")
    out.say(f"daemon: {daemon['detail']}")
    view = daemon.get("cluster") or {}
    if view.get("enabled"):
        waiting = f"; {view['waiting']} Event(s) waiting" if view.get("waiting") else ""
        why = f"; NOT PUBLISHING: {view['error']}" if view.get("error") else ""
        out.say(f"cluster view: publishing to Node {view.get('node') or '?'}{waiting}{why}")
    for prob in (daemon.get("problems") or []) if daemon["running"] else []:
        out.say(f"  problem: {prob if isinstance(prob, str) else prob.get('message', prob)}")
    if st["interrupted"]:
        out.say(f"interrupted operations: {st['interrupted']} (run: staticpodctl recover)")
    for name in st.get("untrackable", []):
        out.warn(f"{PROG}: warning: {name}: the file name is not valid UTF-8; the kubelet reads it but "
                 "staticpodd cannot track it (rename it, e.g. with: mv -- <name> <utf-8-name>)")
    for taken in st.get("names_taken", []):
        where = "the kubelet reads it but" if taken["location"] == "live" else "a file in the parked directory:"
        out.warn(f"{PROG}: warning: {taken['file_name']}: {taken['reason']}; {where} staticpodd does not track it "
                 f"({taken['hint']})")
    for link in st.get("links_not_recorded", []):
        out.warn(f"{PROG}: warning: {link['file_name']}: a symlink to a file that is not a pod manifest "
                 f"({link['reason']}); the kubelet follows it and refuses it at every relist, and staticpodd "
                 "does not record its bytes (remove it)")
    rows = st["components"]
    if not rows:
        out.say("no manifests")
    else:
        out.say(f"{'COMPONENT':<28} {'STATE':<7} {'VER':>4}  {'DIGEST':<12}  NOTE")
        for r in rows:
            notes = []
            if r["stray"] and r["state"] == "live":
                notes.append("STRAY: the kubelet runs this file too")
            if r.get("interrupted"):  # the drift and "by hand" below are that operation's half-done work
                notes.append(f"INTERRUPTED: a {r['interrupted']} stopped half-way; run `{PROG} recover`")
            elif r["drift"] and r["state"] != "missing":
                notes.append("untracked: not recorded yet" if r["version"] is None
                             else "drift: changed by someone else")
            if r.get("park_broken"):
                notes.append("PARK BROKEN: live again while parked")
            if r["state"] == "removed" and r["stray"]:
                # a leftover that went is the good outcome: putting it back would make the kubelet
                # read (and perhaps run the pod from) the leftover again
                notes.append("removed stray: gone from the directory, nothing to do")
            elif r["state"] == "removed":
                notes.append(f"not in the directory any more; `{PROG} rollback {shell_word(r['component'])}` puts "
                             f"version {r['version']} back")
            if r.get("unparked_by_hand") and not r.get("interrupted"):
                notes.append(f"moved back by hand: the kubelet runs it; `{PROG} unpark {shell_word(r['component'])}` "
                             "closes the park record")
            p = r["parked"]
            if p:
                from datetime import datetime

                since = datetime.strptime(p["since"], "%Y-%m-%dT%H:%M:%SZ").timestamp() - time.timezone
                text = f"parked {ago(now - since)} ago by {p['actor']}"
                if p["until"]:
                    until = datetime.strptime(p["until"], "%Y-%m-%dT%H:%M:%SZ").timestamp() - time.timezone
                    left = until - now
                    text += f", until {p['until']} (" + (f"{ago(left)} left" if left > 0 else "OVERDUE") + ")"
                if p["reason"]:
                    text += f": {one_line(p['reason'])}"  # stored before reasons were checked
                if r["state"] == "missing":
                    text = "PARKED COPY MISSING; " + text
                notes.append(text)
            ver = "-" if r["version"] is None else str(r["version"])
            digest = (r["digest"] or "-")[:12]
            out.say(f"{r['component']:<28} {r['state']:<7} {ver:>4}  {digest:<12}  {'; '.join(notes)}")
        from .doctor import KUBEADM_COMPONENTS, KUBEADM_UPGRADE_WHY

        held = [r["component"] for r in st["components"]
                if r["parked"] and r["state"] == "parked" and r["component"] in KUBEADM_COMPONENTS]
        if held:
            out.say(f"note: kubeadm upgrade refuses while {', '.join(held)} {'is' if len(held) == 1 else 'are'} "
                    f"parked ({KUBEADM_UPGRADE_WHY}); unpark first")
    pins = _local_pins(eng.layout)
    if pins:
        out.say("pods pinned to a node by hand from this node (bare: no controller recreates them if the node dies; "
                "`kubectl drain` refuses them without --force):")
        for p in pins:
            warned = f"; walked around: {', '.join(p['warnings'])}" if p.get("warnings") else ""
            out.say(f"  {p['namespace']}/{p['name']} on node {p.get('node')} since {p.get('pinned_at')} by "
                    f"{p.get('actor')}{warned}")
    out.finish(True, **st, daemon=daemon, pinned=pins)
    return EXIT_OK


def cluster_kubeconfig(args: argparse.Namespace) -> str:
    """The kubeconfig ``status --cluster`` reads with: ``--kubeconfig``, else the first of
    ``$KUBECONFIG``, else ``~/.kube/config`` when it exists, else kubeadm's ``admin.conf`` under
    --root. Raises Untrusted when another user could have written it, StaticpodError when it is
    missing."""
    import os
    from pathlib import Path

    from ..errors import StaticpodError
    from ..layout import under_root
    from ..node.trust import trusted_kubeconfig

    path = getattr(args, "kubeconfig", None)
    if not path and os.environ.get("KUBECONFIG"):
        path = os.environ["KUBECONFIG"].split(":")[0]
    if not path and os.path.exists(os.path.expanduser("~/.kube/config")):
        path = os.path.expanduser("~/.kube/config")
    if not path:
        path = str(under_root(build_layout(args).root, "/etc/kubernetes/admin.conf"))
    try:
        trusted_kubeconfig(Path(path), "kubeconfig", parents_up_to=Path("/"))
    except FileNotFoundError:
        raise StaticpodError(f"{path}: no such kubeconfig",
                             hint="pass one that may list Nodes with --kubeconfig") from None
    return path


#: A namespace (RFC 1123 label) and a pod name (RFC 1123 subdomain), as the API server validates them.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def cmd_status_cluster(args: argparse.Namespace, out: Out) -> int:
    """``status --cluster``: every parked component and pinned pod on every Node, from the
    annotations each node's staticpodd keeps (:mod:`staticpodd.cluster.view`). Read-only; exit 0
    (also when something is parked: ``--json``'s ``parked`` list is for scripts), 1 when the
    API server cannot be asked."""
    from ..cluster.client import Api, ClusterError
    from ..cluster.view import node_view
    from ..termsafe import shown_name

    kubeconfig = cluster_kubeconfig(args)
    api = Api(kubeconfig, timeout=10.0)
    nodes = [node_view(n) for n in api.nodes()]
    # the Node's own name last: an item of an annotation cannot say it is on another node
    parked = [{**p, "node": v["node"]} for v in nodes for p in v["parked"]]
    pinned = [{**p, "annotated_on": v["node"]} for v in nodes for p in v["pinned"]]
    for p in pinned:  # is the pinned pod still there (same uid)? only when we may look
        # only names a pod can have: ".." would make the client ask for another path (urllib3
        # removes dot segments: namespace ".." and name ".." read /api/v1/)
        if not _DNS_LABEL.fullmatch(str(p.get("namespace") or "")) or \
                not _DNS_SUBDOMAIN.fullmatch(str(p.get("name") or "")):
            continue
        try:
            pod = api.pod(str(p["name"]), str(p["namespace"]))
        except ClusterError:
            continue
        p["present"] = pod is not None and (not p.get("uid") or (pod.get("metadata") or {}).get("uid") == p["uid"])
    problems = [{"node": v["node"], "problem": msg} for v in nodes for msg in v["problems"]]
    out.body.update(nodes=len(nodes), parked=parked, pinned=pinned, problems=problems, kubeconfig=kubeconfig)
    out.say(f"cluster: {len(nodes)} node(s), read with {kubeconfig}")
    if not parked:
        out.say("parked: nothing, on any node")
    else:
        out.say(f"{'NODE':<24} {'COMPONENT':<26} {'BY':<12} {'SINCE':<21} {'UNTIL':<21} REASON")
        for p in parked:
            comp = f"{shown_name(p['component'] or '?')}{' (BROKEN)' if p['broken'] else ''}"
            out.say(f"{shown_name(p['node']):<24} {comp:<26} {shown_name(p['by'] or '-'):<12} "
                    f"{shown_name(p['since'] or '-'):<21} {shown_name(p['until'] or '-'):<21} "
                    f"{shown_name(p['reason'] or '')}")
    if pinned:
        out.say("pinned by hand (bare pods: nothing recreates them; kubectl drain refuses them without --force):")
        out.say(f"{'NODE':<24} {'POD':<40} {'BY':<12} SINCE")
        for p in pinned:
            gone = "  (gone)" if p.get("present") is False else ""
            pod_text = f"{shown_name(p['namespace'] or '?')}/{shown_name(p['name'] or '?')}"
            out.say(f"{shown_name(p['node'] or p['annotated_on']):<24} {pod_text:<40} {shown_name(p['by'] or '-'):<12} "
                    f"{shown_name(p['since'] or '-')}{gone}")
    for prob in problems:
        out.warn(f"{PROG}: warning: node {shown_name(prob['node'])}: {prob['problem']}")
    out.finish(True)
    return EXIT_OK
