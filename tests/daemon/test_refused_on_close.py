"""staticpodd.validate.refused.kubelet_refuses: the cheap first look the daemon takes when a writer closes
a live file, against docs/kubelet-contract.md "How a file is decoded". Agreement with a real
kubelet on the corpus and the hard cases is proven in tests/e2e/test_e2e_corpus_verdicts.py."""

from __future__ import annotations

import pytest

from staticpodd.validate.refused import kubelet_refuses

POD = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: x\n"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"  \n",
        POD.replace(b"  name: web", b"\tname: web"),
        b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},}',
        b'{ # comment\n"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}',
        b"{apiVersion: v1, kind: Pod, metadata: {name: web}}",
        b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": NaN}}',
        b"apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: web\n",
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  namespace: x\n",
        b"---\n---\n" + POD,  # an empty first document
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n" + POD,
    ],
)
def test_bytes_the_kubelet_drops_are_recognised(data: bytes) -> None:
    assert kubelet_refuses(data)


@pytest.mark.parametrize(
    "data",
    [
        POD,
        b"---\n" + POD,  # a document start marker, not an empty document
        b"# a comment\n" + b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},}',
        POD + b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
        POD.replace(b"  name: web\n", b"  name: old\n  name: web\n"),
        b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}',
    ],
)
def test_bytes_the_kubelet_runs_are_not(data: bytes) -> None:
    assert kubelet_refuses(data) is None
