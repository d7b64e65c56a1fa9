"""Planning the policies: which live files are invalid or stray, and what ``on_invalid`` does.

:class:`PlanMixin` keeps the invalid-live problem list in step with each scan, judges the
directory's current findings (true strays versus broken component manifests), and plans
``on_invalid: restore`` for live files that are invalid now, whether or not they changed in this
pass, with the INVALID_LIVE report texts that say why a file is or is not restored. What
:func:`staticpodd.reconcile.plan_changes` and ``plan_findings`` plan from the changes themselves
is theirs; carrying any plan out is :mod:`staticpodd.daemon.execute`'s.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..journal import Event
from ..layout import component_of
from ..node import fsops
from ..reconcile import (
    Action,
    Plan,
    Report,
    finding_summary,
    invalid_sentence,
    is_directory_finding,
    kubelet_drops,
    over_our_limit_only,
    restore_note,
    stray_by_name,
)
from .options import validate_options
from .problems import _get
from .quiet import QuietMixin

#: ``kind: Pod`` at the top level of YAML, or ``"kind": "Pod"`` in JSON: bytes meant as a Pod
#: manifest (however broken otherwise), not a stray.
_DECLARES_POD = re.compile(rb"^kind:[ \t]*[\"']?Pod[\"']?[ \t]*(?:#.*)?$" rb'|"kind"[ \t]*:[ \t]*"Pod"', re.MULTILINE)



def _policy_note(*, restore: bool, restore_policy: bool, refused: bool, component: str | None, parked: bool,
                 ours_only: int | None, owner: str | None = None) -> str:
    """The end of an INVALID_LIVE message about a file that is invalid now: what ``on_invalid``
    does with it, or why it is not restored (see :meth:`PlanMixin._plan_invalid_files`).
    ``owner``: the file whose component this file's name is (it is then no component)."""
    if restore:
        return restore_note(ours_only)
    if not restore_policy:
        return "; policy on_invalid=alert"
    if not refused:
        return (
            "; not restored: the kubelet runs this file (on_invalid=restore acts only on files the "
            "kubelet refuses)"
        )
    if owner is not None:
        return f"; not restored: its name is the component of {owner}, and staticpodd does not track it"
    if component is None:
        return "; a stray is never restored (on_stray decides)"
    if parked:
        return (
            f"; not restored: {component} is parked, and on_invalid=restore does not apply to a parked "
            "component's live path (putting a version back would end the park)"
        )
    return f"; not restored: no earlier version passes validation (staticpodctl history {component})"

class PlanMixin(QuietMixin):
    """The daemon's own policy planning over the directory's current findings."""

    def _track_changes(self, changes: Iterable[Any]) -> None:
        """Keep the invalid-live problem list in step with the live changes just observed."""
        for ch in changes:
            file_name = _get(ch, "file_name")
            if _get(ch, "location") != "live":
                continue
            if _get(ch, "valid") is False and _get(ch, "kind") != "removed":
                size = self.writer_holds.sizes().get(file_name)
                ours_only = over_our_limit_only(_get(ch, "findings") or [], size)
                refused = kubelet_drops(_get(ch, "findings") or [], size)
                text, _prio = invalid_sentence(
                    file_name, "", ours_only=ours_only, limit=self.config.max_manifest_bytes, refused=refused,
                    relist=self.writer_holds.relist(),
                )
                self.problems.set_invalid(file_name, {
                    "code": "invalid-live",
                    "severity": "error" if refused else "warning",
                    "component": _get(ch, "component"),
                    "path": str(self.layout.live_path(file_name)),
                    "message": text.replace(" (see staticpodctl validate)", ""),
                })
            else:
                self.problems.clear_invalid(file_name)

    @staticmethod
    def _restoring(plan: Plan) -> set[str]:
        """File names a ``restore`` action of ``plan`` puts back."""
        return {a.file_name for a in plan.actions if a.verb == "restore" and a.file_name}

    def _plan_invalid_files(self, found: list[Any], changes: list[Any], plan: Plan) -> Plan:
        """Live files whose *current* contents fail validation (per-file error findings) become
        problems and get the ``on_invalid`` policy, whether or not they changed in this pass.

        A file reported through a Change in this pass is left to :func:`plan_changes` (reported
        and restored there). One that was invalid before the daemon looked (recorded earlier: a
        daemon killed mid-restore, a run under ``alert``, a restore skipped while it was being
        written) is reported as INVALID_LIVE once and, under ``on_invalid: restore``, restored
        when the store has an earlier version to go back to. Never restored: a stray by its name,
        a parked component (a write-back breaks the park, PARK_BROKEN), a file being written, or
        bytes whose restore already failed (no retry loop: a new write is tried again).
        docs/kubelet-contract.md "What a broken file does to a running pod" (the pod dies at the next relist).
        """
        out = Plan()
        mdir = self.layout.manifest_dir
        bad: dict[str, list[Any]] = {}
        for f in found:
            if _get(f, "severity") != "error" or is_directory_finding(f):
                continue
            path = Path(str(_get(f, "path") or ""))
            if path.parent != mdir:
                continue
            bad.setdefault(path.name, []).append(f)
        changed = {_get(c, "file_name") for c in changes}
        busy = self.writer_holds.busy_names()  # being written now: judged after their quiet time
        bad = {name: fs for name, fs in bad.items() if name not in busy}
        for name in self.problems.invalid_names():
            if name not in bad and name not in busy:
                self.problems.clear_invalid(name)
        for name in list(self.backoff.failed_restores):
            if name not in bad:
                self.backoff.forget_restore(name)
        restore_policy = getattr(self.config, "on_invalid", "alert") == "restore"
        restoring = self._restoring(plan)
        observed = self.engine.store.observed() if restore_policy and bad else {}
        sizes = self.writer_holds.sizes()
        limit = self.config.max_manifest_bytes
        for name, fs in bad.items():
            codes = ", ".join(sorted({str(_get(f, "code")) for f in fs}))
            stray = stray_by_name(name)
            # a file named like another file's component (kube-scheduler beside kube-scheduler.yaml)
            # is none: never "restored" with that component's bytes (the scan just listed it)
            owner = None if stray else self.engine.names_taken.get(("live", name))
            component = None if stray or owner else component_of(name)
            new = not self.problems.is_invalid(name)
            ours_only = over_our_limit_only(fs, sizes.get(name))
            refused = kubelet_drops(fs, sizes.get(name))  # only what the kubelet refuses is restored over
            # the same words as when the file changed (plan_changes): codes with their lines
            text, prio = invalid_sentence(name, finding_summary(fs), ours_only=ours_only, limit=limit, refused=refused,
                                          relist=self.writer_holds.relist())
            if new:
                self.problems.set_invalid(name, {
                    "code": "invalid-live",
                    "severity": "error" if refused else "warning",
                    "component": component,
                    "path": str(mdir / name),
                    "message": text,
                })
            if name in changed or name in restoring:
                continue  # plan_changes reported it (and decided about a restore) in this pass
            parked = component is not None and self.engine.store.park_of(component) is not None
            restore = (
                restore_policy
                and refused
                and component is not None
                and not parked
                and self._may_restore(name, component, observed)
            )
            if not (new or restore):
                continue
            policy_note = _policy_note(restore=restore, restore_policy=restore_policy, refused=refused,
                                       component=component, parked=parked, ours_only=ours_only, owner=owner)
            out.reports.append(
                Report(
                    Event.INVALID_LIVE,
                    prio,
                    text + policy_note,
                    {
                        "component": component,
                        "file_name": name,
                        "findings": codes,
                        "policy": "restore" if restore_policy else "alert",
                        "policy_action": "restore" if restore else "none",
                        "location": "live",
                        "size": ours_only,
                        "kubelet": "refuses" if refused else "accepts",
                    },
                )
            )
            if restore:
                assert component is not None
                out.actions.append(
                    Action("restore", component, f"on_invalid=restore: {name} fails validation", file_name=name)
                )
        return out

    def _may_restore(self, name: str, component: str, observed: dict[str, Any]) -> bool:
        """Whether ``on_invalid: restore`` should put back an earlier version of a live file that
        is invalid now (see :meth:`_plan_invalid_files`)."""
        store = self.engine.store
        if store.park_of(component) is not None:
            return False
        obs = observed.get(f"live/{name}")
        digest = _get(obs, "digest")
        if not digest:
            return False
        failed = self.backoff.failed_restores.get(name)
        if failed is not None and failed == (digest, frozenset(self.engine.live_names())):
            # the same bytes in the same directory: tried again once its back-off is over (the
            # cause may be gone: a full disk, a blocked staging directory), never on every pass
            at = self.backoff.due(f"restore:{name}", 0.0)
            if time.time() < at:
                self.retries.no_later_than(name, time.monotonic() + (at - time.time()))
                return False
        # only when there is something to go back to: a version that passes validation (else the
        # engine refuses with Conflict, and a true stray would be "restored" instead of quarantined)
        seen = {digest}
        for v in reversed(store.history(component)):  # newest first, as restore_last_good looks
            if v.digest in seen:
                continue
            seen.add(v.digest)
            if self._digest_valid(v.digest, v.file_name):
                return True
        return False

    def _true_findings(self, found: list[Any], plan: Plan) -> list[Any]:
        """The directory findings, minus "stray" findings about a component's manifest.

        The validator calls any file that does not decode to a complete Pod "stray file: not a
        Pod manifest". For the daemon, a true stray is a name that is stray by itself
        (``x.yaml.bak``, ``x~``, ``4913``, ``notes.txt``:
        ``staticpodd.validate.directory.stray_reason``), or a name without a manifest suffix
        (``README``) that is no known component, or that is another file's (``kube-scheduler``
        beside ``kube-scheduler.yaml``: ``Engine.name_owner``). A manifest-named file that fails to decode
        (an empty or truncated ``etcd.yaml``, ``kind: Pod`` alone, a Deployment) is an invalid
        manifest: reported as INVALID_LIVE and restored under ``on_invalid: restore``, never
        quarantined by ``on_stray``. A file restored in this very pass is never a stray.
        """
        restoring = self._restoring(plan)
        out = []
        for f in found:
            if not is_directory_finding(f):
                continue
            if _get(f, "code") == "stray":
                name = os.path.basename(str(_get(f, "path") or "").rstrip("/"))
                if name in restoring:
                    continue
                if not stray_by_name(name) and (component_of(name) != name or self._is_component_file(name)):
                    continue
            out.append(f)
        return out

    def _is_component_file(self, name: str) -> bool:
        """True when live file ``name`` (no manifest suffix) is a component's manifest: its bytes
        declare ``kind: Pod``, or, unless its name is another file's component, the component is
        parked, was changed by a staticpodd verb, or has a recorded version that passes
        validation (see :meth:`_true_findings`)."""
        try:
            with fsops.open_for_reading(self.layout.live_path(name)) as fh:
                head = fh.read(1 << 20) if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) else b""
        except OSError:
            head = b""
        if _DECLARES_POD.search(head):
            return True
        if ("live", name) in self.engine.names_taken:
            return False  # its name is another file's component (that one may be parked): it is none
        component = component_of(name)
        store = self.engine.store
        if store.park_of(component) is not None:
            return True
        history = [v for v in store.history(component, limit=50) if v.file_name == name]
        if any(v.action != "external" for v in history):
            return True
        return any(self._digest_valid(v.digest, name) for v in reversed(history))

    def _digest_valid(self, digest: str, name: str) -> bool:
        """Whether recorded bytes ``digest`` pass validation (memoised for the daemon's life)."""
        if digest not in self._valid_digests:
            try:
                from ..validate import has_errors, validate_bytes  # type: ignore[attr-defined]
            except ImportError:
                return False
            data = self.engine.store.data(digest)
            findings = validate_bytes(data, str(self.layout.live_path(name)), self._validate_options())
            self._valid_digests[digest] = not has_errors(findings)
        return self._valid_digests[digest]

    def _directory_findings(self) -> list[Any]:
        """Directory-level findings from the validator (strays, duplicates, subdirectories,
        symlinks, loose modes/owners, and each live file's own findings). [] when the validator
        is not available.

        An unchanged directory (same names, stats and recorded digests, same options, validator
        and host: :func:`staticpodd.daemon.findings.findings_key`) has the same findings: they
        come from memory, or after a restart from the store, and nothing is parsed or validated
       . Findings made while nothing moved are kept in both. Otherwise the directory is
        judged again, but each file whose bytes did not change keeps its own findings from the
        last pass (:class:`staticpodd.validate.podfacts.FileMemo`): an edit to one file of 1,000
        decodes and validates that one.
        """
        try:
            from ..validate import validate_directory  # type: ignore[attr-defined]
        except ImportError:
            return []
        if not self.layout.manifest_dir.is_dir():
            return []
        from ..engine.fsfacts import is_utf8_name
        from .findings import findings_key

        options = self._validate_options()
        digests = {o.file_name: o.digest for o in self.engine.store.observed().values() if o.location == "live"}
        key = findings_key(self.layout.manifest_dir, digests, options)
        known = self.findings_cache.known(key)
        if known is not None:
            return list(known)
        # A file whose name is not valid UTF-8 cannot be tracked, restored or quarantined by name
        # (the store keys by name as text); Engine.scan reports it once (name-not-utf8) and
        # `staticpodctl status`/`doctor` name it. Its other findings stay with `staticpodctl validate`.
        memo = self.findings_cache.file_memo()
        found = [f for f in validate_directory(self.layout.manifest_dir, options, memo)
                 if is_utf8_name(os.path.basename(str(_get(f, "path") or "")))]
        if memo.validated:
            self._trim_due = True  # files were parsed: give that memory back when idle
        if key is not None and key == findings_key(self.layout.manifest_dir, digests, options):
            self.findings_cache.keep(key, found)  # nothing moved while we validated
        return list(found)

    def _validate_options(self) -> Any:
        return validate_options(self.config)
