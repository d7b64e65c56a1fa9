"""The records the first stage of decoding produces, and the size limits it enforces.

:class:`DecodeProblem` (one reason the bytes are not a readable manifest), :class:`Decoded`
(what :func:`staticpodd.manifest.decoding.decode` returns: the document the kubelet would get, its
positions and staticpodd's notes) and :class:`Manifest` (one parsed Pod, what
:func:`staticpodd.validate.identity.parse_manifest` returns), with :func:`too_large` and the two byte
limits. Shared by the YAML and JSON decoders and by ``staticpodd.validate``; imports neither.
"""

from __future__ import annotations

from staticpodd.manifest.positions import locate

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

DEFAULT_MAX_BYTES = 1 << 20
"""Our default size cap (bytes). The kubelet's own cap is 10 MB (``maxConfigLength``)."""

KUBELET_MAX_CONFIG_LENGTH = 10 * 1024 * 1024
"""The kubelet's ``maxConfigLength`` (10 MiB, pkg/kubelet/config/common.go). Its file source
reads a manifest with ``utilio.ReadAtMost(file, maxConfigLength)`` (k8s.io/utils/io), which
reads through an ``io.LimitedReader`` of that many bytes and fails with "the read limit is
reached" when the reader's remainder is ``<= 0``: a file of exactly 10 MiB is refused too."""

KUBELET_MAX_BYTES = KUBELET_MAX_CONFIG_LENGTH - 1
"""The largest manifest the kubelet reads (10 MiB - 1 byte): a size over it is refused."""

class DecodeProblem(Exception):
    """One reason the bytes are not a readable manifest (internal; becomes a Finding).

    ``code`` is the stable finding code; ``line``/``column`` are 1-based or None. ``kubelet``:
    what the kubelet does (``"refuses"``/``"accepts"``, see staticpodd.validate.findings), None
    for the code's usual level. Raised, it stops decoding (the kubelet refuses the bytes);
    collected in :attr:`Decoded.notes`, it is staticpodd's strictness and decoding went on.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
        field: str | None = None,
        kubelet: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint
        self.field = field
        self.kubelet = kubelet


class Manifest(FrozenRecord):
    """One parsed manifest.

    ``doc``: the JSON-compatible document sigs.k8s.io/yaml would produce.
    ``name``/``namespace``: ``metadata.name`` and ``metadata.namespace`` (or ``"default"``),
    before the kubelet appends ``-<node name>``. ``digest``: sha256 hex of the bytes.
    ``positions``: field path (``spec.containers[0].image``) -> 1-based (line, column).
    """

    doc: Final[dict]
    name: Final[str]
    namespace: Final[str]
    digest: Final[str]
    positions: Final[dict]

    _not_compared = ("positions",)

    def __init__(self, doc: dict, name: str, namespace: str, digest: str, positions: dict | None = None) -> None:
        self.doc = doc
        self.name = name
        self.namespace = namespace
        self.digest = digest
        self.positions = {} if positions is None else positions

    def where(self, field_path: str | None) -> tuple[int | None, int | None]:
        """(line, column) of ``field_path`` or its nearest recorded parent; (None, None) if unknown."""
        return locate(self.positions, field_path)


class Decoded(FrozenRecord):
    """Result of :func:`decode`: the document the kubelet would get, positions, and notes.

    ``doc``: any JSON type, or None for an empty file. ``positions``: field path -> (line,
    column). ``extra_documents``: later documents that are empty (a trailing ``---``).
    ``notes``: :class:`DecodeProblem` records the kubelet accepts but staticpodd refuses (its
    strictness: a duplicate key, a second document, a size over ``max_bytes``, non-UTF-8 bytes
    in JSON strings), each with ``kubelet="accepts"``. ``syntax``: ``"json"`` when the first
    non-space byte is ``{`` (strict JSON, as the kubelet reads it), else ``"yaml"``.
    ``encoding``: ``"utf-8"``, ``"utf-16-le"`` or ``"utf-16-be"`` (from a BOM).
    """

    doc: Final[Any]
    positions: Final[dict]
    extra_documents: Final[int]
    notes: Final[tuple]
    syntax: Final[str]
    encoding: Final[str]

    def __init__(self, doc: Any, positions: dict, extra_documents: int, notes: tuple = (), syntax: str = "yaml",
                 encoding: str = "utf-8") -> None:
        self.doc = doc
        self.positions = positions
        self.extra_documents = extra_documents
        self.notes = notes
        self.syntax = syntax
        self.encoding = encoding


def too_large(size: int, max_bytes: int) -> DecodeProblem:
    """The ``too-large`` problem for a file of ``size`` bytes (its real size: ``os.fstat``, not
    how much was read) over ``max_bytes``, saying truthfully whose limit it is.

    Over :data:`KUBELET_MAX_BYTES` (10 MiB, ``maxConfigLength`` in pkg/kubelet/config/file.go;
    docs/kubelet-contract.md "Which files are pods") the kubelet itself refuses the file and drops its pod
    (``kubelet="refuses"``). Between staticpodd's ``max_manifest_bytes`` (default
    :data:`DEFAULT_MAX_BYTES`, 1 MiB) and 10 MiB only staticpodd refuses it (``kubelet="accepts"``):
    the kubelet reads it and runs it (a 2 MiB file runs: docs/kubelet-contract.md), and the validator reads
    the rest of it, so any reason the kubelet has to refuse it is reported too.
    """
    if size > KUBELET_MAX_BYTES:
        return DecodeProblem(
            "too-large",
            f"file is {size} bytes; the kubelet reads at most {KUBELET_MAX_BYTES} bytes (a file of 10 MiB, "
            f"{KUBELET_MAX_CONFIG_LENGTH} bytes, or more fails its read with \"the read limit is reached\"): "
            "it refuses the file and drops its pod",
            hint="a static pod manifest is a few KB; move this file out of the manifest directory",
            kubelet="refuses",
        )
    return DecodeProblem(
        "too-large",
        f"file is {size} bytes, over staticpodd's {max_bytes}-byte limit (max_manifest_bytes); the kubelet "
        f"reads files of up to {KUBELET_MAX_BYTES} bytes (under 10 MiB) and runs this one if it is otherwise valid",
        hint="a static pod manifest is a few KB; raise max_manifest_bytes in staticpodd.yaml only if this "
        "is really a manifest",
        kubelet="accepts",
    )
