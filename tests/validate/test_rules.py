"""Layers 2-6: every rule has an input that trips it and one that must not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from staticpodd.errors import InvalidManifest
from staticpodd.validate import Options, gate, has_errors, validate_bytes
from tests.validate.conftest import NODE, codes, container, pod


def run(data: bytes, options: Options = NODE) -> list:
    return validate_bytes(data, "m.yaml", options)


def test_a_minimal_pod_has_no_findings():
    assert run(pod()) == []


# --------------------------------------------------------------------- identity (layer 2)


@pytest.mark.parametrize(
    ("doc", "code"),
    [
        ({"kind": "Pod", "metadata": {"name": "x"}}, "api-version-missing"),
        ({"apiVersion": "v1", "metadata": {"name": "x"}}, "kind-missing"),
        ({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"}}, "not-a-pod"),
        ({"apiVersion": "v1", "kind": "PodList", "items": []}, "not-a-pod"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, "not-a-pod"),
        ({"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "x"}}, "wrong-api-version"),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, "name-missing"),
        ({"apiVersion": "v1", "kind": "Pod"}, "name-missing"),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Kube_API"}}, "name-invalid"),
    ],
)
def test_identity_refusals(doc, code):
    assert codes(run(json.dumps(doc).encode()), "error")[:1] == [code]


def test_not_a_pod_hints_say_what_to_do_instead():
    ds = run(b"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\n")
    assert "spec.template" in ds[0].hint
    lst = run(b"apiVersion: v1\nkind: PodList\nitems: []\n")
    assert "own file" in lst[0].hint


def test_name_too_long_once_the_node_name_is_appended():
    name = "a" * 240
    long_node = NODE.replace(node_name="node-" + "x" * 20)
    assert codes(run(pod(name=name), long_node)) == ["name-too-long"]
    assert codes(run(pod(name=name), NODE)) == []  # 240 + len("-cp-1") = 245 <= 253


def test_invalid_namespace():
    assert "namespace-invalid" in codes(run(pod(namespace="Kube_System")))


# --------------------------------------------------------------------- schema (layer 3)


def test_type_errors_are_errors_with_field_and_hint():
    data = pod(
        {
            "hostNetwork": "true",
            "containers": [container(livenessProbe={"tcpSocket": {"port": 80}, "timeoutSeconds": "15"})],
        }
    )
    found = run(data)
    assert codes(found) == ["schema-type", "schema-type"]
    by_field = {f.field: f for f in found}
    assert "remove the quotes" in by_field["spec.hostNetwork"].hint
    assert by_field["spec.containers[0].livenessProbe.timeoutSeconds"].line is not None


def test_unknown_fields_are_warnings_and_errors_when_strict():
    data = pod({"containers": [container(livenessProbe={"tcpSocket": {"port": 80}, "timeOutSeconds": 10})]})
    found = run(data)
    assert [(f.code, f.severity) for f in found] == [("schema-unknown-field", "warning")]
    assert "timeoutSeconds" in found[0].hint
    strict = run(data, NODE.replace(strict=True))
    assert [(f.code, f.severity) for f in strict] == [("schema-unknown-field", "error")]


def test_missing_required_container_name():
    assert "schema-required" in codes(run(pod({"containers": [{"image": "nginx:1"}]})))


def test_int32_range():
    data = pod({"containers": [container(ports=[{"containerPort": 2**31}])]})
    assert "schema-type" in codes(run(data))


def test_yaml11_boolean_in_a_string_field_is_a_type_error():
    data = (
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n    image: i:1\n"
        b"    command: [echo, yes]\n"
    )
    found = run(data)
    assert codes(found) == ["schema-type"] and "quote it" in found[0].hint


def test_schema_follows_the_targeted_version():
    # resources on the pod level exist in 1.34+ schemas only (PodLevelResources)
    data = pod({"resources": {"requests": {"cpu": "100m"}}})
    assert codes(run(data, NODE.replace(kubernetes_version="1.34"))) == []
    assert codes(run(data, NODE.replace(kubernetes_version="1.31"))) == ["schema-unknown-field"]


# --------------------------------------------------------------------- static pod refusals (layer 4)


def test_ephemeral_containers_and_scheduling_gates_are_refused():
    assert "ephemeral-containers" in codes(run(pod({"ephemeralContainers": [{"name": "d", "image": "b:1"}]})))
    assert "scheduling-gates" in codes(run(pod({"schedulingGates": [{"name": "g"}]})))


@pytest.mark.parametrize(
    ("spec", "resource"),
    [
        ({"serviceAccountName": "default"}, "serviceaccounts"),
        ({"imagePullSecrets": [{"name": "reg"}]}, "secrets"),
        (
            {"containers": [container(env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])]},
            "secrets",
        ),
        ({"containers": [container(envFrom=[{"configMapRef": {"name": "c"}}])]}, "configmaps"),
        ({"volumes": [{"name": "v", "configMap": {"name": "c"}}]}, "configmaps"),
        ({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}, "persistentvolumeclaims"),
        ({"volumes": [{"name": "v", "csi": {"driver": "d"}}]}, "csidrivers (via CSI volumes)"),
        (
            {"volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
            "serviceaccounts (via projected volumes)",
        ),
        (
            {"volumes": [{"name": "v", "projected": {"sources": [{"clusterTrustBundle": {"path": "t"}}]}}]},
            "clustertrustbundles",
        ),
        ({"resourceClaims": [{"name": "r"}]}, "resourceclaims"),
    ],
)
def test_api_object_references_are_refused_from_1_34(spec, resource):
    found = run(pod(spec), NODE.replace(kubernetes_version="1.34"))
    ref = [f for f in found if f.code == "api-object-reference"]
    assert ref and ref[0].severity == "error"
    assert ref[0].message.startswith(f"static pods may not reference {resource}:")


def test_api_object_references_only_warn_for_older_kubelets():
    found = run(pod({"serviceAccountName": "default"}), NODE.replace(kubernetes_version="1.33"))
    assert [(f.code, f.severity) for f in found] == [("api-object-reference", "warning")]
    old_ctb = pod({"volumes": [{"name": "v", "projected": {"sources": [{"clusterTrustBundle": {"path": "t"}}]}}]})
    assert has_errors(run(old_ctb, NODE.replace(kubernetes_version="1.33")))


def test_hostpath_emptydir_and_downward_api_are_fine():
    spec = {
        "volumes": [
            {"name": "a", "hostPath": {"path": "/etc/x", "type": "DirectoryOrCreate"}},
            {"name": "b", "emptyDir": {}},
            {"name": "c", "projected": {"sources": [{"downwardAPI": {"items": []}}]}},
        ]
    }
    assert run(pod(spec)) == []


# --------------------------------------------------------------------- ValidatePodCreate subset


def test_a_null_spec_is_a_pod_without_containers():
    """``spec: null`` decodes (Go leaves the zero PodSpec) and then fails validation like a
    missing spec: no containers. It passed clean (a newcomer's try), ``spec: {}`` did not."""
    data = b"apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: kube-system}\nspec: null\n"
    assert "pod-spec-invalid" in codes(run(data))


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ({"containers": []}, "pod-spec-invalid"),
        ({"restartPolicy": "always"}, "pod-spec-invalid"),
        ({"dnsPolicy": "None"}, "pod-spec-invalid"),
        ({"containers": [container(name="Main")]}, "container-invalid"),
        ({"containers": [container(), container()]}, "container-invalid"),
        ({"containers": [container(image="")]}, "container-invalid"),
        ({"containers": [container(imagePullPolicy="always")]}, "container-invalid"),
        ({"containers": [container(restartPolicy="Always")]}, "container-invalid"),
        ({"containers": [container(ports=[{"containerPort": 0}])]}, "port-invalid"),
        ({"containers": [container(ports=[{"containerPort": 80, "protocol": "tcp"}])]}, "port-invalid"),
        (
            {"hostNetwork": True, "containers": [container(ports=[{"containerPort": 80, "hostPort": 8080}])]},
            "port-invalid",
        ),
        ({"containers": [container(ports=[{"containerPort": 80, "name": "HTTP"}])]}, "port-invalid"),
        (
            {
                "containers": [
                    container(ports=[{"containerPort": 80, "hostPort": 80}, {"containerPort": 81, "hostPort": 80}])
                ]
            },
            "port-invalid",
        ),
        ({"containers": [container(volumeMounts=[{"name": "nope", "mountPath": "/x"}])]}, "volume-mount-invalid"),
        ({"containers": [container(env=[{"name": "A=B", "value": "1"}])]}, "env-invalid"),
        (
            {"containers": [container(resources={"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}})]},
            "resources-invalid",
        ),
        ({"containers": [container(resources={"requests": {"memory": "1gb"}})]}, "resources-invalid"),
        ({"containers": [container(livenessProbe={"periodSeconds": 5})]}, "probe-invalid"),
        (
            {"containers": [container(livenessProbe={"exec": {"command": ["true"]}, "tcpSocket": {"port": 1}})]},
            "probe-invalid",
        ),
        (
            {"containers": [container(livenessProbe={"tcpSocket": {"port": 80}, "successThreshold": 3})]},
            "probe-invalid",
        ),
        ({"containers": [container(readinessProbe={"httpGet": {"port": "8080"}})]}, "probe-invalid"),
        ({"initContainers": [container(name="init", livenessProbe={"tcpSocket": {"port": 1}})]}, "probe-invalid"),
        ({"volumes": [{"name": "v", "hostPath": {"path": "/x"}, "emptyDir": {}}]}, "volume-invalid"),
        ({"volumes": [{"name": "v", "hostPath": {"path": "/x", "type": "directory"}}]}, "volume-invalid"),
        ({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}, "volume-invalid"),
        ({"volumes": [{"name": "V", "emptyDir": {}}]}, "volume-invalid"),
    ],
)
def test_validate_pod_create_refusals(spec, code):
    found = run(pod(spec))
    assert code in codes(found, "error"), found


def test_valid_pod_features_are_not_flagged():
    spec = {
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "restartPolicy": "Always",
        "priorityClassName": "system-node-critical",
        "priority": 2000001000,
        "initContainers": [
            container(name="sidecar", restartPolicy="Always", readinessProbe={"exec": {"command": ["true"]}})
        ],
        "containers": [
            container(
                ports=[{"containerPort": 6443, "name": "https", "protocol": "TCP"}],
                env=[
                    {"name": "A", "value": "1"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                resources={"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
                livenessProbe={
                    "httpGet": {"port": "https", "path": "/livez", "scheme": "HTTPS"},
                    "successThreshold": 1,
                },
                startupProbe={"tcpSocket": {"port": 6443}},
                volumeMounts=[{"name": "k8s", "mountPath": "/etc/kubernetes", "readOnly": True}],
            )
        ],
        "volumes": [
            {"name": "k8s", "hostPath": {"path": "/etc/kubernetes", "type": "DirectoryOrCreate"}},
            {"name": "empty"},
        ],
    }
    assert run(pod(spec, meta={"labels": {"component": "kube-apiserver", "tier": "control-plane"}})) == []


def test_bad_label_key_and_value():
    found = run(pod(meta={"labels": {"bad key": "x", "ok": "bad value!"}}))
    assert codes(found) == ["metadata-invalid", "metadata-invalid"]


# --------------------------------------------------------------------- likely mistakes (layer 5)


def test_priority_without_class_warns():
    assert [(f.code, f.severity) for f in run(pod({"priority": 2000001000}))] == [("priority-without-class", "warning")]
    assert run(pod({"priority": 2000001000, "priorityClassName": "system-node-critical"})) == []
    assert codes(run(pod({"priority": 5, "priorityClassName": "system-node-critical"}))) == ["priority-without-class"]


def test_argv_with_shell_continuations_or_several_flags_warns():
    c = container(command=["kube-apiserver", "--a=1 \\", "--b=2 --c=3"])
    assert codes(run(pod({"containers": [c]}))) == ["argv-shell-syntax", "argv-shell-syntax"]


def test_shell_scripts_and_values_with_spaces_are_not_argv_mistakes():
    script = container(command=["/bin/sh", "-c", "exec foo \\\n  --a=1 --b=2"])
    spaced = container(command=["app", "--title=hello world", "--x", "a b"])
    assert run(pod({"containers": [script]})) == []
    assert run(pod({"containers": [spaced]})) == []


def test_hostpath_missing_is_checked_only_on_the_node(tmp_path):
    missing = str(tmp_path / "admin.conf")
    data = pod({"volumes": [{"name": "k", "hostPath": {"path": missing}}]})
    here = NODE.replace(check_host=True)
    assert codes(run(data, here)) == ["hostpath-missing"]
    assert run(data, NODE) == []
    (tmp_path / "admin.conf").write_text("x")
    assert run(data, here) == []
    typed = pod({"volumes": [{"name": "k", "hostPath": {"path": str(tmp_path / "pki"), "type": "Directory"}}]})
    assert codes(run(typed, here)) == ["hostpath-missing"]
    create = pod({"volumes": [{"name": "k", "hostPath": {"path": str(tmp_path / "d"), "type": "DirectoryOrCreate"}}]})
    assert run(create, here) == []
    a_dir = pod({"volumes": [{"name": "k", "hostPath": {"path": str(tmp_path / "data")}}]})
    assert run(a_dir, here) == []


@pytest.mark.parametrize("image", ["nginx", "nginx:latest", "registry:5000/team/app", "quay.io/x/y:latest"])
def test_unpinned_images_warn(image):
    assert codes(run(pod({"containers": [container(image=image)]}))) == ["image-unpinned"]


@pytest.mark.parametrize("image", ["nginx:1.27", "registry:5000/team/app:v2", "nginx@sha256:" + "a" * 64])
def test_pinned_images_do_not_warn(image):
    assert run(pod({"containers": [container(image=image)]})) == []


def test_pinned_uid_warns():
    assert codes(run(pod(meta={"uid": "abc"}))) == ["pinned-uid"]


# --------------------------------------------------------------------- node fit (layer 6)


def test_a_static_pod_larger_than_the_node_fails_admission_with_unexpected_admission_error():
    """A static pod is critical: the kubelet takes the preemption path, not OutOfcpu (seen on
    v1.34.2: docs/kubelet-contract.md "What the kubelet refuses"; pkg/kubelet/preemption/preemption.go)."""
    data = pod({"containers": [container(resources={"requests": {"cpu": "32", "memory": "1Gi"}})]})
    found = run(data)
    assert codes(found) == ["out-of-cpu"]
    (f,) = found
    assert "reason UnexpectedAdmissionError" in f.message and "instead of OutOfcpu" in f.message, f.message
    assert "no set of running pods found to reclaim resources: [(res: cpu, q: 28000), ]" in f.message
    assert f.field == "spec.containers[0].resources.requests.cpu"
    assert f.kubelet == "fails-admission" and f.kubelet_refuses


def test_node_fit_is_against_allocatable_not_capacity():
    """A pod 50 MiB under the node's memory: refused, because the default evictionHard
    memory.available (100Mi) is taken off capacity (docs/kubelet-contract.md; pkg/kubelet/cm/helpers.go)."""
    data = pod({"containers": [container(resources={"requests": {"memory": f"{8 * 1024 - 50}Mi"}})]})
    (f,) = run(data)
    assert f.code == "out-of-memory" and f"q: {50 * 2**20}" in f.message, f.message
    assert "allocatable" in f.message and "evictionHard" in f.message
    # the reservations of the kubelet's configuration count too
    cpu = pod({"containers": [container(resources={"requests": {"cpu": "3600m"}})]})
    assert run(cpu) == []
    reserved = NODE.replace(cpu_reserved_millis=500)
    assert codes(validate_bytes(cpu, "x.yaml", reserved)) == ["out-of-cpu"]
    none = NODE.replace(memory_eviction_hard="")
    assert validate_bytes(data, "x.yaml", none) == []
    pct = NODE.replace(memory_eviction_hard="1%")  # 1% of 8Gi is about 82Mi
    assert codes(validate_bytes(data, "x.yaml", pct)) == ["out-of-memory"]


def test_memory_limits_count_as_requests_and_init_containers_take_the_max():
    data = pod(
        {
            "initContainers": [container(name="init", resources={"limits": {"memory": "9Gi"}})],
            "containers": [container(resources={"requests": {"memory": "1Gi"}})],
        }
    )
    found = run(data)
    assert codes(found) == ["out-of-memory"]
    assert f"q: {9 * 2**30 - (8 * 2**30 - 100 * 2**20)}" in found[0].message


def test_requests_that_fit_are_fine():
    data = pod({"containers": [container(resources={"requests": {"cpu": "4000m", "memory": f"{8 * 1024 - 100}Mi"}})]})
    assert run(data) == []


# --------------------------------------------------------------------- gate


def test_gate_returns_manifest_and_warnings():
    manifest, warnings = gate(pod({"priority": 1}), "web.yaml", NODE)
    assert (manifest.namespace, manifest.name) == ("kube-system", "web")
    assert codes(warnings) == ["priority-without-class"]


def test_gate_raises_with_the_first_errors_location_and_all_findings():
    data = (
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  hostNetwork: 'yes'\n  priority: 3\n"
        b"  containers: [{name: c, image: 'i:1'}]\n"
    )
    with pytest.raises(InvalidManifest) as exc:
        gate(data, "/etc/kubernetes/manifests/x.yaml", NODE)
    err = exc.value
    assert (err.path, err.line, err.column, err.field) == (
        "/etc/kubernetes/manifests/x.yaml",
        5,
        16,
        "spec.hostNetwork",
    )
    assert codes(err.findings) == ["schema-type", "priority-without-class"]


# --------------------------------------------------------------------- robustness

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
_SPEC_KEYS = st.sampled_from(
    [
        "containers",
        "initContainers",
        "volumes",
        "hostNetwork",
        "priority",
        "resources",
        "serviceAccountName",
        "imagePullSecrets",
        "dnsPolicy",
        "restartPolicy",
        "overhead",
        "ephemeralContainers",
        "schedulingGates",
        "securityContext",
    ]
)
_CONTAINER_KEYS = st.sampled_from(
    [
        "name",
        "image",
        "ports",
        "env",
        "envFrom",
        "resources",
        "livenessProbe",
        "readinessProbe",
        "volumeMounts",
        "command",
        "args",
        "restartPolicy",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    spec=st.dictionaries(_SPEC_KEYS, _JSON, max_size=4),
    cfields=st.dictionaries(_CONTAINER_KEYS, _JSON, max_size=4),
    meta=st.dictionaries(st.sampled_from(["labels", "annotations", "uid", "namespace"]), _JSON, max_size=2),
)
def test_any_shape_of_input_yields_findings_never_a_crash(spec, cfields, meta):
    spec.setdefault("containers", [container(**cfields)])
    found = run(pod(spec, meta=meta))
    assert all(f.severity in ("error", "warning", "info") for f in found)


def test_every_code_the_package_can_emit_is_registered():
    import re
    from pathlib import Path

    from staticpodd.validate.codes import CODES

    pkg = Path(__file__).resolve().parents[2] / "staticpodd"
    decoder = ("manifest/jsondecode.py", "manifest/decoded.py", "manifest/decoding.py", "manifest/yamldecode.py", "manifest/yamlresolve.py")
    sources = [*(pkg / "validate").glob("*.py"), *(pkg / name for name in decoder)]
    pattern = re.compile(r'(?:Finding|add|make|DecodeProblem|_problem)\(\s*"([a-z0-9-]+)"')
    used = {m for p in sources for m in pattern.findall(p.read_text())}
    used |= set(re.findall(r'"(out-of-[a-z]+)"', (pkg / "validate" / "nodefit.py").read_text()))  # via a tuple
    assert used, "the pattern found the codes"
    assert used <= set(CODES), used - set(CODES)
    assert set(CODES) == used, set(CODES) - used
    assert all(sev in ("error", "warning", "info") for _layer, sev, _src in CODES.values())


def test_lower_case_kind_is_not_a_pod_with_a_case_hint():
    (f,) = run(b"apiVersion: v1\nkind: pod\nmetadata: {name: x}\n")
    assert f.code == "not-a-pod" and "case-sensitive" in f.hint


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": [container(volumeMounts=[{"name": "x"}])], "volumes": [{"name": "x", "emptyDir": {}}]},
        {"containers": [container(ports=[{"name": "http"}])]},
        {"containers": [container(env=[{"value": "1"}])]},
        {"volumes": [{"hostPath": {"path": "/x"}}]},
    ],
)
def test_a_missing_required_field_is_reported_once(spec):
    assert codes(run(pod(spec))) == ["schema-required"]


@pytest.mark.parametrize("field", ["containers", "env", "volumes", "ports"])
def test_a_null_item_of_a_list_of_structs_is_the_zero_struct_the_kubelet_refuses(field):
    """encoding/json leaves ``[null]`` in a slice of structs as the zero struct, whose required
    fields are missing (``containers: [null]`` is ``[{}]``); it passed clean (a newcomer's try)."""
    spec = {"containers": [container()]}
    if field == "containers":
        spec["containers"] = [None]
    elif field == "volumes":
        spec["volumes"] = [None]
    else:
        spec["containers"] = [container(**{field: [None]})]
    assert "schema-required" in codes(run(pod(spec)))


def test_name_missing_names_metadata_name_and_a_line_even_without_metadata():
    [f] = [f for f in run(b"apiVersion: v1\nkind: Pod\nspec:\n  containers: []\n") if f.code == "name-missing"]
    assert (f.field, f.line) == ("metadata.name", 2)  # no metadata at all: the line of kind
    [f] = [f for f in run(b"apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {a: b}\n") if f.code == "name-missing"]
    assert f.field == "metadata.name" and f.line == 3  # the metadata mapping it belongs in


@pytest.mark.parametrize("number, millis", [(0.1, 100), (0.3, 300), (1.5, 1500), (2.675, 2675)])
def test_a_cpu_request_written_as_a_yaml_number_is_read_as_written(number, millis):
    # sigs.k8s.io/yaml passes the JSON text ("0.1") to resource.Quantity, which parses it exactly;
    # the binary float 0.1 is a hair above it, and its ceiling in millicores was 101m (a newcomer's finding)
    from staticpodd.validate.quantity import cpu_millis, parse_quantity

    assert cpu_millis(parse_quantity(number)) == millis
