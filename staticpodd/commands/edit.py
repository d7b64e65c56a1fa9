"""``staticpodctl edit``: a component in $VISUAL/$EDITOR on a staged copy, validated before the swap.

The copy lives under the run directory (0700); an invalid edit is offered again interactively
and kept on disk otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import EXIT_FAILURE, EXIT_OK, EditorFailed, FsError, InvalidManifest, StaticpodError
from .changing import pre_wait, result_out, wait
from .loading import build_engine
from .output import PROG, Out

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


def cmd_edit(args: argparse.Namespace, out: Out) -> int:
    """Edit a component in $VISUAL/$EDITOR on a private copy under <run>/edit, then apply it (the
    bytes edited must still be the live ones); exit 0, 1, 130 or the --wait status."""
    import tempfile

    from ..node import fsops
    from ..store.versions import digest_of

    eng = build_engine(args)
    target = eng.resolve(args.component, allow_recorded=False)
    with eng.nothing_changed_on_error():
        with eng.locked():  # record the bytes being edited first: a write meanwhile is then a version after them
            fsops.ensure_private_dirs(eng.layout)
            eng.scan(None)
        target, data, loc = eng.current_bytes(args.component, for_display=True)
        base = digest_of(data)
        edit_root = eng.layout.run_dir / "edit"
        try:
            edit_root.mkdir(mode=0o700, parents=True, exist_ok=True)
            workdir = tempfile.mkdtemp(prefix=f"{target.component}-", dir=edit_root)
            path = os.path.join(workdir, target.file_name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise FsError(f"cannot make the copy to edit: {exc.strerror}", path=str(edit_root),
                          hint="free space under /run (or remount it read-write), then edit again") from None
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    interactive = sys.stdin.isatty() and not out.json
    try:
        return _edit_loop(args, out, eng, target, data, base, path, workdir, editor, interactive)
    except KeyboardInterrupt:
        out.warn(f"{PROG}: interrupted; nothing changed; your copy is kept at {path}")
        return 130


def _edit_loop(args: argparse.Namespace, out: Out, eng: Any, target: Any, data: bytes, base: str, path: str,
               workdir: str, editor: str, interactive: bool) -> int:
    import shlex
    import shutil
    import subprocess

    while True:
        try:
            rc = subprocess.call([*shlex.split(editor), path])
        except (OSError, ValueError) as exc:  # no such editor, or an unparsable $EDITOR
            raise EditorFailed(
                f"cannot run the editor {editor!r}: {getattr(exc, 'strerror', None) or exc}; nothing changed",
                hint=f"set $VISUAL or $EDITOR to an editor that exists (your copy: {path})",
            ) from None
        if not os.path.exists(path):
            raise EditorFailed(f"the editor removed {path}; nothing changed",
                               hint="edit the file in place; do not delete or move it")
        if rc != 0:
            raise EditorFailed(f"the editor {editor!r} exited with status {rc}; nothing changed",
                               path=path, hint=f"your copy is kept at {path}")
        with open(path, "rb") as fh:
            new = fh.read()
        if new == data:
            shutil.rmtree(workdir, ignore_errors=True)
            out.say(f"{target.component}: no changes")
            out.finish(True, changed=False, component=target.component, msg="no changes")
            return EXIT_OK
        try:
            before = pre_wait(args, eng, "edit")
            res = eng.apply(new, source=path, component=target.file_name, reason=args.reason, action="edit",
                            expect_digest=base, rename=args.rename)
        except InvalidManifest as exc:
            if not interactive:
                out.warn(f"{PROG}: {target.file_name} not changed; your edit is kept at {path}")
                raise
            for f in exc.findings:
                if f.severity == "error":
                    out.warn(f.format())
            answer = input("What now? (e)dit again, e(x)it without saving [e]: ").strip().lower()
            if answer.startswith("x"):
                out.warn(f"{PROG}: nothing changed; your edit is kept at {path}")
                return EXIT_FAILURE
            continue
        except StaticpodError:
            out.warn(f"{PROG}: {target.file_name} not changed; your edit is kept at {path}")
            raise
        shutil.rmtree(workdir, ignore_errors=True)
        result_out(out, res, eng=eng)
        rc = wait(args, out, eng, "edit", res, before=before)
        out.finish(rc == EXIT_OK)
        return rc
