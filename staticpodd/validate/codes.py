"""Every finding code the validator can emit: part of the ``--json`` contract; never rename one.

``CODES[code] = (layer, severity, source)``. :data:`KUBELET` says what the kubelet itself does
with a file that has an *error* of that code (the two levels; docs/kubelet-contract.md "How a file is
decoded", "What the kubelet refuses"); :data:`STRICTNESS` lists every deliberate strictness (an
error staticpodd makes where the kubelet runs the file), each pinned by a test in
``tests/validate/test_verdicts.py`` and listed in README "Validation that agrees with the kubelet".
``severity`` is the usual one: ``schema-unknown-field`` becomes an error with ``strict``;
``api-object-reference`` is a warning for kubelets before v1.34. ``host-port-conflict`` is
never reported between files that define one pod (the kubelet runs only one of them;
``duplicate-pod`` covers them).
"""

from __future__ import annotations

CODES: dict[str, tuple[int, str, str]] = {
    # 1. reading like the kubelet -- docs/kubelet-contract.md "How a file is decoded"; sigs.k8s.io/yaml, go-yaml v2
    "too-large": (1, "error", "pkg/kubelet/config/file.go maxConfigLength (10 MB; ours lower by default)"),
    "not-utf8": (1, "error", "layer 1: the kubelet reads the bytes as UTF-8 text"),
    "yaml-syntax": (1, "error", "sigs.k8s.io/yaml YAMLToJSON (go-yaml v2 parser)"),
    "yaml-tab": (1, "error", "YAML 1.1: tabs are not indentation; go-yaml v2 scanner"),
    "yaml-duplicate-key": (1, "error", "docs/kubelet-contract.md 'How a file is decoded' (kubelet: last value wins)"),
    "yaml-excessive-aliasing": (1, "error", "go-yaml v2 decode.go allowedAliasRatio"),
    "yaml-unsupported-value": (1, "error", "encoding/json: NaN/Inf cannot be encoded by YAMLToJSON"),
    "json-syntax": (1, "error", "apimachinery util/yaml ToJSON hasJSONPrefix: a file starting with '{' is strict JSON"),
    "multiple-documents": (1, "error", "docs/kubelet-contract.md 'How a file is decoded' (kubelet runs the first)"),
    "empty-extra-document": (1, "info", "a trailing '---' is an empty document the kubelet ignores"),
    "utf16": (1, "info", "go-yaml v2 reader: a UTF-16 byte order mark selects UTF-16"),
    "not-regular-file": (1, "error", "pkg/kubelet/config/file.go (non-regular entries are skipped)"),
    "unreadable": (1, "error", "the file cannot be read"),
    # 2. kind and identity -- pkg/kubelet/config/common.go tryDecodeSinglePod, applyDefaults
    "empty": (2, "error", "\"Object 'Kind' is missing in 'null'\""),
    "not-an-object": (2, "error", "runtime.Decode of a non-object"),
    "kind-missing": (2, "error", "runtime.Decode: Object 'Kind' is missing"),
    "api-version-missing": (2, "error", "runtime.Decode: Object 'apiVersion' is missing"),
    "not-a-pod": (2, "error", "tryDecodeSinglePod: only a v1 Pod from files"),
    "wrong-api-version": (2, "error", "runtime.Decode: no kind Pod registered for that version"),
    "name-missing": (2, "error", '"name is needed for the pod"'),
    "name-invalid": (2, "error", "ValidateObjectMeta: DNS-1123 subdomain"),
    "name-too-long": (2, "error", "applyDefaults appends -<node name>, then ValidatePodCreate"),
    "namespace-invalid": (2, "error", "ValidateObjectMeta: DNS-1123 label"),
    # 3. schema -- schemas/pod-1.NN.json (generated)
    "schema-type": (3, "error", "JSON decode into core/v1 Pod fails"),
    "schema-required": (3, "error", "OpenAPI required fields"),
    "schema-enum": (3, "error", "OpenAPI enum"),
    "schema-unknown-field": (3, "warning", "unknown fields are dropped by the kubelet's decoder"),
    # 4. what the kubelet refuses -- validation.go ValidatePodCreate; pod/util.go HasAPIObjectReference
    "ephemeral-containers": (4, "error", "ValidatePodCreate"),
    "scheduling-gates": (4, "error", "ValidatePodSpec with nodeName set"),
    "api-object-reference": (4, "error", "PreventStaticPodAPIReferences (v1.34)"),
    "metadata-invalid": (4, "error", "ValidateLabels / ValidateAnnotations"),
    "pod-spec-invalid": (4, "error", "ValidatePodSpec"),
    "container-invalid": (4, "error", "validateContainers"),
    "port-invalid": (4, "error", "validateContainerPorts / AccumulateUniqueHostPorts"),
    "volume-mount-invalid": (4, "error", "ValidateVolumeMounts"),
    "env-invalid": (4, "error", "ValidateEnv"),
    "resources-invalid": (4, "error", "ValidateResourceRequirements; resource.ParseQuantity"),
    "probe-invalid": (4, "error", "validateProbe / validateLivenessProbe"),
    "volume-invalid": (4, "error", "ValidateVolumes"),
    "dns-policy-host-network": (4, "info", "pkg/kubelet/network/dns (ClusterFirst falls back for hostNetwork)"),
    # 5. likely mistakes
    "priority-without-class": (5, "warning", "Priority admission refuses the mirror pod"),
    "priority-class-unresolved": (5, "warning", "the kubelet never resolves priorityClassName: priority stays 0"),
    "argv-shell-syntax": (5, "warning", "CRI exec argv semantics"),
    "hostpath-missing": (5, "warning", "pkg/volume/hostpath checkType; runtime auto-creates directories"),
    "image-unpinned": (5, "warning", "SetDefaults_Container: imagePullPolicy Always for :latest"),
    "pinned-uid": (5, "warning", "docs/kubelet-contract.md 'Identity and restarts'"),
    # 6. node fit
    "out-of-cpu": (6, "error", "kubelet admission vs allocatable; static pods: UnexpectedAdmissionError (preemption)"),
    "out-of-memory": (6, "error", "kubelet admission vs allocatable; static pods: UnexpectedAdmissionError"),
    # 7. directory level -- docs/kubelet-contract.md "Which files are pods", "Duplicate names across files"
    "duplicate-pod": (7, "error", "the lexically last file wins on relist"),
    "stray": (7, "warning", "no extension filter: every non-dot file is read"),
    "subdirectory-ignored": (7, "warning", "no recursion"),
    "symlink": (7, "warning", "links are followed; target changes raise no event"),
    "dangling-symlink": (7, "warning", "dangling links are skipped"),
    "host-port-conflict": (7, "error", "NodePorts admission predicate"),
    "host-port-bind-conflict": (7, "error", "a port a control-plane flag names: admitted, then fails to bind"),
    "loose-permissions": (7, "warning", "kubeadm writes 0600 root:root"),
}


_REFUSES, _ADMISSION, _ACCEPTS = "refuses", "fails-admission", "accepts"

KUBELET: dict[str, str] = {
    **{code: _REFUSES for code in CODES},
    # what the kubelet runs although staticpodd refuses it (see STRICTNESS)
    "yaml-duplicate-key": _ACCEPTS,
    "multiple-documents": _ACCEPTS,
    "schema-unknown-field": _ACCEPTS,
    "duplicate-pod": _ACCEPTS,
    "host-port-bind-conflict": _ACCEPTS,  # both admitted: the second container fails to bind
    # read, then refused at admission on the node (phase Failed)
    "out-of-cpu": _ADMISSION,
    "out-of-memory": _ADMISSION,
    "host-port-conflict": _ADMISSION,
}
"""``code -> what the kubelet does`` with a file holding an *error* of that code: ``"refuses"``
(drops the pod), ``"fails-admission"`` or ``"accepts"``. The usual level only: a finding may say
otherwise (``too-large`` under 10 MiB, ``not-utf8`` in a JSON file: "accepts"); warnings are
always "accepts"."""

STRICTNESS: dict[str, str] = {
    "yaml-duplicate-key": "a mapping key given twice: the kubelet accepts the file and the last value wins "
    "(YAML and JSON); staticpodd refuses it, because nobody can tell which value the author meant",
    "multiple-documents": "a second YAML document after the Pod: the kubelet runs the first document and "
    "ignores the rest; staticpodd refuses the file (a file whose first document is not a Pod is refused "
    "by the kubelet too)",
    "too-large": "a file over max_manifest_bytes (default 1 MiB) but under 10 MiB: the kubelet runs it "
    "(it refuses 10 MiB or more, maxConfigLength); staticpodd refuses it",
    "not-utf8": "bytes that are not UTF-8 inside the strings of a file starting with '{': the kubelet's JSON "
    "decoder replaces them with U+FFFD and runs the pod; staticpodd refuses the file (in YAML the kubelet "
    "refuses it too)",
    "schema-unknown-field": "with --strict only: an unknown field is an error; the kubelet drops the field "
    "and runs the pod",
    "duplicate-pod": "two files define one namespace/name: the kubelet runs the lexically last file and "
    "ignores the other; staticpodd refuses the directory",
    "host-port-bind-conflict": "two pods on one host port where either port is one a control-plane flag names "
    "(--secure-port, etcd's --listen-*-urls), not declared: the kubelet admits and runs both pods (admission "
    "sees only declared ports) and the second to start fails to bind; staticpodd refuses it",
}
"""Every deliberate strictness: ``code -> what the kubelet does instead``. Each is pinned by a test
(tests/validate/test_verdicts.py) and listed in the README; any other disagreement with the kubelet
is a bug."""


def kubelet_level(code: str) -> str:
    """What the kubelet usually does with a file holding an error ``code`` (see :data:`KUBELET`);
    ``"refuses"`` for a code not in the table (an unknown error is assumed fatal)."""
    return KUBELET.get(code, _REFUSES)
