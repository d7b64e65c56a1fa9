"""``staticpodctl status``: every component (live, parked, drift) and the daemon's health."""

from __future__ import annotations

import argparse
import time

from ..errors import EXIT_OK
from ..termsafe import note_names, one_line, shell_word
from .health import heartbeat
from .loading import build_engine
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
    """Print the directory, the daemon and one row per component; exit 0."""
    eng = build_engine(args, verbs="read")
    st = eng.status()
    note_names(n for r in st["components"] for n in (r["component"], r["file_name"]))
    daemon = heartbeat(eng.layout)
    now = time.time()
    out.say(f"manifest directory: {st['manifest_dir']}")
    out.say(f"daemon: {daemon['detail']}")
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
                 f"({link['reason']}); the kubelet skips it and staticpodd does not record its bytes (remove it)")
    rows = st["components"]
    if not rows:
        out.say("no manifests")
    else:
        out.say(f"{'COMPONENT':<28} {'STATE':<7} {'VER':>4}  {'DIGEST':<12}  NOTE")
        for r in rows:
            notes = []
            if r["stray"] and r["state"] == "live":
                notes.append("STRAY: the kubelet runs this file too")
            if r["drift"] and r["state"] != "missing":
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
            if r.get("unparked_by_hand"):
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
