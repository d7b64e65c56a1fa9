"""Layer 1: reading bytes the way the kubelet's sigs.k8s.io/yaml (go-yaml v2) step does."""

from __future__ import annotations

import hashlib

import pytest

from staticpodd.errors import InvalidManifest
from staticpodd.manifest.decoded import DEFAULT_MAX_BYTES, DecodeProblem
from staticpodd.manifest.decoding import decode, pod_identity
from staticpodd.manifest.yamlresolve import resolve_plain
from staticpodd.validate import validate_bytes
from staticpodd.validate.identity import parse_manifest
from tests.validate.conftest import NODE, codes

POD = b"""apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  hostNetwork: yes
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.15-0
"""


def problem(data: bytes, **kw) -> DecodeProblem:
    with pytest.raises(DecodeProblem) as exc:
        decode(data, **kw)
    return exc.value


def test_parse_manifest_returns_identity_digest_and_yaml11_booleans():
    m = parse_manifest(POD, "etcd.yaml")
    assert (m.namespace, m.name) == ("kube-system", "etcd")
    assert m.digest == hashlib.sha256(POD).hexdigest()
    assert m.doc["spec"]["hostNetwork"] is True
    assert m.where("spec.containers[0].image") == (10, 12)


def test_namespace_defaults_to_default():
    m = parse_manifest(b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n", "x")
    assert m.namespace == "default"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", True),
        ("No", False),
        ("on", True),
        ("OFF", False),
        ("y", True),
        ("n", False),
        ("true", True),
        ("True", True),
        ("tRUE", "tRUE"),
        ("~", None),
        ("null", None),
        ("", None),
        ("0777", 511),
        ("0x1F", 31),
        ("0o17", 15),
        ("0b101", 5),
        ("1_000", 1000),
        ("+5", 5),
        ("-0", 0),
        ("1e3", 1000),
        ("1.0", 1),
        ("1.5", 1.5),
        (".5", 0.5),
        ("08", 8),
        ("1:20", "1:20"),
        ("2001-12-14", "2001-12-14"),
        ("0.1.2", "0.1.2"),
        ("+", "+"),
        ("v1", "v1"),
        ("12Mi", "12Mi"),
        ("9223372036854775807", 9223372036854775807),
    ],
)
def test_plain_scalars_resolve_like_go_yaml_v2(text, value):
    got = decode(f"v: {text}".encode()).doc["v"]
    assert got == value and type(got) is type(value)


def test_quoted_scalars_stay_strings():
    doc = decode(b"a: \"yes\"\nb: '0777'\nc: |\n  on\n").doc
    assert doc == {"a": "yes", "b": "0777", "c": "on\n"}


def test_non_string_keys_become_json_strings():
    assert decode(b"1: a\ntrue: b\nn: c\n").doc == {"1": "a", "true": "b", "false": "c"}


def test_json_is_accepted_and_a_flow_mapping_is_yaml_only_after_a_first_line():
    assert decode(b'{"a": [1, 2, {"b": null}]}').doc == {"a": [1, 2, {"b": None}]}
    # first non-space byte '{': strict JSON to the kubelet (apimachinery util/yaml hasJSONPrefix)
    assert problem(b"{a: [x, z], b: {c: d}}").code == "json-syntax"
    assert decode(b"# flow\n{a: [x, z], b: {c: d}}").doc == {"a": ["x", "z"], "b": {"c": "d"}}
    assert decode(b"a: {b: c}\n").syntax == "yaml"


def test_y_and_n_are_booleans_even_as_keys():
    # go-yaml v2 resolves y/n as YAML 1.1 booleans; sigs.k8s.io/yaml then writes bool keys as strings
    assert decode(b"y: 1\nlist: [y, n]\n").doc == {"true": 1, "list": [True, False]}
    assert resolve_plain("y") == ("tag:yaml.org,2002:bool", True)


def test_merge_keys_and_aliases_expand():
    doc = decode(b"base: &b {p: 1, q: 2}\nthing:\n  <<: *b\n  q: 3\n").doc
    assert doc["thing"] == {"p": 1, "q": 3}


def test_tab_indentation_is_fatal_with_its_line():
    p = problem(b"apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n")
    assert (p.code, p.line, p.column) == ("yaml-tab", 4, 1)


def test_tab_inside_a_value_is_fine():
    assert decode(b"a: 'x\ty'\n").doc == {"a": "x\ty"}


def test_duplicate_keys_are_our_strictness_naming_both_lines_and_the_last_value_wins():
    d = decode(b"metadata:\n  name: a\n  name: b\n")
    assert d.doc == {"metadata": {"name": "b"}}  # what the kubelet runs (docs/kubelet-contract.md)
    (p,) = d.notes
    assert p.code == "yaml-duplicate-key" and p.line == 3 and "line 2" in p.message
    assert p.field == "metadata.name" and p.kubelet == "accepts"


def test_same_key_in_different_mappings_is_fine():
    assert decode(b"a: {name: 1}\nb: {name: 2}\n").doc == {"a": {"name": 1}, "b": {"name": 2}}


def test_second_document_is_our_strictness_but_a_trailing_separator_is_not():
    d = decode(b"a: 1\n---\nb: 2\n")
    assert d.doc == {"a": 1}  # the kubelet reads the first document only
    (p,) = d.notes
    assert (p.code, p.line, p.kubelet) == ("multiple-documents", 3, "accepts")
    assert decode(b"---\na: 1\n---\n").extra_documents == 1
    assert not decode(b"---\na: 1\n---\n").notes


def test_billion_laughs_is_bounded():
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    p = problem("\n".join(lines).encode(), max_bytes=DEFAULT_MAX_BYTES)
    assert p.code == "yaml-excessive-aliasing"


def test_modest_alias_use_is_fine():
    doc = decode(b"v: &v {a: 1}\nlist: [*v, *v, *v]\n").doc
    assert doc["list"] == [{"a": 1}] * 3


def test_recursive_alias_is_refused():
    assert problem(b"a: &x [1, *x]\n").code == "yaml-syntax"


def test_size_cap_and_utf8():
    (note,) = decode(b"a: [" + b"1, " * 20 + b"1]\n", max_bytes=20).notes  # ours; the kubelet reads up to 10 MiB
    assert (note.code, note.kubelet) == ("too-large", "accepts")
    p = problem(b"a: 1\nb: \xff\n")
    assert (p.code, p.line, p.column) == ("not-utf8", 2, 4)


def test_nan_and_inf_cannot_become_json():
    assert problem(b"a: .inf\n").code == "yaml-unsupported-value"


def test_missing_comma_in_json_names_line_and_column():
    p = problem(b'{\n  "a": 1\n  "b": 2\n}\n')
    assert p.code == "json-syntax" and (p.line, p.column) == (3, 3)
    assert "invalid character '\"' after object key:value pair" in p.message


def test_parse_manifest_raises_invalid_manifest_with_findings():
    with pytest.raises(InvalidManifest) as exc:
        parse_manifest(b"kind: Pod\napiVersion: v1\nmetadata:\n  labels: {}\n", "/tmp/x.yaml")
    err = exc.value
    assert err.path == "/tmp/x.yaml" and err.findings and err.findings[0].code == "name-missing"
    assert err.to_dict()["findings"][0]["code"] == "name-missing"


def test_parse_manifest_refuses_syntax_errors_with_position():
    with pytest.raises(InvalidManifest) as exc:
        parse_manifest(b"a: [1,\n", "f")
    assert exc.value.line is not None and exc.value.findings[0].code == "yaml-syntax"


def test_pod_identity_is_none_for_non_pods():
    assert pod_identity(POD) == ("kube-system", "etcd")
    assert pod_identity(b"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\n") is None
    assert pod_identity(b"\t") is None
    assert pod_identity(b"") is None


def test_validate_bytes_reports_unreadable_input_as_a_finding():
    assert codes(validate_bytes(b"", "e.yaml", NODE)) == ["empty"]
    assert codes(validate_bytes(b"[1, 2]", "l.yaml", NODE)) == ["not-an-object"]
