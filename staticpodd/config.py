"""The configuration file ``/etc/staticpodd/staticpodd.yaml`` (under ``--root``).

Read by ``staticpodd`` at start and on SIGHUP, and by ``staticpodctl``. The file is YAML,
checked against ``schemas/staticpodd-config.schema.json``; every key is optional and a missing
file means all defaults. ``schemas/staticpodd.example.yaml`` documents each key with its default.

This module must stay cheap to import (the fast CLI verbs read the config): PyYAML and jsonschema
are imported inside :func:`load_config`, never at module top.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .errors import ConfigError
from .layout import Layout
from .record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

SCHEMA_FILE = "staticpodd-config.schema.json"

#: Where the schema is looked for, in order: $STATICPODD_SCHEMA_DIR, a ``schemas/`` directory
#: shipped inside the package, the source tree's ``schemas/`` (editable install), pip's
#: data-files (``<sys.prefix>/share/staticpodd/schemas``, see pyproject.toml), and the
#: system-wide copy the .deb/.rpm install.
_SCHEMA_DIRS = (
    Path(__file__).resolve().parent / "schemas",
    Path(__file__).resolve().parent.parent / "schemas",
    Path(sys.prefix) / "share" / "staticpodd" / "schemas",
    Path("/usr/local/share/staticpodd/schemas"),
    Path("/usr/share/staticpodd/schemas"),
)


_QUANTITY_SUFFIXES = {
    "": 1, "m": 1e-3, "u": 1e-6, "n": 1e-9,
    "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip


def parse_quantity(value: str | float) -> float:
    """A Kubernetes resource quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``4``) as a number.

    Source: k8s.io/apimachinery/pkg/api/resource (quantity.go) suffixes. Raises ValueError.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    import re

    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(?:([eE][+-]?[0-9]+)|([a-zA-Z]{0,2}))", text)
    if not m or (m.group(3) or "") not in _QUANTITY_SUFFIXES:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number = float(m.group(1))
    if m.group(2):
        return number * 10 ** int(m.group(2)[1:])
    return number * _QUANTITY_SUFFIXES[m.group(3) or ""]


class NodeCapacity(FrozenRecord):
    """Node allocatable for the node-fit check; None = read ``/proc/cpuinfo`` / ``/proc/meminfo``.

    ``cpu``: a Kubernetes quantity string (``"4"``, ``"3500m"``) or a number of cores.
    ``memory``: a quantity string (``"16Gi"``) or a number of bytes.
    """

    cpu: Final[str | float | None]
    memory: Final[str | int | None]

    def __init__(self, cpu: str | float | None = None, memory: str | int | None = None) -> None:
        self.cpu = cpu
        self.memory = memory

    @property
    def cpu_millis(self) -> int | None:
        """``cpu`` in millicores (``"3500m"`` -> 3500, ``"4"`` -> 4000), or None."""
        if self.cpu is None:
            return None
        return int(round(parse_quantity(self.cpu) * 1000))

    @property
    def memory_bytes(self) -> int | None:
        """``memory`` in bytes (``"16Gi"`` -> 17179869184), or None."""
        if self.memory is None:
            return None
        return int(parse_quantity(self.memory))


class HooksConfig(FrozenRecord):
    """``hooks:`` -- ``timeout`` in seconds per hook executable."""

    timeout: Final[float]

    def __init__(self, timeout: float = 30) -> None:
        self.timeout = timeout


class MetricsConfig(FrozenRecord):
    """``metrics:`` -- node-exporter textfile output; ``textfile_dir`` is a node path (under --root)."""

    enabled: Final[bool]
    textfile_dir: Final[str | None]

    def __init__(self, enabled: bool = False, textfile_dir: str | None = "/var/lib/prometheus/node-exporter") -> None:
        self.enabled = enabled
        self.textfile_dir = textfile_dir


class WaitConfig(FrozenRecord):
    """``wait:`` -- proof through the container runtime (``timeout``, ``settle`` in seconds;
    ``kubeconfig`` a node path under --root)."""

    timeout: Final[float]
    crictl: Final[str]
    runtime_endpoint: Final[str | None]
    rollback_on_failure: Final[bool]
    settle: Final[float]
    probe_host: Final[str | None]
    kubeconfig: Final[str | None]

    def __init__(self, timeout: float = 300, crictl: str = "crictl", runtime_endpoint: str | None = None,
                 rollback_on_failure: bool = False, settle: float = 2, probe_host: str | None = None,
                 kubeconfig: str | None = None) -> None:
        self.timeout = timeout
        self.crictl = crictl
        self.runtime_endpoint = runtime_endpoint
        self.rollback_on_failure = rollback_on_failure
        self.settle = settle
        self.probe_host = probe_host
        self.kubeconfig = kubeconfig


class RetentionConfig(FrozenRecord):
    """``retention:`` -- ``keep_versions`` newest per component, ``keep_for`` and ``interval`` in
    seconds (see :mod:`staticpodd.store.retention`; both None: nothing is pruned)."""

    keep_versions: Final[int | None]
    keep_for: Final[float | None]
    interval: Final[float]

    def __init__(self, keep_versions: int | None = None, keep_for: float | None = None, interval: float = 3600) -> None:
        self.keep_versions = keep_versions
        self.keep_for = keep_for
        self.interval = interval

    @property
    def active(self) -> bool:
        """Whether these rules can prune anything at all."""
        return self.keep_versions is not None or self.keep_for is not None


class ClusterConfig(FrozenRecord):
    """``cluster:`` -- publishing parks, pins and their Events to this node's Node object (see
    :mod:`staticpodd.cluster`); ``kubeconfig`` a node path under --root (None: the kubelet's
    ``kubelet.conf``), ``timeout`` in seconds per API call."""

    publish: Final[bool]
    kubeconfig: Final[str | None]
    queue_limit: Final[int]
    timeout: Final[float]

    def __init__(self, publish: bool = False, kubeconfig: str | None = None, queue_limit: int = 1000,
                 timeout: float = 2) -> None:
        self.publish = publish
        self.kubeconfig = kubeconfig
        self.queue_limit = queue_limit
        self.timeout = timeout


class Config(FrozenRecord):
    """The whole configuration, with the documented defaults (see the JSON Schema).

    Times are seconds (float), sizes bytes. ``source`` is the file it was read from (None for
    defaults only); ``digest`` is the sha256 of that file's bytes (None when absent).
    """

    manifest_dir: Final[str | None]
    kubernetes_version: Final[str | None]
    max_manifest_bytes: Final[int]
    lock_timeout: Final[float]
    rescan_interval: Final[float]
    debounce: Final[float]
    on_invalid: Final[str]
    on_stray: Final[str]
    node_name: Final[str | None]
    node_capacity: Final[NodeCapacity | None]
    hooks: Final[HooksConfig]
    metrics: Final[MetricsConfig]
    wait: Final[WaitConfig]
    retention: Final[RetentionConfig]
    cluster: Final[ClusterConfig]
    source: Final[str | None]
    digest: Final[str | None]

    _not_compared = ("source", "digest")

    def __init__(self, manifest_dir: str | None = None, kubernetes_version: str | None = None,
                 max_manifest_bytes: int = 1024 * 1024, lock_timeout: float = 30, rescan_interval: float = 20,
                 debounce: float = 0.3, on_invalid: str = "alert", on_stray: str = "alert",
                 node_name: str | None = None, node_capacity: NodeCapacity | None = None,
                 hooks: HooksConfig | None = None, metrics: MetricsConfig | None = None,
                 wait: WaitConfig | None = None, retention: RetentionConfig | None = None,
                 cluster: ClusterConfig | None = None, source: str | None = None, digest: str | None = None) -> None:
        self.manifest_dir = manifest_dir
        self.kubernetes_version = kubernetes_version
        self.max_manifest_bytes = max_manifest_bytes
        self.lock_timeout = lock_timeout
        self.rescan_interval = rescan_interval
        self.debounce = debounce
        self.on_invalid = on_invalid
        self.on_stray = on_stray
        self.node_name = node_name
        self.node_capacity = node_capacity
        self.hooks = HooksConfig() if hooks is None else hooks
        self.metrics = MetricsConfig() if metrics is None else metrics
        self.wait = WaitConfig() if wait is None else wait
        self.retention = RetentionConfig() if retention is None else retention
        self.cluster = ClusterConfig() if cluster is None else cluster
        self.source = source
        self.digest = digest

    @classmethod
    def default(cls) -> Config:
        """All defaults, as if the file were absent."""
        return cls()

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None, digest: str | None = None) -> Config:
        """Build from an already schema-checked mapping; missing keys take their defaults."""
        kw: dict[str, Any] = {}
        nested = {"hooks": HooksConfig, "metrics": MetricsConfig, "wait": WaitConfig, "retention": RetentionConfig,
                  "cluster": ClusterConfig}
        for name in cls._fields:
            if name in ("source", "digest") or name not in data:
                continue
            value = data[name]
            if name in nested:
                value = nested[name](**(value or {}))
            elif name == "node_capacity" and value is not None:
                value = NodeCapacity(**value)
            kw[name] = value
        return cls(**kw, source=source, digest=digest)

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping of every key (no ``source``/``digest``), as the file would spell it."""
        out = {name: value.field_values() if isinstance(value, FrozenRecord) else value
               for name, value in self.field_values().items()}
        out.pop("source", None)
        out.pop("digest", None)
        return out

    def with_changes(self, **changes: Any) -> Config:
        """A copy with some top-level keys replaced (tests, command-line overrides)."""
        return self.replace(**changes)


def schema_path() -> Path:
    """Path of ``staticpodd-config.schema.json``. Raises ConfigError when no copy is found."""
    env = os.environ.get("STATICPODD_SCHEMA_DIR")
    dirs = ([Path(env)] if env else []) + list(_SCHEMA_DIRS)
    for d in dirs:
        p = d / SCHEMA_FILE
        if p.is_file():
            return p
    raise ConfigError(
        f"cannot find {SCHEMA_FILE}",
        hint="set STATICPODD_SCHEMA_DIR or reinstall staticpodd; looked in " + ", ".join(map(str, dirs)),
    )


_schema_cache: dict[str, Any] | None = None


def load_schema() -> dict[str, Any]:
    """The config JSON Schema as a dict (read once per process). Raises ConfigError."""
    global _schema_cache
    if _schema_cache is None:
        p = schema_path()
        try:
            _schema_cache = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the config schema: {exc}", path=str(p)) from exc
    return _schema_cache


def _resolve_path(
    layout_or_path: Layout | str | os.PathLike[str] | None, path: str | os.PathLike[str] | None
) -> tuple[Path, bool]:
    """(file, explicit): the file to read and whether the caller named it (so it must exist)."""
    if path is not None:
        return Path(path), True
    if isinstance(layout_or_path, Layout):
        return layout_or_path.config_path, False
    if layout_or_path is not None:
        return Path(layout_or_path), True
    return Layout.build("/").config_path, False


def _non_finite(value: Any, path: list[Any]) -> tuple[list[Any], float] | None:
    """``(key path, value)`` of the first float in ``value`` that is NaN or infinite (YAML's
    ``.nan``, ``.inf``), or None. JSON Schema's ``minimum``/``maximum`` never refuse a NaN (every
    comparison with it is false), so a ``rescan_interval: .nan`` would pass and spin the daemon."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return path, value
    if isinstance(value, dict):
        for k, v in value.items():
            if (found := _non_finite(v, [*path, k])) is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _non_finite(v, [*path, i])) is not None:
                return found
    return None


def _node_at(root_node: Any, key_path: list[Any]) -> Any:
    """The YAML node at ``key_path`` inside a composed document, or the deepest one found."""
    import yaml

    node = root_node
    for key in key_path:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if getattr(k, "value", None) == str(key):
                    nxt = v
                    break
            if nxt is None:
                return node
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return node
    return node


def _key_node(root_node: Any, key_path: list[Any], key: str) -> Any:
    """The YAML node of the *key* ``key`` in the mapping at ``key_path`` (for unexpected keys)."""
    import yaml

    parent = _node_at(root_node, key_path)
    if isinstance(parent, yaml.MappingNode):
        for k, _v in parent.value:
            if getattr(k, "value", None) == key:
                return k
    return parent


def _describe(error: Any) -> tuple[str, list[Any], str | None]:
    """(message, key path to point at, unexpected key) for one jsonschema ValidationError."""
    key_path = list(error.absolute_path)
    dotted = ".".join(str(k) for k in key_path)
    if error.validator == "additionalProperties":
        # "Additional properties are not allowed ('foo' was unexpected)"
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        name = extra[0] if extra else None
        where = f"{dotted}.{name}" if dotted and name else (name or dotted or "(top level)")
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return f"{where}: unknown key (known keys here: {allowed})", key_path, name
    if error.validator == "type" and not key_path:
        return f"the file must be a mapping of keys, not {type(error.instance).__name__}", key_path, None
    return f"{dotted or '(top level)'}: {error.message}", key_path, None


#: The largest configuration file read (bytes): PyYAML takes about a second a MiB, and a real one is
#: a few KiB.
CONFIG_MAX_BYTES = 1 << 20


def read_config_bytes(file: Path) -> bytes:
    """The bytes of the configuration file, refused (ConfigError naming the path, owner and mode)
    when another user owns it or a group or others may write it, or the same of its directory: the
    configuration names programs root runs (``wait.crictl``) and the directory root acts on.
    Raises FileNotFoundError when it does not exist, ConfigError when it cannot be read."""
    from .errors import Untrusted
    from .node.trust import check_path, read_trusted

    try:
        check_path(file, "configuration file", parents_up_to=file.parent)
        data = read_trusted(file, "configuration file", limit=CONFIG_MAX_BYTES + 1, follow=True)
        if len(data) > CONFIG_MAX_BYTES:  # refused, not cut short: a cut file may still parse
            raise ConfigError(f"the configuration file is larger than {CONFIG_MAX_BYTES >> 20} MiB "
                              "(a configuration is a few KiB)", path=str(file),
                              hint="is this the right file? see staticpodd.yaml(5)")
        return data
    except Untrusted as exc:
        raise ConfigError(exc.message, path=exc.path, hint=exc.hint) from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file: {exc.strerror}", path=str(file)) from exc


def load_config(
    layout_or_path: Layout | str | os.PathLike[str] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
) -> Config:
    """Read and check the configuration file; returns a :class:`Config` with defaults filled in.

    ``layout_or_path``: a :class:`Layout` (reads ``layout.config_path``, i.e.
    ``<root>/etc/staticpodd/staticpodd.yaml``), or a file path. ``path`` (``--config FILE``)
    overrides both. A missing default file means all defaults; a missing file that the caller
    named explicitly is an error. An empty file means all defaults.

    Raises ConfigError (exit status 78) naming the file, the line/column and the key path, e.g.
    ``staticpodd.yaml:3:18: rescan_interval: -1 is less than the minimum of 1``, for unreadable
    files, YAML syntax errors, duplicate keys, and anything the JSON Schema refuses.
    """
    file, explicit = _resolve_path(layout_or_path, path)
    read = _read_config_text(file, explicit)
    if read is None:
        return Config.default()
    text, digest = read
    node, data = _parse_config_text(text, file)
    if data is None:
        data = {}
    _check_against_schema(data, node, file)
    _check_kubernetes_version(data, node, file)
    _check_textfile_dir(data, node, file, layout_or_path if isinstance(layout_or_path, Layout) else None)
    return Config.from_dict(data, source=str(file), digest=digest)


def _read_config_text(file: Path, explicit: bool) -> tuple[str, str] | None:
    """``(text, sha256 hex digest of the bytes)``, or None for a default file that is missing.

    Raises ConfigError for a named file that is missing, an unreadable file, or one not UTF-8.
    """
    import hashlib

    try:
        raw = read_config_bytes(file)
    except FileNotFoundError:
        if explicit:
            raise ConfigError("configuration file not found", path=str(file)) from None
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file: {exc.strerror}", path=str(file)) from exc
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"configuration file is not UTF-8 (byte {exc.start})", path=str(file)) from exc
    return text, digest


def _parse_config_text(text: str, file: Path) -> tuple[Any, Any]:
    """``(composed YAML node, loaded data)``; raises ConfigError for anchors or aliases,
    duplicate keys and YAML syntax errors, with the line and column."""
    import yaml

    try:
        # Anchors and aliases have no use in this file, and a self-referencing alias would send
        # the key checks below round in circles: refuse them before composing the document.
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = event.start_mark
                raise ConfigError(
                    "YAML anchors and aliases (&name, *name) are not allowed in the configuration",
                    path=str(file),
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                    hint="write each value out in full",
                )
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        _check_duplicate_keys(node, file)
        from .manifest.yamlsafe import safe_load

        data = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        msg = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
        raise ConfigError(
            msg,
            path=str(file),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint="fix the YAML syntax; the daemon keeps running with its previous configuration on reload",
        ) from exc
    return node, data


def _check_against_schema(data: Any, node: Any, file: Path) -> None:
    """Raise ConfigError listing every value the JSON Schema refuses (each with its line and
    field), or the first number that is not finite."""
    errors: list[Any] = []
    if data != {}:  # nothing set (the packaged file is all comments) is all defaults: no schema
        # library in the daemon's memory for it (about 4 MB)
        import jsonschema

        validator_cls = jsonschema.validators.validator_for(load_schema())
        validator = validator_cls(load_schema())
        errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    bad_number = _non_finite(data, [])
    if bad_number is not None and not errors:  # .nan passes every minimum and maximum
        target = _node_at(node, bad_number[0])
        mark = getattr(target, "start_mark", None)
        where = ".".join(map(str, bad_number[0]))
        raise ConfigError(
            f"{where}: {bad_number[1]!r} is not a number of seconds or bytes (not finite)",
            path=str(file),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            field=where,
            hint="write a finite number, or remove the key for its default",
        )
    if errors:
        located = sorted((_locate(node, e, file) for e in errors), key=lambda x: (x[1] or 0, x[2] or 0))
        message, line, column, field_name = located[0]
        if len(located) > 1:
            # Every mistake at once, each with its file, line and field: fixing them one run at a
            # time is what an operator at 3 a.m. should not have to do.
            others = "; ".join(
                f"{file}:{ln or '?'}{f':{col}' if col else ''}: {msg}" for msg, ln, col, _f in located[1:]
            )
            message = f"{message} (and {len(located) - 1} more: {others})"
        raise ConfigError(
            message,
            path=str(file),
            line=line,
            column=column,
            field=field_name,
            hint="every key and its default: /usr/share/doc/staticpodd/examples/staticpodd.example.yaml "
            "(packages) or schemas/staticpodd.example.yaml (source)",
            details={"problems": [
                {"message": msg, "path": str(file), "line": ln, "column": col, "field": f}
                for msg, ln, col, f in located
            ]},
        )


def _check_kubernetes_version(data: dict[str, Any], node: Any, file: Path) -> None:
    """Raise ConfigError when kubernetes_version is not a minor the validator knows."""
    version = data.get("kubernetes_version")
    if version is not None:  # the schema checks the form; only the validator knows its minors
        from .resources import parse_version

        try:
            parse_version(str(version))
        except ValueError as exc:
            target = _key_node(node, [], "kubernetes_version")
            mark = getattr(target, "start_mark", None)
            raise ConfigError(
                f"kubernetes_version: {exc}",
                path=str(file),
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
                field="kubernetes_version",
                hint="set one of the supported minors, or remove the key (the newest is used)",
            ) from None

def _check_textfile_dir(data: dict[str, Any], node: Any, file: Path, layout: Layout | None) -> None:
    """Refuse (ConfigError, naming the file, line and field) a ``metrics.textfile_dir`` that is the
    manifest directory (the metrics file would sit where the kubelet reads every non-dot file as a
    pod) or that exists and is not a directory (``/etc/passwd``: every write would fail). A
    directory that does not exist yet passes: node_exporter's package may create it later, and the
    daemon reports a failed write as a problem."""
    tdir = (data.get("metrics") or {}).get("textfile_dir")
    if not tdir:
        return
    from .layout import DEFAULT_MANIFEST_DIR, under_root

    root = layout.root if layout is not None else Path("/")
    if data.get("manifest_dir"):
        mdir = under_root(root, data["manifest_dir"])
    else:
        mdir = layout.manifest_dir if layout is not None else under_root(root, DEFAULT_MANIFEST_DIR)
    where = under_root(root, tdir)
    if os.path.realpath(where) == os.path.realpath(mdir):
        problem = "is the manifest directory; the kubelet would read the metrics file there as a pod"
    elif os.path.lexists(where) and not os.path.isdir(where):
        problem = "exists and is not a directory; the metrics file could never be written there"
    else:
        return
    target = _node_at(node, ["metrics", "textfile_dir"])
    mark = getattr(target, "start_mark", None)
    raise ConfigError(
        f"metrics.textfile_dir: {tdir} {problem}",
        path=str(file),
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        field="metrics.textfile_dir",
        hint="point it at node_exporter's textfile directory (/var/lib/prometheus/node-exporter)",
    )


def _locate(node: Any, error: Any, file: Path) -> tuple[str, int | None, int | None, str | None]:
    """One schema error as ``(message, line, column, field)``: 1-based line and column of the key
    or value in ``file``'s YAML ``node`` (None when unknown), the dotted field path."""
    message, key_path, extra_key = _describe(error)
    target = _key_node(node, key_path, extra_key) if extra_key else _node_at(node, key_path)
    mark = getattr(target, "start_mark", None)
    field_name = ".".join(str(k) for k in key_path + ([extra_key] if extra_key else [])) or None
    return message, (mark.line + 1 if mark else None), (mark.column + 1 if mark else None), field_name


def _check_duplicate_keys(node: Any, file: Path) -> None:
    """Refuse a mapping that names one key twice (YAML would silently keep the last)."""
    import yaml

    if node is None:
        return
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode):
            seen: dict[str, Any] = {}
            for k, v in n.value:
                key = getattr(k, "value", None)
                if isinstance(key, str) and key in seen:
                    raise ConfigError(
                        f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                        path=str(file),
                        line=k.start_mark.line + 1,
                        column=k.start_mark.column + 1,
                        field=key,
                    )
                seen[key] = k  # type: ignore[index]
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
