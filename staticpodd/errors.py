"""One error tree for staticpodd and staticpodctl.

Every error carries a stable ``code`` (kebab-case, part of the ``--json`` contract) and the
process ``exit_status`` the CLI uses for it. The exit statuses are documented in README.md
("Exit codes"); never renumber them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


# Exit statuses (README "Exit codes"). 2 is argparse's usage error; 78 is sysexits' EX_CONFIG,
# which systemd's RestartPreventExitStatus= can name.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_LOCKED = 5
EXIT_TIMEOUT = 6
EXIT_CONFIG = 78


class StaticpodError(Exception):
    """Base of every error staticpodd reports to a user.

    ``message`` says what happened in one sentence; ``hint`` says what to do. ``path``,
    ``line``, ``column`` and ``field`` locate bad input (1-based line/column).
    """

    code = "error"
    exit_status = EXIT_FAILURE

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.path = path
        self.line = line
        self.column = column
        self.field = field
        self.details = details or {}

    def location(self) -> str:
        """``file:line:column`` as far as known, or an empty string."""
        if not self.path:
            return ""
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return loc

    def to_dict(self) -> dict[str, Any]:
        """The error as the ``error`` member of a ``--json`` reply."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        for key in ("hint", "path", "line", "column", "field"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.details:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        loc = self.location()
        return f"{loc}: {self.message}" if loc else self.message


class UsageError(StaticpodError):
    """The command line or an argument is malformed."""

    code = "usage"
    exit_status = EXIT_USAGE


class UnknownComponent(StaticpodError):
    """No live, parked or recorded manifest has that component name."""

    code = "unknown-component"
    exit_status = EXIT_NOT_FOUND


class UnknownVersion(StaticpodError):
    """The component exists but has no version with that sequence number."""

    code = "unknown-version"
    exit_status = EXIT_NOT_FOUND


class AlreadyParked(StaticpodError):
    """Park was asked for a component that is already parked."""

    code = "already-parked"
    exit_status = EXIT_CONFLICT


class NotParked(StaticpodError):
    """Unpark was asked for a component that is not parked."""

    code = "not-parked"
    exit_status = EXIT_CONFLICT


class LiveFileExists(StaticpodError):
    """Unpark would overwrite a live manifest that appeared meanwhile."""

    code = "live-file-exists"
    exit_status = EXIT_CONFLICT


class Conflict(StaticpodError):
    """The directory is not in the state the operation needs (e.g. ambiguous file names)."""

    code = "conflict"
    exit_status = EXIT_CONFLICT


class ChangedMeanwhile(Conflict):
    """The file changed after it was judged and before the rename (another writer, a hand edit
    during the pre-hooks): the other write is recorded as a version and nothing was replaced.
    ``details`` names both: ``recorded_version`` (the other write) and ``refused_digest``."""

    code = "changed-meanwhile"
    exit_status = EXIT_CONFLICT


class InvalidManifest(StaticpodError):
    """The bytes would not be accepted by the kubelet; nothing was changed.

    ``findings`` holds the validator's findings (see ``staticpodd.validate.Finding``).
    """

    code = "invalid-manifest"
    exit_status = EXIT_FAILURE

    def __init__(self, message: str, *, findings: list[Any] | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.findings = list(findings or [])

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["findings"] = [f.to_dict() for f in self.findings]
        return out


class LockTimeout(StaticpodError):
    """Another staticpodctl or staticpodd held the lock for longer than the timeout."""

    code = "lock-timeout"
    exit_status = EXIT_LOCKED


class ConfigError(StaticpodError):
    """The configuration file is unreadable or does not match its schema."""

    code = "config-invalid"
    exit_status = EXIT_CONFIG


class HookFailed(StaticpodError):
    """A pre-hook failed, so the operation was not started."""

    code = "hook-failed"
    exit_status = EXIT_FAILURE


class WaitTimeout(StaticpodError):
    """The node did not reach the expected state before the --wait deadline."""

    code = "wait-timeout"
    exit_status = EXIT_TIMEOUT


class EditorFailed(StaticpodError):
    """``edit``: the editor could not run, failed, or removed its copy; nothing was changed."""

    code = "editor-failed"
    exit_status = EXIT_FAILURE


class NeedsForce(StaticpodError):
    """``park`` of a component the kubelet's own connection to the apiserver depends on (the local
    kube-apiserver, the etcd behind it, a local API load balancer), without ``--force``."""

    code = "needs-force"
    exit_status = EXIT_CONFLICT


class RuntimeUnavailable(StaticpodError):
    """``crictl`` cannot be run or cannot reach the CRI endpoint, so ``--wait`` cannot prove
    anything; raised before any swap, so nothing is changed."""

    code = "runtime-unavailable"
    exit_status = EXIT_FAILURE


class NodeNameMismatch(StaticpodError):
    """The pod runs on the container runtime under another node name than ``<name>-<host name>``;
    pass ``--node-name``."""

    code = "node-name-mismatch"
    exit_status = EXIT_USAGE


class StoreError(StaticpodError):
    """The version store is unreadable, from a newer release, or corrupt."""

    code = "store-error"
    exit_status = EXIT_FAILURE


class FsError(StaticpodError):
    """A filesystem operation inside the manifest directory failed."""

    code = "fs-error"
    exit_status = EXIT_FAILURE


class Untrusted(FsError):
    """A file or directory read back with root's authority could have been written by another
    user: it is owned by someone other than root or the caller, or a group or others may write it."""

    code = "untrusted-path"
