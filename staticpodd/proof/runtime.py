"""What the container runtime says about one static pod, read through ``crictl``.

No apiserver is needed: the kubelet gives every CRI pod sandbox of a static pod the pod's own
labels and annotations (``kubernetes.io/config.hash`` = the pod UID, ``kubernetes.io/config.source:
file``) plus ``io.kubernetes.pod.name`` / ``io.kubernetes.pod.namespace`` labels, so ``crictl``
shows them on the node (docs/kubelet-contract.md "Identity and restarts").

JSON shapes (kubernetes-sigs/cri-tools ``cmd/crictl/sandbox.go``, ``container.go``, ``util.go``:
protojson with ``EmitDefaultValues``, field names in lowerCamelCase, int64 as *strings*; older
crictl releases printed int64 as numbers, both are accepted):

- ``crictl pods -o json``  -> ``{"items": [PodSandbox]}`` with ``id``, ``metadata{name, uid,
  namespace, attempt}``, ``state`` (``SANDBOX_READY`` | ``SANDBOX_NOTREADY``), ``createdAt``
  (nanoseconds since the epoch), ``labels``, ``annotations``, ``runtimeHandler``.
- ``crictl ps -a -o json`` -> ``{"containers": [Container]}`` with ``id``, ``podSandboxId``,
  ``metadata{name, attempt}``, ``image{image}``, ``imageRef``, ``state`` (``CONTAINER_CREATED`` |
  ``CONTAINER_RUNNING`` | ``CONTAINER_EXITED`` | ``CONTAINER_UNKNOWN``), ``createdAt`` (ns),
  ``labels``, ``annotations``.
- ``crictl inspectp -o json ID`` -> ``{"status": PodSandboxStatus, "info": {...}}`` (a list of
  those for several IDs); ``status.createdAt`` is RFC 3339 there, ``status.network.ip`` the pod IP
  (empty for hostNetwork pods with containerd/CRI-O).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence

from ..errors import RuntimeUnavailable
from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_SOURCE = "kubernetes.io/config.source"
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"

SANDBOX_READY = "SANDBOX_READY"
CONTAINER_RUNNING = "CONTAINER_RUNNING"
CONTAINER_EXITED = "CONTAINER_EXITED"

#: Longest a single crictl call may take (seconds); the wait loop also bounds it by its deadline.
CRICTL_CALL_TIMEOUT = 10.0


def _int(value: Any) -> int:
    """protojson int64 (a string) or an older crictl's number -> int; junk -> 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


class Sandbox(FrozenRecord):
    """One CRI pod sandbox (``crictl pods``). ``created_ns``: nanoseconds since the epoch."""

    id: Final[str]
    name: Final[str]
    namespace: Final[str]
    uid: Final[str]
    state: Final[str]
    created_ns: Final[int]
    attempt: Final[int]
    labels: Final[dict[str, str]]
    annotations: Final[dict[str, str]]
    ip: Final[str | None]

    def __init__(self, id: str, name: str, namespace: str, uid: str, state: str, created_ns: int, attempt: int = 0,
                 labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
                 ip: str | None = None) -> None:
        self.id = id
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.state = state
        self.created_ns = created_ns
        self.attempt = attempt
        self.labels = {} if labels is None else labels
        self.annotations = {} if annotations is None else annotations
        self.ip = ip

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Sandbox:
        """Parse one ``items[]`` member of ``crictl pods -o json`` (or an inspectp ``status``)."""
        meta = item.get("metadata") or {}
        created = item.get("createdAt")
        created_ns = _int(created) if not (isinstance(created, str) and "T" in created) else 0
        network = item.get("network") or {}
        return cls(
            id=str(item.get("id", "")),
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            uid=str(meta.get("uid", "")),
            state=str(item.get("state", "")),
            created_ns=created_ns,
            attempt=_int(meta.get("attempt")),
            labels=_str_map(item.get("labels")),
            annotations=_str_map(item.get("annotations")),
            ip=(str(network.get("ip")) or None) if isinstance(network, Mapping) and network.get("ip") else None,
        )

    @property
    def ready(self) -> bool:
        return self.state == SANDBOX_READY

    @property
    def config_hash(self) -> str | None:
        """``kubernetes.io/config.hash``; the sandbox UID is the same value for a static pod."""
        return self.annotations.get(CONFIG_HASH) or self.uid or None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "namespace": self.namespace,
            "state": self.state,
            "config_hash": self.config_hash,
            "created_ns": self.created_ns,
            "attempt": self.attempt,
        }


class Container(FrozenRecord):
    """One CRI container (``crictl ps -a``). ``created_ns``: nanoseconds since the epoch."""

    id: Final[str]
    pod_sandbox_id: Final[str]
    name: Final[str]
    state: Final[str]
    created_ns: Final[int]
    attempt: Final[int]
    image: Final[str]
    labels: Final[dict[str, str]]

    def __init__(self, id: str, pod_sandbox_id: str, name: str, state: str, created_ns: int, attempt: int = 0,
                 image: str = "", labels: dict[str, str] | None = None) -> None:
        self.id = id
        self.pod_sandbox_id = pod_sandbox_id
        self.name = name
        self.state = state
        self.created_ns = created_ns
        self.attempt = attempt
        self.image = image
        self.labels = {} if labels is None else labels

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Container:
        """Parse one ``containers[]`` member of ``crictl ps -o json``."""
        meta = item.get("metadata") or {}
        image = item.get("image") or {}
        return cls(
            id=str(item.get("id", "")),
            pod_sandbox_id=str(item.get("podSandboxId", "")),
            name=str(meta.get("name", "")),
            state=str(item.get("state", "")),
            created_ns=_int(item.get("createdAt")),
            attempt=_int(meta.get("attempt")),
            image=str(image.get("image", "")) if isinstance(image, Mapping) else str(image),
            labels=_str_map(item.get("labels")),
        )

    @property
    def running(self) -> bool:
        return self.state == CONTAINER_RUNNING

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pod_sandbox_id": self.pod_sandbox_id,
            "name": self.name,
            "state": self.state,
            "created_ns": self.created_ns,
            "attempt": self.attempt,
        }


class Crictl:
    """Runs ``crictl`` and parses its JSON.

    ``executable``: name looked up on PATH or a path. ``runtime_endpoint``: passed as
    ``--runtime-endpoint`` when set; otherwise crictl uses its own config (``/etc/crictl.yaml``,
    ``CONTAINER_RUNTIME_ENDPOINT``) and defaults.
    """

    def __init__(
        self,
        executable: str = "crictl",
        runtime_endpoint: str | None = None,
        *,
        call_timeout: float = CRICTL_CALL_TIMEOUT,
    ) -> None:
        self.executable = executable
        self.runtime_endpoint = runtime_endpoint
        self.call_timeout = call_timeout

    def command(self, *args: str) -> list[str]:
        """The argv for ``crictl [--runtime-endpoint E] ARGS``."""
        argv = [self.executable]
        if self.runtime_endpoint:
            argv += ["--runtime-endpoint", self.runtime_endpoint]
        return argv + list(args)

    def run(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run crictl; raise RuntimeUnavailable when it is missing, fails or hangs.

        ``timeout`` (seconds) is capped by ``call_timeout``.
        """
        argv = self.command(*args)
        limit = self.call_timeout if timeout is None else max(0.1, min(timeout, self.call_timeout))
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=limit, check=False, stdin=subprocess.DEVNULL
            )
        except FileNotFoundError as exc:
            raise RuntimeUnavailable(
                f"cannot run {self.executable!r}: not found",
                hint="install crictl (cri-tools) or pass --crictl PATH; or leave out --wait",
            ) from exc
        except PermissionError as exc:
            raise RuntimeUnavailable(f"cannot run {self.executable!r}: permission denied") from exc
        except subprocess.TimeoutExpired as exc:
            raise RuntimeUnavailable(
                f"{' '.join(argv[1:])} did not answer within {limit:.0f} s",
                hint="check the CRI endpoint (--runtime-endpoint, /etc/crictl.yaml) and the runtime service",
            ) from exc
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise RuntimeUnavailable(
                f"crictl {args[0] if args else ''} failed: {last}",
                hint="check the CRI endpoint (--runtime-endpoint, /etc/crictl.yaml) and the runtime service",
                details={"argv": argv, "exit_status": proc.returncode},
            )
        return proc

    def _json(self, *args: str, timeout: float | None = None) -> Any:
        proc = self.run(*args, timeout=timeout)
        try:
            return json.loads(proc.stdout or "null")
        except ValueError as exc:
            raise RuntimeUnavailable(f"crictl {args[0]} printed something that is not JSON: {exc}") from exc

    def pods(self, *, timeout: float | None = None) -> list[Sandbox]:
        """All pod sandboxes, ready or not (``crictl pods -o json``)."""
        doc = self._json("pods", "-o", "json", timeout=timeout)
        items = doc.get("items") if isinstance(doc, Mapping) else None
        return [Sandbox.from_json(i) for i in items or [] if isinstance(i, Mapping)]

    def containers(self, *, timeout: float | None = None) -> list[Container]:
        """All containers in any state (``crictl ps -a -o json``)."""
        doc = self._json("ps", "-a", "-o", "json", timeout=timeout)
        items = doc.get("containers") if isinstance(doc, Mapping) else None
        return [Container.from_json(i) for i in items or [] if isinstance(i, Mapping)]

    def inspect_pod(self, sandbox_id: str, *, timeout: float | None = None) -> Sandbox | None:
        """``crictl inspectp -o json ID`` -> the sandbox with its annotations and pod IP."""
        doc = self._json("inspectp", "-o", "json", sandbox_id, timeout=timeout)
        if isinstance(doc, list):
            doc = doc[0] if doc else None
        status = doc.get("status") if isinstance(doc, Mapping) else None
        return Sandbox.from_json(status) if isinstance(status, Mapping) else None

    def exec_sync(self, container_id: str, command: Sequence[str], timeout: float) -> tuple[int, str]:
        """Run an exec probe's command in a container (``crictl exec --sync --timeout``).

        Returns (exit status, last line of output). The kubelet runs exec probes the same way
        (CRI ExecSync). Raises RuntimeUnavailable only when crictl itself cannot be run.
        """
        argv = self.command("exec", "--sync", "--timeout", str(max(1, int(timeout))), container_id, *command)
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout + 5,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise RuntimeUnavailable(f"cannot run {self.executable!r}: not found") from exc
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {timeout:g} s"
        out = (proc.stdout + proc.stderr).strip().splitlines()
        return proc.returncode, out[-1] if out else ""


def default_node_name() -> str:
    """The kubelet's default node name: the host name, lower-cased (``--hostname-override`` and
    cloud providers may differ: pass ``--node-name``)."""
    return os.uname().nodename.strip().lower()
