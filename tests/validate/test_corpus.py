"""The corpus: 24 real manifests validate without errors; every failure case gets its README verdict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from staticpodd.validate import has_errors, validate_path
from tests.validate.conftest import NODE, codes

# Warnings that are genuine for these files (README: 17, 18, 21 carry unknown fields).
# priority-class-unresolved: priorityClassName without priority; the kubelet never resolves the
# class, so the pod's node-local priority is 0 (kubeadm writes both).
EXPECTED_WARNINGS = {
    "10-kubespray-nginx-proxy.yaml": ["priority-class-unresolved"],
    "11-kubespray-haproxy.yaml": ["priority-class-unresolved"],
    "12-kubespray-kube-vip.yaml": ["priority-without-class"],
    "13-rke2-etcd.yaml": ["priority-class-unresolved", "pinned-uid"],
    "17-k8s-gce-konnectivity-server.yaml": ["schema-unknown-field"],
    "18-openshift-kube-scheduler.yaml": ["schema-unknown-field", "schema-unknown-field", "priority-class-unresolved"],
    "19-openshift-etcd.yaml": ["priority-class-unresolved"],
    "20-openshift-mco-coredns.yaml": ["priority-class-unresolved"],
    "21-openshift-mco-keepalived.yaml": ["schema-unknown-field", "priority-class-unresolved"],
    "22-typhoon-kube-apiserver.yaml": ["priority-class-unresolved"],
    "23-magnum-node-exporter.yaml": ["image-unpinned"],
    "24-k8s-docs-static-web.yaml": ["image-unpinned"],
}


def _manifests(corpus: Path) -> list[Path]:
    files = sorted((corpus / "manifests").iterdir())
    assert len(files) == 24
    return files


@pytest.mark.parametrize("version", ["1.31", "1.34", "1.37"])
def test_the_24_corpus_manifests_have_no_errors(corpus, version):
    opts = NODE.replace(kubernetes_version=version)
    for path in _manifests(corpus):
        found = validate_path(path, opts)
        assert not has_errors(found), [f.format() for f in found]
        assert codes(found) == EXPECTED_WARNINGS.get(path.name, []), path.name


def test_unknown_fields_in_17_18_21_are_named(corpus):
    fields = {
        f.field
        for name in ("17", "18", "21")
        for p in (corpus / "manifests").glob(f"{name}-*")
        for f in validate_path(p, NODE)
        if f.code == "schema-unknown-field"
    }
    assert fields == {
        "metadata.component",
        "spec.containers[0].livenessProbe.timeOutSeconds",
        "spec.containers[0].readinessProbe.timeOutSeconds",
        "spec.volumes[5].empty-dir",
    }


def test_strict_turns_the_unknown_fields_into_errors(corpus):
    strict = NODE.replace(strict=True)
    p = next((corpus / "manifests").glob("18-*"))
    assert codes(validate_path(p, strict), "error") == ["schema-unknown-field", "schema-unknown-field"]


def _case(corpus: Path, tmp_path: Path, name: str) -> Path:
    """Copy a case into tmp_path with kubeadm's modes (0600 root) so only the case's own problem shows."""
    src = corpus / "cases" / name
    dst = tmp_path / name
    if src.is_dir():
        shutil.copytree(src, dst)
        for p in [dst, *dst.rglob("*")]:
            p.chmod(0o700 if p.is_dir() else 0o600)
    else:
        shutil.copy(src, dst)
    return dst


# case -> (error codes in order, extra warning codes that must be present)
CASES = {
    "B01-backup-shadows-live": (["duplicate-pod"], ["stray"]),
    "B02-upgrade-with-bak": (["duplicate-pod"], ["stray"]),
    "B05-empty.yaml": (["empty"], []),
    "B05-truncated-invalid.yaml": (["yaml-syntax"], []),
    "B07-rke2-tempfile": (["duplicate-pod"], ["stray"]),
    "B08-daemonset.yaml": (["not-a-pod"], []),
    # the kubelet reads the first document, a ConfigMap: refused (not-a-pod); the second is our rule
    "B09-multidoc-configmap-first.yaml": (["multiple-documents", "not-a-pod"], []),
    "B10-foreign-files": (["not-a-pod", "not-a-pod", "not-an-object"], ["subdirectory-ignored", "stray"]),
    "B11-podlist.yaml": (["not-a-pod"], []),
    "B12-no-name.yaml": (["name-missing"], []),
    "B13-serviceaccount.yaml": (["api-object-reference"], []),
    "B15-priority-only.yaml": ([], ["priority-without-class"]),
    "B20-parked-forgotten": ([], ["subdirectory-ignored"]),
    "B22a-tab-indent.yaml": (["yaml-tab"], []),
    "B23-missing-comma.json": (["json-syntax"], []),
}


def test_every_case_is_covered(corpus):
    assert sorted(p.name for p in (corpus / "cases").iterdir()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_verdicts_match_the_corpus_readme(corpus, tmp_path, name):
    errors, warnings = CASES[name]
    found = validate_path(_case(corpus, tmp_path, name), NODE)
    assert codes(found, "error") == errors, [f.format() for f in found]
    for w in warnings:
        assert w in codes(found, "warning"), (w, [f.format() for f in found])


def test_b01_names_the_file_the_kubelet_will_run(corpus, tmp_path):
    found = validate_path(_case(corpus, tmp_path, "B01-backup-shadows-live"), NODE)
    dup = [f for f in found if f.code == "duplicate-pod"]
    assert len(dup) == 1 and dup[0].path.endswith("/kube-apiserver.yaml.backup")  # on the file that should go
    assert "runs the lexically later one, this file, not kube-apiserver.yaml" in dup[0].message


def test_b05_truncated_and_b22a_and_b23_carry_line_and_column(corpus, tmp_path):
    for name, line in (
        ("B05-truncated-invalid.yaml", 16),
        ("B22a-tab-indent.yaml", 12),
        ("B23-missing-comma.json", 14),
    ):
        (f,) = validate_path(_case(corpus, tmp_path, name), NODE)
        assert (f.line, f.column is not None) == (line, True), f.format()


def test_b13_is_only_a_warning_for_kubelets_before_1_34(corpus, tmp_path):
    path = _case(corpus, tmp_path, "B13-serviceaccount.yaml")
    old = validate_path(path, NODE.replace(kubernetes_version="1.33"))
    assert [(f.code, f.severity) for f in old] == [("api-object-reference", "warning")]
