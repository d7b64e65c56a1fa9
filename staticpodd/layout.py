"""Where everything lives on a node, derived once from ``--root`` / ``--manifest-dir``.

See docs/reference/files.md, "Where things live on a node". One frozen :class:`Layout` is built per process
and passed down; no module keeps paths in globals.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ConfigError
from .record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Final

#: File-name suffixes that name a component by their stem (``kube-scheduler.yaml`` ->
#: ``kube-scheduler``). GCE ships ``.manifest``. Any other non-dot file is still read by the
#: kubelet (docs/kubelet-contract.md "Which files are pods"); its component name is the whole file name.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json", ".manifest")

#: The private area inside the manifest directory: a dot-name, so the kubelet never reads it,
#: and on the same mount, so park/unpark/swap are atomic renames (docs/kubelet-contract.md consequences 1, 3).
PRIVATE_DIRNAME = ".staticpodd"

DEFAULT_MANIFEST_DIR = "/etc/kubernetes/manifests"
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"

# A plain scalar here must not start with a YAML indicator ([ { | > & * ! % @ ` , ? : -) and must
# not be a null (~, null); anything else falls back to a real YAML parse.
_STATIC_POD_PATH_RE = re.compile(
    r"""^staticPodPath:[ \t]*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s#'"\[\]{}|>&*!%@`,?:~-][^#\n]*?))[ \t]*(?:\#.*)?$""",
    re.MULTILINE,
)
_YAML_NULLS = ("null", "Null", "NULL", "~", "")


def component_of(file_name: str) -> str:
    """Component name for a file name in the manifest directory.

    ``kube-scheduler.yaml`` -> ``kube-scheduler``; ``etcd.json`` -> ``etcd``;
    ``kube-apiserver.yaml.bak`` -> ``kube-apiserver.yaml.bak`` (no known suffix: whole name).
    """
    for suffix in MANIFEST_SUFFIXES:
        if file_name.endswith(suffix) and len(file_name) > len(suffix):
            return file_name[: -len(suffix)]
    return file_name


def under_root(root: Path, path: str | os.PathLike[str]) -> Path:
    """Join an absolute node path below ``root`` (``/etc/x`` under ``/tmp/r`` is ``/tmp/r/etc/x``).

    A relative path is returned relative to the current directory, unchanged.
    """
    p = Path(path)
    if not p.is_absolute():
        return p
    return root / p.relative_to(p.anchor)


def read_static_pod_path(kubelet_config: Path) -> str | None:
    """The ``staticPodPath`` of a KubeletConfiguration file, or None when it sets none.

    Reads the top-level key with a line scan (the common YAML shapes, plain or quoted), and falls
    back to a YAML parse only when the key appears in a form the scan does not understand (flow
    style, JSON), so that the fast CLI verbs do not pay for importing a YAML parser.
    Raises ConfigError when the file cannot be read or parsed.
    """
    try:
        text = kubelet_config.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read kubelet config: {exc.strerror}", path=str(kubelet_config)) from exc
    m = _STATIC_POD_PATH_RE.search(text)
    if m and m.group(3) not in _YAML_NULLS:
        value = next(g for g in m.groups() if g is not None).strip()
        return value or None
    if "staticPodPath" not in text:
        return None
    import yaml  # only for unusual shapes of the file

    try:
        from .manifest.yamlsafe import safe_load

        doc = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"cannot parse kubelet config: {getattr(exc, 'problem', exc)}",
            path=str(kubelet_config),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from exc
    value = doc.get("staticPodPath") if isinstance(doc, dict) else None
    return str(value) if value else None


class Layout(FrozenRecord):
    """All paths staticpodd uses, under one ``root`` (``/`` on a real node).

    ``manifest_dir`` is the kubelet's ``staticPodPath``. Everything else is derived; see
    docs/reference/files.md for the table.
    """

    root: Final[Path]
    manifest_dir: Final[Path]
    state_dir: Final[Path]
    run_dir: Final[Path]
    config_dir: Final[Path]

    def __init__(self, root: Path, manifest_dir: Path, state_dir: Path, run_dir: Path, config_dir: Path) -> None:
        self.root = root
        self.manifest_dir = manifest_dir
        self.state_dir = state_dir
        self.run_dir = run_dir
        self.config_dir = config_dir

    @classmethod
    def build(
        cls,
        root: str | os.PathLike[str] = "/",
        manifest_dir: str | os.PathLike[str] | None = None,
    ) -> Layout:
        """Derive a Layout from ``--root`` and an optional ``--manifest-dir``.

        Without ``manifest_dir``, the kubelet's ``staticPodPath`` from
        ``<root>/var/lib/kubelet/config.yaml`` is used when that file exists and sets it (the path
        is taken under ``root``), else ``<root>/etc/kubernetes/manifests``. An explicit
        ``manifest_dir`` is used as given (relative to the current directory if relative).
        Raises ConfigError when the kubelet config exists but cannot be read.
        """
        root_p = Path(os.path.abspath(root))
        if manifest_dir is not None:
            mdir = Path(os.path.abspath(manifest_dir))
        else:
            kcfg = under_root(root_p, KUBELET_CONFIG)
            spp = read_static_pod_path(kcfg) if kcfg.is_file() else None
            mdir = under_root(root_p, spp or DEFAULT_MANIFEST_DIR)
            if not mdir.is_absolute():
                # A relative staticPodPath is relative to the kubelet config's directory.
                mdir = Path(os.path.abspath(kcfg.parent / mdir))
        return cls(
            root=root_p,
            manifest_dir=mdir,
            state_dir=under_root(root_p, "/var/lib/staticpodd"),
            run_dir=under_root(root_p, "/run/staticpodd"),
            config_dir=under_root(root_p, "/etc/staticpodd"),
        )

    @property
    def private_dir(self) -> Path:
        """``<manifests>/.staticpodd``: same mount as the manifests, never read by the kubelet."""
        return self.manifest_dir / PRIVATE_DIRNAME

    @property
    def parked_dir(self) -> Path:
        """Parked manifests, kept as plain files an operator can ``mv`` back by hand."""
        return self.private_dir / "parked"

    @property
    def staging_dir(self) -> Path:
        """Staging files: written, fsynced, then renamed into place."""
        return self.private_dir / "staging"

    @property
    def quarantine_dir(self) -> Path:
        """Stray files moved out of the kubelet's sight by the daemon's ``on_stray: quarantine``."""
        return self.private_dir / "quarantine"

    @property
    def db_path(self) -> Path:
        """The SQLite version store (WAL mode)."""
        return self.state_dir / "versions.sqlite3"

    @property
    def lock_path(self) -> Path:
        """The flock every writer (CLI and daemon) takes."""
        return self.run_dir / "lock"

    @property
    def heartbeat_path(self) -> Path:
        """JSON status the daemon rewrites on every loop; ``staticpodctl status`` reads it."""
        return self.run_dir / "daemon.json"

    @property
    def config_path(self) -> Path:
        """``staticpodd.yaml``, checked against ``schemas/staticpodd-config.schema.json``."""
        return self.config_dir / "staticpodd.yaml"

    @property
    def hooks_dir(self) -> Path:
        """``hooks.d/{pre,post}-{verb}.d/`` executables, run-parts style."""
        return self.config_dir / "hooks.d"

    def live_path(self, file_name: str) -> Path:
        """Path of a live manifest file in the kubelet's directory."""
        return self.manifest_dir / file_name

    def parked_path(self, file_name: str) -> Path:
        """Path of a parked manifest (same file name as when it was live)."""
        return self.parked_dir / file_name
