"""``staticpodctl validate PATH... [--strict] [--kubernetes-version 1.NN] [--json]``.

Exit status: 0 no errors (warnings allowed), 1 errors, 2 usage (unreadable path, unknown
version). Errors the kubelet itself refuses and errors that are only staticpodd's strictness both
fail (exit 1); the output tells them apart (each finding's level, and per file a verdict:
``verdicts`` in ``--json``, see :mod:`staticpodd.validate.verdict`). Works as Ansible
``validate: staticpodctl validate %s``, Puppet ``validate_cmd``, Chef ``verify`` and Salt
``check_cmd``: PATH may have any name.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from staticpodd.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from staticpodd.termsafe import json_safe, printable_name, safe

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import IO, Any


def add_validate_parser(subparsers: Any, *, default_dir: bool = False) -> argparse.ArgumentParser:
    """Add the ``validate`` verb to an argparse ``subparsers`` object; returns its parser.
    ``default_dir``: PATH may be left out (staticpodctl then validates the manifest directory of
    ``--root``); the stand-alone entry has no root, so it needs one."""
    from staticpodd.resources import DEFAULT_VERSION, SUPPORTED_VERSIONS

    p = subparsers.add_parser(
        "validate",
        help="check manifest files or a manifest directory the way the kubelet reads them",
        description=(
            "Check manifest files (any name) or a manifest directory the way the kubelet reads them. "
            "Exit 0: no errors (warnings allowed); 1: errors; 2: usage error."
        ),
    )
    p.add_argument("paths", nargs="*" if default_dir else "+", metavar="PATH",
                   help="a manifest file or a manifest directory"
                   + (" (default: the manifest directory, under --root)" if default_dir else ""))
    p.add_argument("--strict", action="store_true", help="unknown fields are errors, not warnings")
    p.add_argument(
        "--kubernetes-version",
        default=None,
        metavar="1.NN",
        help=f"kubelet minor to judge against ({', '.join(SUPPORTED_VERSIONS)}; default: the config's "
        f"kubernetes_version, else {DEFAULT_VERSION})",
    )
    p.add_argument("--node-name", default=None, help="the kubelet's node name (default: this host's name)")
    p.add_argument(
        "--node-cpu",
        default=None,
        metavar="QUANTITY",
        help="node CPU capacity for the node-fit check, e.g. 4 or 3500m (default: /proc/cpuinfo)",
    )
    p.add_argument(
        "--node-memory",
        default=None,
        metavar="QUANTITY",
        help="node memory capacity, e.g. 16Gi (default: /proc/meminfo)",
    )
    p.add_argument(
        "--kubelet-config",
        default=None,
        metavar="FILE",
        help="the kubelet's KubeletConfiguration (e.g. /var/lib/kubelet/config.yaml): its kubeReserved, "
        "systemReserved and evictionHard memory.available set the node's allocatable for the node-fit check "
        "(default: none reserved, memory.available 100Mi, as the kubelet's defaults)",
    )
    p.add_argument(
        "--no-host-checks",
        action="store_true",
        help="do not look at this machine's paths (validating for another node)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (format_version 1)")
    p.set_defaults(handler=run_validate)
    return p


def run_validate(args: argparse.Namespace, stdout: IO[str] | None = None) -> int:
    """Run the verb for parsed ``args``; writes to ``stdout``; returns the exit status."""
    from staticpodd.validate import Options, has_errors, parse_version, validate_path

    out = stdout if stdout is not None else sys.stdout
    as_json = bool(getattr(args, "json", False))
    # Defaults from the configuration (staticpodctl passes them as ``base_options``); flags win.
    base = getattr(args, "base_options", None) or Options()
    try:
        version = parse_version(args.kubernetes_version or base.kubernetes_version)
    except ValueError as exc:
        return _usage(out, as_json, str(exc))
    from staticpodd.validate.quantity import cpu_millis, memory_bytes, parse_quantity

    capacity: dict[str, Any] = {}
    for key in ("cpu_capacity_millis", "memory_capacity_bytes"):
        if getattr(base, key, None) is not None:
            capacity[key] = getattr(base, key)
    for attr, key, conv in (
        ("node_cpu", "cpu_capacity_millis", cpu_millis),
        ("node_memory", "memory_capacity_bytes", memory_bytes),
    ):
        raw = getattr(args, attr, None)
        if raw is not None:
            q = parse_quantity(raw)
            if q is None or q <= 0:
                return _usage(out, as_json, f"--{attr.replace('_', '-')}: not a positive quantity: {raw!r}")
            capacity[key] = conv(q)
    reservations: dict[str, Any] = {}
    kubelet_config = getattr(args, "kubelet_config", None)
    if kubelet_config:
        from staticpodd.validate.nodefit import kubelet_reservations

        try:
            with open(kubelet_config, "rb") as fh:
                reservations = kubelet_reservations(fh.read())
        except OSError as exc:
            return _usage(out, as_json, f"--kubelet-config {kubelet_config}: cannot read: {exc.strerror or exc}")
        except ValueError as exc:
            return _usage(out, as_json, f"--kubelet-config {kubelet_config}: {exc}")
    options = Options(
        kubernetes_version=version,
        strict=bool(args.strict),
        max_bytes=base.max_bytes,
        node_name=getattr(args, "node_name", None) or base.node_name,
        check_host=not getattr(args, "no_host_checks", False),
        **capacity,
        **reservations,
    )
    findings = []
    files = []
    checked: list[str] = []
    manifests = 0
    for raw in args.paths:
        try:
            found = validate_path(Path(raw), options)
        except OSError as exc:
            # as apply: an input that is missing or unreadable is a filesystem error (1), not usage
            return _usage(out, as_json, f"{raw}: cannot read: {exc.strerror or exc}", code="fs-error",
                          status=EXIT_FAILURE)
        files.append(raw)
        findings.extend(found)
        manifests += _manifest_count(raw)
        checked.extend(_checked_files(raw))
    verdicts = _verdicts(checked, findings)
    ok = not has_errors(findings)
    _write_report(out, as_json, files=files, findings=findings, verdicts=verdicts, manifests=manifests,
                  version=version, ok=ok)
    return EXIT_OK if ok else EXIT_FAILURE


def _write_report(out: IO[str], as_json: bool, *, files: list[str], findings: list[Any],
                  verdicts: list[Any], manifests: int, version: Any, ok: bool) -> None:
    """Write the verb's result: one JSON document, or each finding, the per-file verdicts that
    matter (when several files were checked) and a one-line summary."""
    not_run = sum(1 for _p, v in verdicts if not v.kubelet_runs)
    ours_only = sum(1 for _p, v in verdicts if v.kubelet_runs and v.staticpodd == "refuses")
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning")
    if as_json:
        json.dump(
            json_safe({
                "format_version": 1,
                "command": "validate",
                "ok": ok,
                "files": files,
                "findings": [f.to_dict() for f in findings],
                "verdicts": [{"path": p, **v.to_dict()} for p, v in verdicts],
                "summary": {
                    "errors": errors,
                    "warnings": warnings,
                    "manifests": manifests,
                    "kubelet_refuses": not_run,
                    "staticpodd_only": ours_only,
                },
            }),
            out,
            separators=(",", ":"),
        )
        out.write("\n")
    else:
        for f in findings:
            out.write(safe(printable_name(f.format())) + "\n")
        if len(verdicts) > 1:
            for p, v in verdicts:
                if v.staticpodd == "refuses" or not v.kubelet_runs:
                    out.write(safe(printable_name(f"{p}: {v.sentence()}")) + "\n")
        noun = "manifest" if manifests == 1 else "manifests"
        where = ""
        if any(os.path.isdir(p) for p in files):
            where = f" in {len(files)} path{'s' if len(files) != 1 else ''}"
        out.write(
            f"{manifests} {noun}{where} checked against Kubernetes {version}: "
            f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}"
            f"{_verdict_summary(verdicts, not_run, ours_only)}\n"
        )


def _checked_files(path: str) -> list[str]:
    """The file paths (as findings name them) that validating ``path`` judged: ``path`` itself,
    or each non-dot regular file of a directory (docs/kubelet-contract.md "Which files are pods")."""
    if not os.path.isdir(path):
        return [path]
    try:
        with os.scandir(path) as it:
            names = sorted(e.name for e in it if not e.name.startswith(".") and _is_file(e))
    except OSError:
        return []
    return [str(Path(path) / n) for n in names]


def _verdicts(checked: list[str], findings: list) -> list:
    """``[(path, Verdict)]`` for every checked file, in order (staticpodd.validate.verdict)."""
    from staticpodd.validate.verdict import verdict

    by_path: dict[str, list] = {p: [] for p in checked}
    for f in findings:
        if f.path in by_path:
            by_path[f.path].append(f)
    return [(p, verdict(fs)) for p, fs in by_path.items()]


def _verdict_summary(verdicts: list, not_run: int, ours_only: int) -> str:
    """The end of the summary line: the kubelet's verdict, told apart from staticpodd's."""
    if len(verdicts) == 1:
        v = verdicts[0][1]
        if v.staticpodd == "accepts" and v.kubelet_runs:
            return ""
        return f"; {v.sentence()}"
    parts = []
    if not_run:
        parts.append(f"the kubelet would not run {not_run} of {len(verdicts)} files")
    if ours_only:
        parts.append(f"{ours_only} more {'is' if ours_only == 1 else 'are'} refused only by staticpodd's own rules")
    return "; " + "; ".join(parts) if parts else ""


def _manifest_count(path: str) -> int:
    """How many files the kubelet would read at ``path``: 1 for a file, the non-dot regular
    files for a directory (docs/kubelet-contract.md "Which files are pods")."""
    if not os.path.isdir(path):
        return 1
    try:
        with os.scandir(path) as it:
            return sum(1 for e in it if not e.name.startswith(".") and _is_file(e))
    except OSError:
        return 0


def _is_file(entry: os.DirEntry[str]) -> bool:
    """``entry.is_file()``, False where the stat fails (a symlink loop raises ELOOP): the kubelet
    skips such a link, and one of them must not void the count of the others."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _usage(out: IO[str], as_json: bool, message: str, *, code: str = "usage", status: int = EXIT_USAGE) -> int:
    """Report an error that stopped validation (``code``/``status``: usage 2, or fs-error 1)."""
    if as_json:
        json.dump(
            {
                "format_version": 1,
                "command": "validate",
                "ok": False,
                "error": {"code": code, "message": printable_name(message)},
            },
            out,
            separators=(",", ":"),
        )
        out.write("\n")
    else:
        sys.stderr.write(safe(printable_name(f"staticpodctl validate: {message}")) + "\n")
    return status


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m staticpodd.validate``) until staticpodctl wires the verb."""
    parser = argparse.ArgumentParser(prog="staticpodctl")
    sub = parser.add_subparsers(dest="verb", required=True)
    add_validate_parser(sub)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "validate":
        argv.insert(0, "validate")
    args = parser.parse_args(argv)
    return run_validate(args, sys.stdout)
