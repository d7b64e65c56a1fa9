"""Two levels (the two levels, not one): what the kubelet refuses vs staticpodd's own strictness.

Every deliberate strictness (``staticpodd.validate.codes.STRICTNESS``) is pinned here: the file is
an error for staticpodd (apply/validate refuse it, exit codes unchanged) while the finding says
the kubelet runs it. The real-kubelet tier (tests/e2e) treats any other disagreement with a real
kubelet as a failure. Also: the corrected verdicts ("The verdict model is wrong in
places") and the decoding corner cases, each against docs/kubelet-contract.md "How a file is decoded".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from staticpodd.errors import InvalidManifest
from staticpodd.validate import gate, kubelet_refuses, validate_bytes, validate_directory, verdict
from staticpodd.validate.codes import KUBELET, STRICTNESS
from tests.validate.conftest import NODE, codes, container, pod

README = Path(__file__).resolve().parents[2] / "docs/reference/validation.md"

YAML_POD = b"""apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
spec:
  containers:
  - name: main
    image: nginx:1.27
"""


def errors(found):
    return [(f.code, f.kubelet) for f in found if f.severity == "error"]


# ---------------------------------------------------------------- every strictness, pinned

def _strictness_inputs(tmp_path: Path) -> dict[str, tuple[str, list]]:
    """code -> (how, findings) for one input per listed strictness."""
    out: dict[str, tuple[str, list]] = {}
    dup = YAML_POD.replace(b"    image: nginx:1.27\n", b"    image: nginx:1.26\n    image: nginx:1.27\n")
    out["yaml-duplicate-key"] = ("a key given twice", validate_bytes(dup, "dup.yaml", NODE))
    multi = YAML_POD + b"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    out["multiple-documents"] = ("a second document after the Pod", validate_bytes(multi, "multi.yaml", NODE))
    big = b"# " + b"x" * (2 * 1024 * 1024) + b"\n" + YAML_POD  # 2 MiB: runs (docs/kubelet-contract.md)
    out["too-large"] = ("2 MiB", validate_bytes(big, "big.yaml", NODE))
    bad_utf8 = pod(meta={"annotations": {"note": "XX"}}).replace(b'"XX"', b'"X\xffX"')
    out["not-utf8"] = ("invalid UTF-8 inside a JSON string", validate_bytes(bad_utf8, "u.json", NODE))
    unknown = YAML_POD + b"  hostNetwok: true\n"
    out["schema-unknown-field"] = (
        "--strict and an unknown field",
        validate_bytes(unknown, "s.yaml", NODE.replace(strict=True)),
    )
    mdir = tmp_path / "manifests"
    mdir.mkdir()
    for name in ("web.yaml", "web.yaml.orig"):
        (mdir / name).write_bytes(YAML_POD)
        (mdir / name).chmod(0o600)
    out["duplicate-pod"] = (
        "two files define one pod",
        [f for f in validate_directory(mdir, NODE) if f.path.endswith("/web.yaml.orig")],
    )
    pdir = tmp_path / "ports"
    pdir.mkdir()
    apiserver = YAML_POD.replace(b"  name: web\n", b"  name: apiserver\n").replace(
        b"spec:\n", b"spec:\n  hostNetwork: true\n").replace(
        b"    image: nginx:1.27\n", b"    image: nginx:1.27\n    command: [kube-apiserver]\n")
    web = YAML_POD.replace(b"spec:\n", b"spec:\n  hostNetwork: true\n").replace(
        b"    image: nginx:1.27\n", b"    image: nginx:1.27\n    ports:\n    - containerPort: 6443\n")
    for name, data in (("apiserver.yaml", apiserver), ("web.yaml", web)):
        (pdir / name).write_bytes(data)
        (pdir / name).chmod(0o600)
    found = validate_directory(pdir, NODE)
    bound = {f.path for f in found if f.code == "host-port-bind-conflict"}
    out["host-port-bind-conflict"] = (
        "a declared port and the port kube-apiserver's --secure-port names (6443)",
        [f for f in found if f.path in bound],
    )
    return out


def test_every_strictness_is_an_error_the_kubelet_accepts(tmp_path):
    inputs = _strictness_inputs(tmp_path)
    assert set(inputs) == set(STRICTNESS), "each listed strictness needs an input here"
    for code, (how, found) in inputs.items():
        assert errors(found) == [(code, "accepts")], (code, how, [f.format() for f in found])
        v = verdict(found)
        assert (v.kubelet, v.staticpodd, v.kubelet_runs, v.strictness) == ("accepts", "refuses", True, (code,))
        assert not kubelet_refuses(found), code
        assert "staticpodd's own rule: the kubelet would run it" in found[0].format() or any(
            "staticpodd's own rule" in f.format() for f in found
        )


def test_the_strictness_list_is_complete_and_in_the_readme():
    accepted = {code for code, level in KUBELET.items() if level == "accepts"}
    assert accepted <= set(STRICTNESS), accepted - set(STRICTNESS)
    text = README.read_text()
    section = text.split("# Validation that agrees with the kubelet", 1)[1].split("\n## ", 1)[0]
    for code in STRICTNESS:
        assert f"`{code}`" in section, f"docs/reference/validation.md must list {code}"


def test_apply_refuses_both_levels_but_says_which_one(tmp_path):
    dup = YAML_POD.replace(b"  name: web\n", b"  name: web\n  name: web\n")
    with pytest.raises(InvalidManifest) as ours:
        gate(dup, "web.yaml", NODE)
    assert "the kubelet would run this file, but staticpodd refuses it by its own rules (yaml-duplicate-key" in (
        ours.value.message
    ), ours.value.message
    with pytest.raises(InvalidManifest) as kubelets:
        gate(YAML_POD.replace(b"  name: web\n", b"\tname: web\n"), "web.yaml", NODE)
    assert kubelets.value.message.endswith("the kubelet would refuse this file"), kubelets.value.message


# ---------------------------------------------------------------- the corrected verdicts

@pytest.mark.parametrize(
    "mutation, what",
    [
        (lambda d: d.replace(b'"nginx:1.27"\n', b'"nginx:1.27",\n'), "trailing comma"),
        (lambda d: d.replace(b'"apiVersion": "v1",', b'"apiVersion": "v1", # a comment'), "a # comment"),
        (lambda d: d.replace(b'"kind": "Pod"', b'kind: "Pod"'), "unquoted key"),
        (lambda d: d.replace(b'"image": "nginx:1.27"', b'"image": "nginx:1.27", "ports": [{"containerPort": 3e1}]'),
         "3e1 for an integer"),
    ],
)
def test_a_file_starting_with_a_brace_is_strict_json_as_the_kubelet_reads_it(mutation, what):
    """docs/kubelet-contract.md "How a file is decoded": the first non-space byte '{' means strict JSON
    (apimachinery util/yaml ToJSON, hasJSONPrefix); the same bytes after a '# comment' line are
    YAML and run."""
    data = mutation(pod())
    assert data != pod(), what
    found = validate_bytes(data, "web.json", NODE)
    (f,) = [f for f in found if f.severity == "error"]
    assert f.kubelet == "refuses" and f.line is not None and f.column is not None, f.format()
    if what == "3e1 for an integer":
        assert f.code == "schema-type" and "cannot unmarshal number 3e1" in f.message, f.message
    else:
        assert f.code == "json-syntax" and "json parse error: invalid character" in f.message, f.message
    as_yaml = b"# the same bytes, read as YAML\n" + data
    assert not [f for f in validate_bytes(as_yaml, "web.yaml", NODE) if f.severity == "error"], what


def test_json_error_names_line_and_column_of_the_offending_character():
    data = b'{\n  "apiVersion": "v1",\n  "kind": "Pod",\n}\n'
    (f,) = validate_bytes(data, "x.json", NODE)
    assert (f.line, f.column) == (3, 16), f.format()  # the comma before '}'
    assert "invalid character '}' looking for beginning of object key string" in f.message
    assert "remove the trailing comma" in (f.hint or "")


def test_duplicate_keys_run_with_the_last_value():
    dup = YAML_POD.replace(b"    image: nginx:1.27\n", b"    image: nginx:1.26\n    image: nginx:1.27\n")
    found = validate_bytes(dup, "dup.yaml", NODE)
    (f,) = found
    assert (f.code, f.kubelet, f.line) == ("yaml-duplicate-key", "accepts", 10), f.format()
    assert "uses this later value" in f.message
    j = pod().replace(b'"image": "nginx:1.27"', b'"image": "nginx:1.26", "image": "nginx:1.27"')
    assert errors(validate_bytes(j, "dup.json", NODE)) == [("yaml-duplicate-key", "accepts")]


def test_a_multi_document_file_runs_its_first_document_only_if_it_is_the_pod():
    pod_first = YAML_POD + b"---\nkind: ConfigMap\n"
    assert errors(validate_bytes(pod_first, "a.yaml", NODE)) == [("multiple-documents", "accepts")]
    cm_first = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + YAML_POD
    assert errors(validate_bytes(cm_first, "b.yaml", NODE)) == [
        ("multiple-documents", "accepts"), ("not-a-pod", "refuses")]
    assert verdict(validate_bytes(cm_first, "b.yaml", NODE)).kubelet == "refuses"
    empty_first = b"---\n---\n" + YAML_POD
    assert ("empty", "refuses") in errors(validate_bytes(empty_first, "c.yaml", NODE))
    # a later document that does not even parse is never read by the kubelet
    broken_later = YAML_POD + b"---\n\tbad: [\n"
    assert errors(validate_bytes(broken_later, "d.yaml", NODE)) == [("multiple-documents", "accepts")]


def test_a_2_mib_file_runs_and_is_judged_whole():
    big = b"# " + b"x" * (2 * 1024 * 1024) + b"\n" + YAML_POD.replace(b"nginx:1.27", b"nginx:1.27\n\tx: y")
    found = validate_bytes(big, "big.yaml", NODE)
    assert errors(found) == [("too-large", "accepts"), ("yaml-tab", "refuses")]
    huge = b"# " + b"x" * (10 * 1024 * 1024) + b"\n" + YAML_POD
    assert errors(validate_bytes(huge, "huge.yaml", NODE)) == [("too-large", "refuses")]


# ---------------------------------------------------------------- decoding corner cases

def test_utf16_with_a_bom_is_read_as_the_kubelet_reads_it():
    for codec, bom in (("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")):
        data = bom + YAML_POD.decode().encode(codec)
        found = validate_bytes(data, "u16.yaml", NODE)
        assert codes(found) == ["utf16"] and found[0].severity == "info", [f.format() for f in found]
    no_bom = YAML_POD.decode().encode("utf-16-le")
    assert errors(validate_bytes(no_bom, "nobom.yaml", NODE))[0][1] == "refuses"
    for bom, codec in ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be")):
        (f,) = validate_bytes(bom + YAML_POD.decode().encode(codec), "u32.yaml", NODE)
        assert (f.code, f.kubelet) == ("not-utf8", "refuses") and "UTF-32" in f.message, f.format()


def test_a_non_specific_tag_and_an_out_of_range_number_are_strings_as_in_go_yaml():
    data = YAML_POD + b"    env:\n    - name: A\n      value: ! 5\n    - name: B\n      value: 1e400\n"
    assert validate_bytes(data, "t.yaml", NODE) == []
    as_number = YAML_POD + b"    env:\n    - name: A\n      value: 5\n"
    assert codes(validate_bytes(as_number, "n.yaml", NODE)) == ["schema-type"]


def test_priority_class_name_without_priority_warns_that_the_node_sees_priority_0():
    """pkg/kubelet/nodeshutdown groupByPriority and eviction use spec.priority (0 when unset);
    the kubelet never resolves priorityClassName (only the API server does, for the mirror pod)."""
    data = pod({"priorityClassName": "system-node-critical"})
    (f,) = validate_bytes(data, "p.yaml", NODE)
    assert (f.code, f.severity, f.field) == ("priority-class-unresolved", "warning", "spec.priorityClassName")
    assert "priority is 0" in f.message and "priority: 2000001000" in f.hint
    custom = validate_bytes(pod({"priorityClassName": "infra"}), "p.yaml", NODE)
    assert "refuses the mirror pod" in custom[0].message
    assert validate_bytes(pod({"priorityClassName": "system-node-critical", "priority": 2000001000}),
                          "p.yaml", NODE) == []


# ---------------------------------------------------------------- shown everywhere

def test_the_level_is_in_json_and_in_text(tmp_path):
    from staticpodd.validate.cli import main

    dup = tmp_path / "dup.yaml"
    dup.write_bytes(YAML_POD.replace(b"  name: web\n", b"  name: web\n  name: web\n"))
    tab = tmp_path / "tab.yaml"
    tab.write_bytes(YAML_POD.replace(b"  name: web\n", b"\tname: web\n"))
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["validate", "--json", "--node-name", "cp-1", "--no-host-checks", str(dup), str(tab)])
    doc = json.loads(buf.getvalue())
    assert rc == 1
    assert [(f["code"], f["kubelet"]) for f in doc["findings"]] == [("yaml-duplicate-key", "accepts"),
                                                                    ("yaml-tab", "refuses")]
    assert [(v["path"], v["kubelet"], v["staticpodd"]) for v in doc["verdicts"]] == [
        (str(dup), "accepts", "refuses"), (str(tab), "refuses", "refuses")]
    assert (doc["summary"]["kubelet_refuses"], doc["summary"]["staticpodd_only"]) == (1, 1)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["validate", "--node-name", "cp-1", "--no-host-checks", str(dup)])
    text = buf.getvalue()
    assert re.search(r"error\[yaml-duplicate-key\] \(staticpodd's own rule: the kubelet would run it\)", text), text
    assert text.rstrip().endswith(
        "the kubelet would run it; staticpodd refuses it by its own rules (yaml-duplicate-key)"), text


def test_findings_as_dicts_from_older_producers_are_judged_by_their_code():
    assert kubelet_refuses([{"code": "yaml-syntax", "severity": "error"}])
    assert not kubelet_refuses([{"code": "yaml-duplicate-key", "severity": "error"}])
    assert not kubelet_refuses([{"code": "yaml-syntax", "severity": "warning"}])
    assert kubelet_refuses([{"code": "out-of-cpu", "severity": "error", "kubelet": "fails-admission"}])


def test_a_container_list_example_still_works():
    assert validate_bytes(pod({"containers": [container()]}), "x.json", NODE) == []


def test_a_broken_json_manifest_is_an_invalid_manifest_not_a_stray(tmp_path):
    mdir = tmp_path / "m"
    mdir.mkdir()
    mdir.chmod(0o700)
    p = mdir / "kube-apiserver.json"
    p.write_bytes(pod(name="kube-apiserver").replace(b'"nginx:1.27"\n', b'"nginx:1.27",\n'))
    p.chmod(0o600)
    found = validate_directory(mdir, NODE)
    assert [(f.code, f.severity) for f in found] == [("json-syntax", "error")], [f.format() for f in found]


def test_json_nested_past_gos_max_depth_is_refused_by_the_kubelet_whatever_python_can_parse():
    """encoding/json (and sigs.k8s.io/json) stop at a nesting depth of 10000 ("exceeded max
    depth"): the kubelet refuses the file. Python's recursion gives out before that depth, which
    must not turn the verdict into "the kubelet accepts it" (that kept on_invalid: restore away)."""
    deep = b'{"apiVersion": "v1", "kind": "Pod", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    (f,) = [f for f in validate_bytes(deep, "web.json", NODE) if f.severity == "error"]
    assert f.code == "json-syntax" and f.kubelet == "refuses" and "exceeded max depth" in f.message, f.format()
    assert kubelet_refuses([f])
