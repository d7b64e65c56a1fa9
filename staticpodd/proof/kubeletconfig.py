"""The kubelet's relist period, read from its config file (docs/kubelet-contract.md "When the kubelet looks").

An inotify-triggered re-read that fails to parse keeps the old pod until the next full relist
(docs/kubelet-contract.md, "What a broken file does to a running pod"), so "the same pod still runs"
right after a swap proves nothing until one ``fileCheckFrequency`` has passed: the prover needs
that period. It is read from the KubeletConfiguration the daemon already reads ``staticPodPath``
from (``<root>/var/lib/kubelet/config.yaml``); the kubelet's own default is 20 s.
"""

from __future__ import annotations

import re
from pathlib import Path

#: The kubelet's default fileCheckFrequency (KubeletConfiguration v1beta1 defaults), seconds.
DEFAULT_FILE_CHECK_FREQUENCY = 20.0

_FCF_RE = re.compile(r"""^fileCheckFrequency:\s*["']?([0-9][0-9a-zµ.]*)["']?\s*(?:#.*)?$""", re.M)
_GO_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")


def go_duration(text: str) -> float | None:
    """A Go ``time.Duration`` string (``20s``, ``1m0s``, ``1.5s``, ``500ms``) -> seconds, or None
    when it is not one."""
    t = text.strip()
    if not t:
        return None
    pos, total = 0, 0.0
    for m in _GO_PART.finditer(t):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _GO_UNIT[m.group(2)]
        pos = m.end()
    return total if pos == len(t) else None


def file_check_frequency(kubelet_config: Path) -> float:
    """The kubelet's ``fileCheckFrequency`` in seconds, from a KubeletConfiguration file.

    Returns the kubelet's default, 20 s, when the file is missing, unreadable, sets no value or
    sets one this reader does not understand (a wait then lasts at least the default relist:
    never a shorter, weaker proof). A value of 0 or less is taken as the default too.
    """
    try:
        text = kubelet_config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return DEFAULT_FILE_CHECK_FREQUENCY
    m = _FCF_RE.search(text)
    value = go_duration(m.group(1)) if m else None
    return value if value and value > 0 else DEFAULT_FILE_CHECK_FREQUENCY


def node_file_check_frequency(root: Path) -> float:
    """:func:`file_check_frequency` of the node under ``root`` (``<root>/var/lib/kubelet/config.yaml``,
    :data:`staticpodd.layout.KUBELET_CONFIG`): the one place that path and its relist are read."""
    from ..layout import KUBELET_CONFIG, under_root

    return file_check_frequency(under_root(root, KUBELET_CONFIG))
