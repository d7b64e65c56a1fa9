"""Validation that agrees with the kubelet, for one manifest and for the whole directory.

Pure functions over bytes (plus ``validate_directory``/``validate_path``, which read the
filesystem the way the kubelet does). Importable without the CLI or the daemon; the Pod
schemas load once per process, lazily, on the first validation that needs them.

Layers (each rule cites its source in its docstring):

1. reading like the kubelet -- :func:`staticpodd.manifest.decoding.decode`
2. kind and identity -- :mod:`staticpodd.validate.identity`
3. schema (core/v1 Pod per Kubernetes minor) -- :mod:`staticpodd.validate.schema`
4. what the kubelet refuses from static pods, and ValidatePodCreate -- :mod:`.podrules`
5. likely mistakes -- :mod:`.mistakes`
6. node fit -- :mod:`.nodefit`
7. directory level -- :mod:`.directory`

Two levels: each :class:`Finding` says what the kubelet itself does (``Finding.kubelet``:
"refuses", "fails-admission", "accepts"); :func:`verdict` sums up one file and
:func:`kubelet_refuses` is the daemon's ``on_invalid: restore`` gate. staticpodd's own
strictness is listed in :data:`staticpodd.validate.codes.STRICTNESS`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from staticpodd.errors import InvalidManifest
from staticpodd.manifest.decoded import DecodeProblem, Manifest
from staticpodd.manifest.decoding import decode
from staticpodd.resources import DEFAULT_VERSION, SUPPORTED_VERSIONS, parse_version
from staticpodd.validate.context import Context, Options
from staticpodd.validate.findings import KUBELET_ACCEPTS, KUBELET_FAILS_ADMISSION, KUBELET_REFUSES, Finding
from staticpodd.validate.identity import DECODE_CODES, identity_findings, problem_finding
from staticpodd.validate.verdict import Verdict, kubelet_refused, kubelet_refuses, strictness_only, verdict

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_VERSION",
    "SUPPORTED_VERSIONS",
    "VALIDATOR_ID",
    "KUBELET_ACCEPTS",
    "KUBELET_FAILS_ADMISSION",
    "KUBELET_REFUSES",
    "Finding",
    "Options",
    "Verdict",
    "gate",
    "has_errors",
    "kubelet_refused",
    "kubelet_refuses",
    "parse_version",
    "strictness_only",
    "validate_bytes",
    "validate_directory",
    "validate_path",
    "verdict",
]

_STOP_CODES = DECODE_CODES
_DEFAULT_OPTIONS = Options()


def _file_rules() -> list:
    from staticpodd.validate import rules

    return rules.FILE_RULES


def __getattr__(name: str) -> Any:
    # VALIDATOR_ID is computed on first use (hashing sources and schemas costs a little); the
    # computation lives in staticpodd.resources so the engine can get it without this package.
    if name == "VALIDATOR_ID":
        from staticpodd.resources import validator_id

        return validator_id()
    raise AttributeError(name)


def _validate(data: bytes, path: str, options: Options) -> tuple[Any, dict, list[Finding]]:
    try:
        decoded = decode(data, max_bytes=options.max_bytes)
    except DecodeProblem as problem:
        found = [problem_finding(problem, path)]
        if problem.code != "too-large" and len(data) > options.max_bytes:
            from staticpodd.manifest.decoded import too_large

            found.insert(0, problem_finding(too_large(len(data), options.max_bytes), path))
        return None, {}, found
    findings: list[Finding] = [problem_finding(n, path) for n in decoded.notes]
    if decoded.encoding != "utf-8":
        findings.append(
            Finding(
                "utf16",
                "info",
                path,
                1,
                1,
                None,
                f"the file is {decoded.encoding.upper()} (it starts with a byte order mark): the kubelet's "
                "YAML decoder reads it, but most tools (grep, diff, kubeadm) expect UTF-8",
                "save it as UTF-8",
            )
        )
    if decoded.extra_documents:
        findings.append(
            Finding(
                "empty-extra-document",
                "info",
                path,
                None,
                None,
                None,
                "the file ends with an empty extra YAML document ('---'); the kubelet ignores it",
                "remove the trailing '---'",
            )
        )
    ident = identity_findings(decoded.doc, decoded.positions, path, options.resolved_node_name())
    findings.extend(ident)
    if any(f.code in _STOP_CODES for f in ident):
        return decoded.doc, decoded.positions, findings
    ctx = Context(decoded.doc, decoded.positions, path, options)
    for rule in _file_rules():
        try:
            rule(ctx)
        except (TypeError, AttributeError, ValueError, KeyError):
            # A later rule tripped over a value of the wrong type; the schema layer has already
            # reported it as an error, which is the verdict that matters. Anything else is a bug.
            if not any(f.code == "schema-type" for f in ctx.findings):
                raise
    findings.extend(ctx.findings)
    return decoded.doc, decoded.positions, findings


def validate_bytes(data: bytes, path: str, options: Options | None = None) -> list[Finding]:
    """Every finding for the bytes of one manifest file named ``path`` (used in messages only).

    Returns findings in layer order (reading, identity, schema, static-pod rules, likely
    mistakes, node fit). Never raises for bad input: unreadable input is a finding.
    Source: docs/kubelet-contract.md "How a file is decoded" and "What the kubelet refuses".
    In the daemon a big file is judged in a child process (:mod:`staticpodd.validate.isolated`).
    """
    from staticpodd.validate import isolated

    if isolated.applies(data):
        from staticpodd.validate.directory import judge_all

        return isolated.judge(data, path, options or _DEFAULT_OPTIONS,
                              lambda d, p, o: judge_all(d, p, o, _validate))[0]
    return _validate(data, path, options or _DEFAULT_OPTIONS)[2]


def has_errors(findings: Iterable[Finding]) -> bool:
    """True when any finding has severity ``"error"``."""
    return any(f.severity == "error" for f in findings)


def gate(data: bytes, path: str, options: Options | None = None) -> tuple[Manifest, list[Finding]]:
    """The engine's gate for apply/edit/rollback/unpark: ``(Manifest, non-error findings)``.

    Raises :class:`staticpodd.errors.InvalidManifest` with ``findings`` = all findings and the
    path/line/column/field/hint of the first error the kubelet refuses (else of the first
    error) when any finding is an error; its message ends by saying which level refused it
    ("the kubelet would refuse this file", or staticpodd's own rules: see :func:`verdict`).
    """
    opts = options or _DEFAULT_OPTIONS
    doc, positions, findings = _validate(data, path, opts)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        refused = kubelet_refused(errors)
        first = refused[0] if refused else errors[0]
        more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        if refused:
            level = "the kubelet would refuse this file"
        else:
            level = (
                "the kubelet would run this file, but staticpodd refuses it by its own rules ("
                + ", ".join(dict.fromkeys(f.code for f in errors))
                + "; README \"Validation that agrees with the kubelet\")"
            )
        raise InvalidManifest(
            f"{first.message}{more}; {level}",
            findings=findings,
            path=first.path,
            line=first.line,
            column=first.column,
            field=first.field,
            hint=first.hint,
        )
    meta = doc["metadata"]
    manifest = Manifest(
        doc=doc,
        name=meta["name"],
        namespace=meta.get("namespace") or "default",
        digest=hashlib.sha256(data).hexdigest(),
        positions=positions,
    )
    return manifest, findings


def validate_directory(directory: Path, options: Options | None = None, memo: Any = None) -> list[Finding]:
    """Validate a manifest directory as the kubelet reads it (docs/kubelet-contract.md "Which files are pods").

    Per file: everything :func:`validate_bytes` finds. Across files: duplicate namespace/name
    (naming the lexically last file, which the kubelet runs), strays, ignored subdirectories,
    symlinks, host port conflicts, the node's total requests, loose modes/owners.
    ``memo``: a :class:`staticpodd.validate.podfacts.FileMemo` kept between calls on one
    directory (the daemon's passes): files whose bytes did not change are not validated again.
    Raises OSError when ``directory`` cannot be listed.
    """
    from staticpodd.validate.directory import check_directory

    return check_directory(Path(directory), options or _DEFAULT_OPTIONS, _validate, memo)


def validate_path(path: Path, options: Options | None = None) -> list[Finding]:
    """Validate a file (any name, e.g. Ansible's ``/tmp/.ansible_tmpXYZ``) or a directory.

    Raises OSError (FileNotFoundError, PermissionError, IsADirectory...) when ``path`` cannot
    be read; the CLI turns that into exit status 2.
    """
    p = Path(path)
    opts = options or _DEFAULT_OPTIONS
    if p.is_dir():
        return validate_directory(p, opts)
    from staticpodd.validate.directory import read_file_findings

    return read_file_findings(p, str(path), opts, _validate)
