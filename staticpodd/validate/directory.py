"""Layer 7: the manifest directory as the kubelet reads it.

Source: docs/kubelet-contract.md "Which files are pods", "Duplicate names across files", "What the kubelet
refuses" (host ports); upstream pkg/kubelet/config/file.go (``extractFromDir``: glob ``[^.]*``,
no recursion, symlinks followed, non-regular entries skipped) and the scheduler's NodePorts
predicate the kubelet runs at admission (pkg/kubelet/lifecycle/predicate.go).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from staticpodd.manifest.hostclaims import admission_clash, claims_clash
from staticpodd.validate.context import Options
from staticpodd.validate.findings import Finding, make
from staticpodd.validate.podfacts import FileMemo, PodFacts, is_pod_doc, pod_facts
from staticpodd.validate.verdict import kubelet_refuses

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

ValidateFn = Callable[[bytes, str, Options], "tuple[Any, dict, list[Finding]]"]

_STRAY = re.compile(
    r"(~|#|\.(bak|backup|orig|old|save|sav|swp|swo|swn|tmp|temp|rej|dist|new|prev|disabled|off|"
    r"puppet-bak|dpkg-old|dpkg-new|dpkg-dist|dpkg-bak|dpkg-tmp|rpmnew|rpmsave|rpmorig|ucf-old|ucf-new|ucf-dist)"
    r"[\w.@:-]*|\.tmp\w*|\d{8}-\d+-\w+|\.\d+\.\d{4}-\d\d-\d\d@[\d:]+~?)$",
    re.IGNORECASE,
)
_MANIFEST_EXT = re.compile(r"\.(ya?ml|json|manifest)$", re.IGNORECASE)


def stray_reason(name: str) -> str | None:
    """Why a non-dot file name looks like a leftover rather than a manifest, or None.

    Editor backups (``x~``, ``#x#``, vim's probe ``4913``, ``.swp``), backup copies (``.bak``,
    ``.backup``, ``.orig``, ``.old``), package-manager and config-management leftovers
    (``.dpkg-old``, ``.rpmnew``, Puppet's ``x20240101-123-abc``, Ansible's ``x.1234.<date>@<time>~``),
    temp files (``.tmp1234``), and scripts or documents (any other extension).
    Source: docs/kubelet-contract.md "Which files are pods" (no extension filter).
    """
    from staticpodd.manifest.cmpatterns import identify

    left = identify(name)
    if left is not None and left.pattern.kubelet_reads:
        of = f" of {left.target}" if left.target else ""
        tool = left.pattern.tool.capitalize()
        return f"{'an' if tool[0] in 'AEIOU' else 'a'} {tool} {left.pattern.kind}{of}"
    if name.isdigit():
        return "an editor's probe/temp file (vim writes '4913')"
    if name.startswith("#") or _STRAY.search(name):
        return "a backup, editor or temp file"
    base, dot, ext = name.rpartition(".")
    if dot and base and not _MANIFEST_EXT.search(name):
        return f"not a manifest by its name (.{ext})"
    return None


def _shell_word(name: str) -> str:
    """``name`` as one shell word (quoted only when it needs it)."""
    import shlex

    return shlex.quote(name)


def _stray_hint(name: str) -> str:
    """What to do about a stray: the tool-specific fix for a known config-management leftover
    (Ansible ``backup: yes``, Puppet's non-dot temp files; :mod:`staticpodd.manifest.cmpatterns`)."""
    from staticpodd.manifest.cmpatterns import identify

    left = identify(name)
    hint = (f"park it (staticpodctl park {_shell_word(name)}, then staticpodctl unpark --discard "
            f"{_shell_word(name)}: the bytes are kept in history), or move it out of the directory")
    if left is not None and left.pattern.kubelet_reads:
        hint += f"; then stop it coming back: {left.pattern.advice}"
    return hint


def read_file_findings(p: Path, display: str, options: Options, validate: ValidateFn) -> list[Finding]:
    """Validate one file given by path (any name). Raises OSError when it cannot be opened/read.

    A non-regular file (FIFO, device) is an error finding; a file over the kubelet's 10 MiB is
    refused without reading it all; one over ``options.max_bytes`` but within 10 MiB is read and
    judged whole (``too-large`` is then staticpodd's strictness: the kubelet runs it).
    """
    return _read_one(p, display, options, validate)[2]


def _read_one(p: Path, display: str, options: Options, validate: ValidateFn) -> tuple[Any, dict, list[Finding]]:
    data, unread = _read_bytes(p, display, options)
    if data is None:
        return None, {}, unread
    return validate(data, display, options)


def _read_bytes(p: Path, display: str, options: Options) -> tuple[bytes | None, list[Finding]]:
    """The bytes of the file at ``p`` as the kubelet reads them, or (None, findings) for a file
    judged without them: not a regular file, or over the kubelet's 10 MiB. Raises OSError
    (IsADirectoryError for a directory).

    A FIFO, socket or device is never read (a FIFO would block until a writer came): it is
    stat'ed first, and opened without blocking and fstat'ed again in case it was swapped in
    meanwhile. The kubelet reads regular files only and skips any other entry
    (pkg/kubelet/config/file.go; docs/kubelet-contract.md "Which files are pods")."""
    from staticpodd.node.fsops import open_for_reading

    not_regular = [Finding("not-regular-file", "error", display, None, None, None,
                           "not a regular file (a FIFO, socket or device): the kubelet reads regular files only "
                           "and skips it", "a manifest must be a regular file")]
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        return None, not_regular
    with open_for_reading(p) as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(p))
        if not stat.S_ISREG(st.st_mode):
            return None, not_regular
        from staticpodd.manifest.decoded import KUBELET_MAX_BYTES

        if st.st_size > KUBELET_MAX_BYTES:
            # over the kubelet's own limit: refused by size without reading it all; the message
            # gives the real size (fstat)
            return None, [_too_large_finding(st.st_size, display, options)]
        # up to 10 MiB the kubelet reads the whole file: so do we (over max_bytes it is our strictness)
        data = fh.read(KUBELET_MAX_BYTES + 1)
        if len(data) > KUBELET_MAX_BYTES:  # grew since the fstat
            return None, [_too_large_finding(max(len(data), os.fstat(fh.fileno()).st_size), display, options)]
    return data, []


def _judge_file(name: str, display: str, data: bytes, options: Options, validate: ValidateFn
                ) -> tuple[tuple[Finding, ...], PodFacts | None]:
    """One file's own findings (what ``validate`` finds, then ``stray`` when its name or content
    says it is not a manifest the operator meant) and, when it defines a Pod, its facts."""
    doc, positions, file_findings = validate(data, display, options)
    own = list(file_findings)
    why = stray_reason(name)
    is_pod = is_pod_doc(doc)
    if why:
        own.append(Finding("stray", "warning", display, None, None, None,
                           f"stray file ({why}): the kubelet reads every non-dot file here as a pod, whatever "
                           "its name" + ("; this one runs" if is_pod else "; this one fails to parse every 20 s"),
                           _stray_hint(name)))
    elif not is_pod and not (isinstance(doc, dict) and doc.get("kind") == "Pod") and not any(
        f.severity == "error" and (f.code.startswith(("yaml", "json", "too", "not-utf8")) or f.code == "empty")
        for f in file_findings
    ):  # a broken Pod manifest (empty, no name…) is an invalid manifest, not a stray
        own.append(Finding("stray", "warning", display, None, None, None,
                           "stray file: not a Pod manifest; the kubelet fails to read it every 20 s",
                           "move it out of the manifest directory"))
    if not is_pod:
        return tuple(own), None
    facts = pod_facts(display, doc, positions)
    if facts.ports and kubelet_refuses(own):
        # a pod the kubelet never runs (its file refused, or its own admission fails) holds no
        # host port: nothing clashes with it (docs/kubelet-contract.md "What the kubelet refuses")
        facts = facts.replace(ports=())
    return tuple(own), facts


def judge_all(data: bytes, display: str, options: Options, validate: ValidateFn
              ) -> tuple[list[Finding], tuple[Finding, ...], PodFacts | None]:
    """Everything the daemon keeps of one live file: ``(findings, own, facts)``, the findings
    ``validate`` makes (:func:`staticpodd.validate.validate_bytes`'s) and what
    :func:`_judge_file` makes of them (with ``stray``; the pod's facts). One decode for both:
    what :mod:`staticpodd.validate.isolated` computes in a child process."""
    seen: list[Finding] = []

    def validating(data: bytes, display: str, options: Options) -> tuple[Any, dict, list[Finding]]:
        doc, positions, findings = validate(data, display, options)
        seen[:] = findings
        return doc, positions, findings

    own, facts = _judge_file(os.path.basename(display), display, data, options, validating)
    return list(seen), own, facts


def _too_large_finding(size: int, display: str, options: Options) -> Finding:
    """The ``too-large`` finding for a file of ``size`` bytes (see :func:`staticpodd.manifest.decoded.too_large`)."""
    from staticpodd.manifest.decoded import too_large

    problem = too_large(size, options.max_bytes)
    return Finding(problem.code, "error", display, None, None, None, problem.message, problem.hint, problem.kubelet)


def _permission_finding(display: str, st: os.stat_result) -> Finding | None:
    mode = stat.S_IMODE(st.st_mode)
    problems = []
    if mode & 0o077:
        can = " or ".join(w for w, bits in (("read", 0o044), ("write", 0o022)) if mode & bits) or "use"
        problems.append(f"mode {mode:04o} lets others {can} it"
                        + (" (secrets and flags are visible)" if mode & 0o044 else ""))
    if st.st_uid != 0 or st.st_gid != 0:
        problems.append(f"owned by {st.st_uid}:{st.st_gid}, not root:root")
    if not problems:
        return None
    return Finding(
        "loose-permissions",
        "warning",
        display,
        None,
        None,
        None,
        "; ".join(problems) + " -- anyone who can write here can run a privileged pod on this node",
        "chmod 0600 and chown root:root (kubeadm writes manifests 0600 root:root)",
    )


def check_directory(directory: Path, options: Options, validate: ValidateFn, memo: FileMemo | None = None
                    ) -> list[Finding]:
    """All findings for a manifest directory, as :func:`staticpodd.validate.validate_directory`.

    ``memo``: the per-file results of the previous pass over this directory (the daemon keeps
    one); a file whose bytes are unchanged is then neither decoded nor validated again, and the
    findings are the same as without it. Raises OSError when ``directory`` cannot be listed."""
    findings: list[Finding] = []
    before = memo.start(options) if memo is not None else {}
    names = sorted(os.listdir(directory))  # raises OSError when unreadable
    loose = _directory_mode_finding(directory)
    if loose is not None:
        findings.append(loose)
    pods: dict[tuple[str, str], list[PodFacts]] = {}
    for name in names:
        if name.startswith("."):
            continue  # the kubelet never reads dot-names
        full = directory / name
        display = str(full)
        try:
            lst = os.lstat(full)
        except FileNotFoundError:
            continue  # vanished meanwhile
        st = _regular_file_stat(full, display, lst, findings)
        if st is None:
            continue
        perm = _permission_finding(display, st)
        if perm:
            findings.append(perm)
        try:
            data, unread = _read_bytes(full, display, options)
        except OSError as exc:
            findings.append(
                Finding("unreadable", "error", display, None, None, None, f"cannot read: {exc.strerror}", None)
            )
            continue
        if data is None:  # not a regular file, or over the kubelet's 10 MiB: judged without its bytes
            findings.extend(unread)
            continue
        own, facts = _judge_remembered(name, display, data, options, validate, memo, before)
        findings.extend(own)
        if facts is not None:
            pods.setdefault(facts.key, []).append(facts)
    findings.extend(_duplicates(pods))
    findings.extend(_port_conflicts(pods))
    from staticpodd.validate.nodefit import directory_fit

    findings.extend(directory_fit(pods, options))
    return findings


def _directory_mode_finding(directory: Path) -> Finding | None:
    """``loose-permissions`` when others can write the manifest directory or root does not own it."""
    dstat = os.stat(directory)
    dmode = stat.S_IMODE(dstat.st_mode)
    if dmode & 0o022 or dstat.st_uid != 0:
        return Finding(
            "loose-permissions",
            "warning",
            str(directory),
            None,
            None,
            None,
            f"the manifest directory is mode {dmode:04o} owned by uid {dstat.st_uid}: others "
            "can add pods that the kubelet will run",
            "chmod 0700 (or 0755) and chown root:root",
        )
    return None


def _regular_file_stat(full: Path, display: str, lst: os.stat_result, findings: list[Finding]
                       ) -> os.stat_result | None:
    """The stat of the regular file the kubelet would read at ``full`` (through a symlink), or
    None when it skips the entry (a dangling symlink, a subdirectory, not a regular file).
    Appends a warning for each of those, and for a symlink it follows."""
    if stat.S_ISLNK(lst.st_mode):
        try:
            st = os.stat(full)
        except OSError:
            findings.append(
                Finding(
                    "dangling-symlink",
                    "warning",
                    display,
                    None,
                    None,
                    None,
                    f"symlink to {os.readlink(full)!r}, which does not exist: the kubelet skips it",
                    "remove the link or restore its target",
                )
            )
            return None
        findings.append(
            Finding(
                "symlink",
                "warning",
                display,
                None,
                None,
                None,
                f"symlink to {os.readlink(full)!r}: the kubelet follows it, but a change to the "
                "target raises no event and is seen only at the next 20 s relist",
                "keep manifests as plain files in the directory",
            )
        )
    else:
        st = lst
    if stat.S_ISDIR(st.st_mode):
        findings.append(
            Finding(
                "subdirectory-ignored",
                "warning",
                display,
                None,
                None,
                None,
                "subdirectory: the kubelet does not look inside it; nothing in it runs",
                "move it out of the manifest directory, or give it a dot-name",
            )
        )
        return None
    if not stat.S_ISREG(st.st_mode):
        findings.append(
            Finding(
                "not-regular-file",
                "warning",
                display,
                None,
                None,
                None,
                "not a regular file: the kubelet skips it",
                "remove it",
            )
        )
        return None
    return st


def _judge_remembered(
    name: str,
    display: str,
    data: bytes,
    options: Options,
    validate: ValidateFn,
    memo: FileMemo | None,
    before: dict[str, tuple[str, tuple[Finding, ...], PodFacts | None]],
) -> tuple[tuple[Finding, ...], PodFacts | None]:
    """One file's own findings and pod facts: kept from ``before`` when its digest is unchanged,
    else judged (a big file in a child process, in the daemon) and counted in ``memo``."""
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    kept = before.get(display)
    if kept is not None and kept[0] == digest:
        own, facts = kept[1], kept[2]
    else:
        from staticpodd.validate import isolated

        if isolated.applies(data):  # the daemon: a big file is judged in a child process
            own, facts = isolated.judge(data, display, options,
                                        lambda d, p, o: judge_all(d, p, o, validate))[1:]
        else:
            own, facts = _judge_file(name, display, data, options, validate)
        if memo is not None:
            memo.validated += 1
    if memo is not None:
        memo.keep(display, digest, own, facts)
    return own, facts


def _duplicates(pods: dict) -> list[Finding]:
    """Two files with one namespace/name: the kubelet reads both and the lexically last file
    wins on relist.

    The finding goes on the file that should go: each stray by its name (:func:`stray_reason`:
    ``kube-apiserver.yaml.bak``), whether it wins or loses, when a file that is not a stray
    defines the pod too; otherwise on each file that loses (sorts before the winner).
    Source: docs/kubelet-contract.md "Duplicate names across files".
    """
    out = []
    for (ns, name), files in pods.items():
        if len(files) < 2:
            continue
        winner = os.path.basename(files[-1].display)
        strays = [f for f in files if stray_reason(os.path.basename(f.display)) is not None]
        keepers = [f for f in files if f not in strays]
        if strays and keepers:
            keep = os.path.basename(keepers[-1].display)
            for facts in strays:
                runs = (f"this file, not {keep}: edits to {keep} never take effect" if facts is files[-1]
                        else f"{winner} and ignores this file")
                out.append(make(
                    "duplicate-pod", "error", facts.display, facts.located, "metadata.name",
                    f"{ns}/{name} is also defined by {keep}: the kubelet reads both files and runs the "
                    f"lexically later one, {runs} (deleting one of them stops the pod until the next relist)",
                    f"this leftover is the file that should go, not {keep}: staticpodctl park "
                    f"{_shell_word(os.path.basename(facts.display))} records its bytes, moves it out and "
                    f"touches {keep} so the kubelet runs the pod again at once, not at its next relist; then "
                    f"staticpodctl unpark --discard {_shell_word(os.path.basename(facts.display))}",
                ))
            losers = keepers[:-1]
        else:
            losers = files[:-1]
        others = ", ".join(os.path.basename(f.display) for f in files[:-1])
        for facts in losers:
            display = facts.display
            out.append(
                make(
                    "duplicate-pod",
                    "error",
                    display,
                    facts.located,
                    "metadata.name",
                    f"{ns}/{name} is also defined by {winner}, which sorts last: the "
                    f"kubelet runs {winner} and ignores this file (edits here never "
                    "take effect; deleting one of them stops the pod until the next relist)",
                    f"keep one file per pod; move {others if len(files) > 2 else winner}"
                    " out of the directory if it is a leftover, then `touch` the file that stays so the "
                    "kubelet re-adds its pod now instead of at its next relist (a real kubelet 1.34 leaves "
                    "it down until then)",
                )
            )
    return out


def _port_conflicts(pods: dict) -> list[Finding]:
    """Two pods claiming one host port: the second fails admission (NodePorts), or, when either
    port is one a control-plane flag names (not declared, so admission does not see it), both
    are admitted and the second fails to bind (``host-port-bind-conflict``).

    Which claims clash is :func:`staticpodd.manifest.hostclaims.claims_clash` (the engine's
    refusal of new bytes uses it too). Of files that define one pod (same namespace/name) only
    the lexically last counts: the kubelet runs it and ignores the others (docs/kubelet-contract.md "Duplicate
    names across files"; :func:`_duplicates` reports them as ``duplicate-pod``). A pod the kubelet
    never runs claims nothing (:func:`_judge_file`).
    """
    out = []
    claims: dict[tuple[str, int], list[tuple[tuple[str, str], str, str, str, dict]]] = {}
    for key, files in pods.items():
        facts = files[-1]  # of files defining one pod the kubelet runs the lexically last only
        for proto, port, ip, fieldp in facts.ports:
            claims.setdefault((proto, port), []).append((key, facts.display, ip, fieldp, facts.located))
    for (proto, port), who in claims.items():
        for i in range(1, len(who)):
            key, display, ip, fieldp, positions = who[i]
            for okey, odisplay, oip, ofield, _op in who[:i]:
                if not claims_clash(key, (proto, port, ip, fieldp), okey, (proto, port, oip, ofield)):
                    continue  # other IPs, or one pod in two files (duplicate-pod covers it: only one runs)
                where = (f"host port {port}/{proto} is also claimed by {okey[0]}/{okey[1]} in "
                         f"{os.path.basename(odisplay)}")
                if admission_clash((proto, port, ip, fieldp), (proto, port, oip, ofield)):
                    out.append(make(
                        "host-port-conflict", "error", display, positions, fieldp,
                        f"{where}: the kubelet admits one pod and rejects the other "
                        "(\"node(s) didn't have free ports for the requested pod ports\")",
                        "give each pod its own host port",
                    ))
                else:  # a port a control-plane flag names: admission does not see it
                    out.append(make(
                        "host-port-bind-conflict", "error", display, positions, fieldp,
                        f"{where}: the kubelet admits both pods (admission sees only declared ports) and the "
                        "second to start fails to bind the port (its container restarts in a loop)",
                        "give each pod its own host port",
                    ))
                break
    return out
