"""The two answers to "does the kubelet refuse to decode these bytes" agree.

:func:`staticpodd.validate.refused.kubelet_refuses` is the daemon's cheap first look on a writer's close
(stdlib json / PyYAML's C loader); the validator's decoder (:func:`staticpodd.manifest.decoding.decode`
plus the identity check, :mod:`staticpodd.validate.identity`) is the careful one, a reproduction
of go-yaml v2 and Go's encoding/json. They drifted once; this pins them against each other over
every file of the shared corpus and over generated edge inputs. Where they disagree today the
case was marked xfail when the test was written (eight inputs: the 10 MB vs 10 MiB limit, invalid
UTF-8 in JSON, ``"\\/"``, ``.nan``, ``.inf``, a null key, billion laughs, YAML nested 500 deep); since
then ``kubelet_refuses`` is the decoder's own first stage, and this test keeps it that way.

The decoder's verdict is limited to what ``kubelet_refuses`` claims to cover: the bytes decode
(size, encoding, syntax, values YAMLToJSON cannot encode), and they are one ``apiVersion: v1``,
``kind: Pod`` with a ``metadata.name`` (the identity codes that stop validation). Name *validity*
and the rest of ValidatePodCreate are the gate's, at the normal pace.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from spd_testlib import corpus_dir

from staticpodd.manifest.decoded import KUBELET_MAX_BYTES, DecodeProblem
from staticpodd.manifest.decoding import decode
from staticpodd.validate.identity import DECODE_CODES, identity_findings
from staticpodd.validate.refused import kubelet_refuses


def decoder_refuses(data: bytes) -> str | None:
    """The validator decoder's answer: the code that makes the kubelet refuse ``data``, or None."""
    try:
        decoded = decode(data, max_bytes=KUBELET_MAX_BYTES)
    except DecodeProblem as problem:  # raised: refused, by the kubelet itself unless it says it accepts
        return None if problem.kubelet == "accepts" else problem.code
    for finding in identity_findings(decoded.doc, decoded.positions, "f"):
        if finding.code in DECODE_CODES:
            return finding.code
    return None


def _corpus_files() -> list[Path]:
    corpus = corpus_dir()
    if corpus is None:
        return []
    return sorted(p for p in corpus.rglob("*") if p.is_file())


POD = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\nspec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n"
JSON_POD = b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": []}}'


def _pad(size: int) -> bytes:
    """A valid pod padded with a YAML comment to exactly ``size`` bytes."""
    return POD + b"#" + b"x" * (size - len(POD) - 2) + b"\n"


def _laughs() -> bytes:
    lines = [b'a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        prev = b"*a%d" % (i - 1)
        lines.append(b"a%d: &a%d [%s]" % (i, i, b", ".join([prev] * 9)))
    return POD + b"\n".join(lines) + b"\n"


EDGES: list = [
    pytest.param(b"", id="empty"),
    pytest.param(b"   \n\t\n  ", id="whitespace-only"),
    pytest.param(b"\n\n", id="newlines-only"),
    pytest.param(b"# just a comment\n", id="comment-only"),
    pytest.param(b"\xef\xbb\xbf", id="utf8-bom-only"),
    pytest.param(b"\xef\xbb\xbf" + POD, id="utf8-bom-pod"),
    pytest.param(b"\xef\xbb\xbf" + JSON_POD, id="utf8-bom-json-pod"),
    pytest.param(b"\xff\xfe" + POD.decode().encode("utf-16-le"), id="utf16le-bom-pod"),
    pytest.param(b"\xfe\xff" + POD.decode().encode("utf-16-be"), id="utf16be-bom-pod"),
    pytest.param(b"\xff\xfe\x00\x00" + POD.decode().encode("utf-32-le"), id="utf32-bom-pod"),
    pytest.param(b"---", id="dashes-only"),
    pytest.param(b"---\n", id="dashes-newline"),
    pytest.param(b"---\n---\n", id="two-empty-documents"),
    pytest.param(b"---\n" + POD, id="leading-dashes-pod"),
    pytest.param(POD + b"---\n", id="pod-trailing-dashes"),
    pytest.param(POD + b"---\nkind: ConfigMap\n", id="pod-then-configmap"),
    pytest.param(POD + b"---\n[unclosed\n", id="pod-then-broken-document"),
    pytest.param(b"kind: ConfigMap\n---\n" + POD, id="configmap-then-pod"),
    pytest.param(POD, id="pod"),
    pytest.param(JSON_POD, id="json-pod"),
    pytest.param(b"  \n\t" + JSON_POD, id="json-pod-leading-space"),
    pytest.param(JSON_POD[:-1] + b",}", id="json-trailing-comma"),
    pytest.param(b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web",}}', id="json-trailing-comma-inner"),
    pytest.param(b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}} // c', id="json-comment"),
    pytest.param(b"{apiVersion: v1, kind: Pod, metadata: {name: web}}", id="json-prefixed-flow-yaml"),
    pytest.param(b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "x": NaN}', id="json-nan"),
    pytest.param(b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "name": "w2"}}', id="json-duplicate-key"),
    pytest.param(b"{}", id="json-empty-object"),
    pytest.param(b"[]", id="json-list"),
    pytest.param(b"{" * 10001 + b"}" * 10001, id="json-deep-10001"),
    pytest.param(b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "x": ' + b"[" * 9000 + b"]" * 9000 + b"}", id="json-deep-9000"),
    pytest.param(POD + b"x: " + b"[" * 10001 + b"]" * 10001 + b"\n", id="yaml-deep-10001"),
    pytest.param(POD + b"x: " + b"[" * 500 + b"]" * 500 + b"\n", id="yaml-deep-500"),
    pytest.param(POD + b"x: " + b"[" * 999 + b"]" * 999 + b"\n", id="yaml-deep-999"),
    pytest.param(POD + b"x: " + b"[" * 5000 + b"]" * 5000 + b"\n", id="yaml-deep-5000-kubelet-runs-it"),
    pytest.param(POD + b"y:\n" + b"".join(b" " * (i + 1) + b"a:\n" for i in range(1500)) + b" " * 1501 + b"b\n",
                 id="yaml-block-deep-1500-kubelet-runs-it"),
    pytest.param(POD + b"# caf\xe9\n", id="invalid-utf8-in-comment"),
    pytest.param(POD.replace(b"web", b"w\xffb"), id="invalid-utf8-in-name"),
    pytest.param(JSON_POD.replace(b"web", b"w\xffb"), id="json-invalid-utf8-in-string"),
    pytest.param(b"\x00" + POD, id="nul-byte"),
    pytest.param(b"apiVersion: v1\nmetadata: {name: web}\n", id="kind-missing"),
    pytest.param(b"kind: Pod\nmetadata: {name: web}\n", id="api-version-missing"),
    pytest.param(b"apiVersion: v1\nkind: Pod\nspec: {}\n", id="name-missing"),
    pytest.param(b"apiVersion: v1\nkind: Pod\nmetadata: {name: ''}\n", id="name-empty"),
    pytest.param(b"apiVersion: v1\nkind: Pod\nmetadata: []\n", id="metadata-not-a-mapping"),
    pytest.param(b"apiVersion: apps/v1\nkind: Pod\nmetadata: {name: web}\n", id="wrong-api-version"),
    pytest.param(b"apiVersion: v1\nkind: pod\nmetadata: {name: web}\n", id="lower-case-kind"),
    pytest.param(b"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: web}\n", id="daemonset"),
    pytest.param(b"just a string\n", id="plain-scalar"),
    pytest.param(b"- a\n- b\n", id="yaml-list"),
    pytest.param(b"apiVersion: v1\nkind: Pod\nmetadata:\n\tname: web\n", id="tab-indent"),
    pytest.param(POD + b"spec: {}\n", id="duplicate-key"),
    pytest.param(POD + b"x: [1, 2\n", id="yaml-syntax-error"),
    pytest.param(POD + b"x: &a 1\ny: *b\n", id="unknown-alias"),
    pytest.param(POD + b"x: !!int abc\n", id="bad-explicit-tag"),
    pytest.param(POD + b'x: "a\\/b"\n', id="slash-escape"),
    pytest.param(POD + b"x: .nan\n", id="yaml-nan"),
    pytest.param(POD + b"x: .inf\n", id="yaml-inf"),
    pytest.param(POD + b"? [a]\n: b\n", id="sequence-key"),
    pytest.param(POD + b"~: b\n", id="null-key"),
    pytest.param(POD + b"x: 2001-12-14t21:59:43.10-05:00\n", id="timestamp"),
    pytest.param(POD + b"x: !!binary aGVsbG8=\n", id="binary"),
    pytest.param(_laughs(), id="billion-laughs"),
    pytest.param(_pad(KUBELET_MAX_BYTES + 1), id="over-10MiB"),
    pytest.param(_pad(10 * 1000 * 1000 + 1), id="between-10MB-and-10MiB"),
    pytest.param(_pad(10 * 1000 * 1000), id="exactly-10MB"),
]

def _case(data: bytes, case_id: str) -> None:
    quick = kubelet_refuses(data)
    careful = decoder_refuses(data)
    assert (quick is None) == (careful is None), (
        f"refused.kubelet_refuses says {quick!r}, the validator's decoder says {careful!r}"
    )


@pytest.mark.parametrize("data", EDGES)
def test_the_cheap_check_agrees_with_the_decoder_on_edge_inputs(data: bytes, request: pytest.FixtureRequest) -> None:
    _case(data, request.node.callspec.id)


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_the_cheap_check_agrees_with_the_decoder_on_the_corpus(path: Path) -> None:
    _case(path.read_bytes(), path.name)


def test_the_corpus_is_there() -> None:
    assert _corpus_files(), "../shared/corpus is missing: the agreement test would pin nothing"

