"""``staticpodctl doctor``: everything that can be wrong on the node, counted as the daemon counts it."""

from __future__ import annotations

import argparse
import os
import time

from ..errors import EXIT_FAILURE, EXIT_OK
from ..termsafe import shell_word
from .health import heartbeat
from .loading import build_engine, build_layout, config_problems
from .output import PROG, Out

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any



#: kubeadm's control-plane components: a park of one makes ``kubeadm upgrade`` refuse.
KUBEADM_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: Why, as a real kubeadm v1.37.2 upgrade showed it (tests/controlplane/test_cp_upgrade.py).
KUBEADM_UPGRADE_WHY = ("its preflight finds the manifest missing and its health-check Job needs a scheduler; "
                       "with those ignored it waits out timeouts.upgradeManifests and changes nothing")

def _base(path: Any) -> str | None:
    return os.path.basename(str(path).rstrip("/")) if path else None


def _finding_problem_keys(findings: Any) -> dict[tuple[str | None, str | None], str]:
    """``(code, file name)`` per problem the daemon would count for these findings: an invalid
    file is one ``invalid-live`` problem; a directory-level finding of severity error or warning
    is one problem (a manifest-named file that is no Pod counts as invalid, not as a stray).
    Returns ``{key: "error" | "warning"}``."""
    from ..layout import component_of
    from ..reconcile import is_directory_finding, stray_by_name

    keys: dict[tuple[str | None, str | None], str] = {}
    for f in findings:
        name = _base(f.path)
        if is_directory_finding(f):
            if f.code == "stray" and name and not stray_by_name(name) and component_of(name) != name:
                keys[("invalid-live", name)] = "error"
            elif f.severity in ("error", "warning"):
                keys[(f.code, name)] = "error" if f.severity == "error" or keys.get((f.code, name)) == "error" \
                    else "warning"
        elif f.severity == "error":
            keys[("invalid-live", name)] = "error"
    return keys


#: Heartbeat problem codes about the state of the directory, the parks and the store, which
#: doctor looks at itself on every run (the validator's finding codes count too): a heartbeat
#: problem of these that doctor's own look does not find was fixed after the daemon's last pass.
_RECHECKED = frozenset({"invalid-live", "park-broken", "name-taken", "manifest-dir-missing", "parked-copy-missing",
                        "park-bypassed", "park-overdue", "drift", "symlink-not-recorded", "name-not-utf8"})


def _rechecked(problem: dict[str, Any], parked_now: set[str]) -> bool:
    """Whether heartbeat ``problem`` is about something doctor has just observed itself, so its
    absence from doctor's own problems means it is gone: a directory finding or one of
    :data:`_RECHECKED`, or a failed deadline unpark of a component that is not parked any more."""
    from ..validate.codes import CODES

    code = str(problem.get("code") or "")
    if code == "park-expired-unpark-failed":
        return str(problem.get("component") or "") not in parked_now
    return code in _RECHECKED or code in CODES


def _unwritable(layout: Any) -> list[tuple[str, str, str]]:
    """``(code, message, path)`` for each place staticpodd must write but cannot: the manifest
    directory (restores, quarantines, parks, unparks fail with EROFS/EACCES), the version store
    and the run directory (the lock). A read-only mount is told apart from missing permission."""
    from ..node.sandbox import read_only_mount

    found: list[tuple[str, str, str]] = []
    places = (
        ("manifest-dir", layout.manifest_dir, "the manifest directory",
         "apply, park, unpark, restore and quarantine fail"),
        ("store", layout.state_dir, "the version store's directory", "no version can be recorded"),
        ("run-dir", layout.run_dir, "the run directory (lock, heartbeat)", "no verb can take the lock"),
    )
    for code, path, what, effect in places:
        if not path.exists():
            continue
        if read_only_mount(path):
            found.append((f"{code}-read-only", f"{what} {path} is on a read-only mount: {effect}", str(path)))
        elif not os.access(path, os.W_OK):
            found.append((f"{code}-not-writable", f"{what} {path} is not writable for uid {os.geteuid()}: {effect}",
                          str(path)))
    db = layout.db_path
    if db.exists() and not read_only_mount(db) and not os.access(db, os.W_OK):
        found.append(("store-not-writable", f"the version store {db} is not writable for uid {os.geteuid()}: "
                      "no version can be recorded", str(db)))
    return found


def _unit_enabled_but_down(layout: Any) -> str | None:
    """``staticpodd.service`` when doctor looks at this machine's own root (``--root /``), systemd
    runs it and the unit is enabled (so the daemon is meant to run), else None. Never raises."""
    import shutil
    import subprocess

    unit = "staticpodd.service"
    if str(layout.root) != "/" or shutil.which("systemctl") is None or not os.path.isdir("/run/systemd/system"):
        return None
    try:
        r = subprocess.run(["systemctl", "is-enabled", unit], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return unit if r.stdout.strip() in ("enabled", "enabled-runtime") else None


def _kept_findings(eng: Any) -> list[Any] | None:
    """The directory findings the daemon kept in the version store for the manifest directory
    exactly as it is now (:mod:`staticpodd.daemon.findings`: the key covers every entry's stat
    and recorded digest, the validation options, the validator's code and the host), so doctor
    does not decode and validate what the daemon already judged (a 9.5 MB pod: 4 s and 400 MB).
    None when none are kept under that key (doctor validates), or when a name is not UTF-8 (the
    daemon leaves such files' findings out; doctor reports them)."""
    from ..engine.fsfacts import is_utf8_name
    from ..errors import StaticpodError

    mdir = eng.layout.manifest_dir
    if not eng.layout.db_path.exists():
        return None
    try:
        if not all(is_utf8_name(n) for n in os.listdir(mdir)):
            return None
        from ..engine.kept import decode, findings_key

        digests = {o.file_name: o.digest for o in eng.store.observed().values() if o.location == "live"}
        key = findings_key(mdir, digests, eng.validate_options())
        kept = eng.store.dir_findings(str(mdir), key) if key is not None else None
    except (OSError, StaticpodError):
        return None  # a cache: validate, and report what that finds
    return decode(kept) if kept is not None else None


def _component_problems(st: dict[str, Any], problem: Callable[..., None]) -> None:
    """Per recorded component: a broken or missing park, a park that blocks kubeadm upgrade,
    a park past its deadline, and drift from the newest recorded version."""
    now = time.time()
    for r in st["components"]:
        p = r["parked"]
        if r.get("park_broken"):
            problem("park-broken", f"{r['component']} is parked but {r['file_name']} is live again: "
                    f"the kubelet runs it (keep the live file: {PROG} unpark {shell_word(r['component'])} --discard)",
                    component=r["component"])
        elif p and r["component"] in KUBEADM_COMPONENTS and r["state"] == "parked":
            problem("parked-blocks-kubeadm-upgrade", f"{r['component']} is parked: kubeadm upgrade refuses until it "
                    f"is unparked ({KUBEADM_UPGRADE_WHY}; {PROG} unpark {shell_word(r['component'])})",
                    component=r["component"], severity="warning")
        if r["state"] == "missing":
            problem("parked-copy-missing", f"{r['component']} is recorded as parked but its parked copy is gone "
                    f"(put it back, still parked, with: {PROG} rollback {shell_word(r['component'])})",
                    component=r["component"])
        if p and p.get("until"):
            from datetime import datetime, timezone

            until = datetime.strptime(p["until"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
            if until < now - 60:
                problem("park-overdue", f"{r['component']} should have been unparked at {p['until']} "
                        "(is staticpodd running?)", component=r["component"])
        if r["drift"] and r["version"] is not None and r["state"] != "missing":
            problem("drift", f"{r['file_name']} differs from its newest recorded version "
                    f"(see: {PROG} diff {shell_word(r['component'])})", component=r["component"])


def _file_name_problems(eng: Any, st: dict[str, Any], problem: Callable[..., None]) -> None:
    """Files staticpodd cannot track (a name not UTF-8, a name taken, a symlink it does not
    record) and parks another file bypasses by defining the same pod."""
    for name in st.get("untrackable", []):
        problem("name-not-utf8", f"{name}: the file name is not valid UTF-8; the kubelet reads it but staticpodd "
                "cannot track its versions (rename it)", path=name)
    for taken in st.get("names_taken", []):
        where = "the kubelet reads it but" if taken["location"] == "live" else "a file in the parked directory:"
        base = eng.layout.manifest_dir if taken["location"] == "live" else eng.layout.parked_dir
        problem("name-taken", f"{taken['file_name']}: {taken['reason']}; {where} staticpodd does not track its "
                f"versions ({taken['hint']})", path=str(base / taken["file_name"]), severity="warning")
    for link in st.get("links_not_recorded", []):
        problem("symlink-not-recorded", f"{link['file_name']}: a symlink to a file that is not a pod manifest "
                f"({link['reason']}); the kubelet follows it and refuses it at every relist; its bytes are not "
                "recorded (remove the link)",
                path=str(eng.layout.manifest_dir / link["file_name"]))
    taken_live = {t["file_name"] for t in st.get("names_taken", []) if t["location"] == "live"}
    for comp, other in eng.parks_bypassed():
        fix = f"move {other} out of the directory too" if other in taken_live else f"park or move {other} too"
        problem("park-bypassed", f"{comp} is parked, but {other} defines the same pod: the kubelet runs it anyway "
                f"({fix})", component=comp, path=str(eng.layout.manifest_dir / other))


def _merge_daemon_problems(
    daemon: dict[str, Any],
    findings: Any,
    problems: list[dict[str, Any]],
    st: dict[str, Any],
    out: Out,
    problem: Callable[..., None],
) -> tuple[dict[tuple[Any, str | None], str], list[dict[str, Any]]]:
    """Count the problems as the daemon counts its heartbeat's, and add the daemon's own.

    Returns ``(seen, earlier)``: ``{(code, file name): "error" | "warning"}`` for every problem
    counted, and the heartbeat's problems that doctor's own look no longer finds.
    """
    seen = _finding_problem_keys(findings)
    seen.update({(p["code"], _base(p.get("path"))): "warning" if p.get("severity") == "warning" else "error"
                 for p in problems})
    parked_now = {r["component"] for r in st["components"] if r["parked"]}
    earlier: list[dict[str, Any]] = []  # the heartbeat's problems that doctor's own look no longer finds
    for p in daemon.get("problems") or []:
        key = (p.get("code"), _base(p.get("path")))
        if key in seen:
            continue
        if _rechecked(p, parked_now):
            # about what doctor has just looked at itself, and not there now: the heartbeat is
            # older than this look (fixed since the daemon's last pass), so it is no problem now
            out.say(f"note: {p.get('message')} (reported by the daemon earlier; not seen now)")
            earlier.append(p)
            continue
        seen[key] = "warning" if p.get("severity") == "warning" else "error"
        problem(str(p.get("code") or "daemon-problem"), f"{p.get('message')} (reported by the daemon)",
                path=p.get("path"), severity=p.get("severity"), source="daemon")
    return seen, earlier


def cmd_doctor(args: argparse.Namespace, out: Out) -> int:
    """Everything that can be wrong, in one look: the directory as the kubelet reads it, parks
    (broken, parked copy missing, overdue), drift, interrupted operations, the configuration,
    the version store, what cannot be written (a read-only manifest directory, store or run
    directory) and the daemon: down while its unit is enabled, stuck, or reporting problems of
    its own (its heartbeat's problems are listed too, once each, so doctor's count and the
    daemon's agree). Exit 0 when nothing is wrong, 1 otherwise."""
    from ..node.trust import layout_problems
    from ..validate import validate_directory

    # Before the engine opens (and tightens) anything: what another user could write, or read,
    # is reported as it was found.
    trust_problems = layout_problems(build_layout(args))
    eng = build_engine(args)
    eng.check_manifest_dir()  # a missing directory is the one problem doctor cannot look past
    unwritable = _unwritable(eng.layout)  # before the store is opened: a read-only one is named
    eng.config  # load it now, so an invalid configuration is reported below  # noqa: B018
    findings = _kept_findings(eng)
    if findings is None:
        findings = validate_directory(eng.layout.manifest_dir, eng.validate_options())
    st = eng.status()
    daemon = heartbeat(eng.layout)
    problems: list[dict[str, Any]] = []

    def problem(code: str, message: str, **more: Any) -> None:
        problems.append({"code": code, "message": message, **more})
        out.say(f"problem[{code}]: {message}")

    for f in findings:
        out.say(f.format())
    errors = sum(1 for f in findings if f.severity == "error")
    for code, message, path in unwritable + trust_problems:
        problem(code, message, path=path)
    _component_problems(st, problem)
    _file_name_problems(eng, st, problem)
    if st["interrupted"]:
        problem("interrupted", f"{st['interrupted']} interrupted operation(s) (run: {PROG} recover)")
    for exc in config_problems:
        problem("config-invalid", str(exc))
    from ..journal import journal_status

    journal_ok, journal_detail = journal_status()
    out.say(f"journal: {journal_detail}")
    if not journal_ok:
        problem("journal-unreachable", journal_detail)
    out.say(f"daemon: {daemon['detail']}")
    if daemon.get("stuck"):  # its own problems (an invalid manifest …) are reported above, from the directory
        problem("daemon-unhealthy", daemon["detail"])  # not running at all is allowed: the CLI works alone
    elif not daemon.get("running"):
        unit = _unit_enabled_but_down(eng.layout)
        if unit:  # ... unless systemd is meant to run it
            problem("daemon-down", f"{unit} is enabled but the daemon is not running ({daemon['detail']}): nothing "
                    "records edits, ends parks at their deadline or applies the policies (journalctl -u "
                    f"{unit}; systemctl start {unit})")
    # Counted as the daemon counts its heartbeat's problems (staticpodd.daemon.Daemon.problems),
    # so that doctor and `status` agree: one per invalid file (however many findings it has),
    # one per directory-level finding of severity error or warning (a stray, a duplicate pod ...),
    # one per problem of doctor's own; then every problem the running daemon reports that is not
    # among them yet (a failed write, a lock timeout ...), listed here once each.
    seen, earlier = _merge_daemon_problems(daemon, findings, problems, st, out, problem)
    integrity = "ok"
    if eng.layout.db_path.exists():
        integrity = eng.store._db.execute("PRAGMA integrity_check").fetchone()[0]
    out.say(f"version store: {integrity}")
    if integrity != "ok":
        problem("store-corrupt", f"version store integrity check: {integrity}")
        seen[("store-corrupt", _base(str(eng.layout.db_path)))] = "error"  # counted, and exit 1
    # Exit 1 for any problem of severity error; warnings alone (a stray, a loose mode) are counted
    # and shown but exit 0, as before.
    ok = errors == 0 and "error" not in seen.values()
    if not seen:
        out.say("no problems found")
    else:
        out.say(f"{len(seen)} problem(s) found" + (" (warnings only)" if ok else ""))
    out.finish(ok, findings=[f.to_dict() for f in findings], problems=problems, daemon=daemon,
               reported_earlier=earlier, store=integrity,
               interrupted=st["interrupted"], journal={"ok": journal_ok, "detail": journal_detail})
    return EXIT_OK if ok else EXIT_FAILURE
