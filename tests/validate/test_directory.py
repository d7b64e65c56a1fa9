"""Layer 7: a manifest directory as the kubelet reads it (real files, links, FIFOs, modes under tmp_path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from staticpodd.validate import has_errors, validate_directory, validate_path
from staticpodd.validate.directory import stray_reason
from tests.validate.conftest import NODE, codes, container, pod


def write(d: Path, name: str, data: bytes, mode: int = 0o600) -> Path:
    p = d / name
    p.write_bytes(data)
    p.chmod(mode)
    return p


@pytest.fixture
def mdir(tmp_path: Path) -> Path:
    d = tmp_path / "manifests"
    d.mkdir(mode=0o700)
    return d


def test_a_clean_directory_has_no_findings(mdir):
    write(mdir, "a.yaml", pod(name="a"))
    write(mdir, "b.yaml", pod(name="b"))
    assert validate_directory(mdir, NODE) == []


def test_dot_names_are_ignored_like_the_kubelet_does(mdir):
    write(mdir, "a.yaml", pod(name="a"))
    write(mdir, ".a.yaml.swp", b"\x00garbage")
    (mdir / ".staticpodd").mkdir()
    assert validate_directory(mdir, NODE) == []


def test_duplicates_name_the_lexically_last_file(mdir):
    write(mdir, "kube-apiserver.yaml", pod(name="kube-apiserver"))
    write(mdir, "kube-apiserver.yaml.orig", pod(name="kube-apiserver"))
    write(mdir, "z-other.yaml", pod(name="kube-apiserver"))
    found = validate_directory(mdir, NODE)
    dups = [f for f in found if f.code == "duplicate-pod"]
    assert sorted(Path(f.path).name for f in dups) == ["kube-apiserver.yaml", "kube-apiserver.yaml.orig"]
    assert all("z-other.yaml and ignores this file" in f.message for f in dups)


def test_a_duplicate_pod_error_goes_on_the_stray_that_causes_it_not_on_the_good_file(mdir):
    """kube-apiserver.yaml.bak sorts after kube-apiserver.yaml, so the kubelet runs the leftover;
    the file that should go is the .bak: the error is on it, and the good file has none."""
    write(mdir, "kube-apiserver.yaml", pod(name="kube-apiserver"))
    write(mdir, "kube-apiserver.yaml.bak", pod(name="kube-apiserver"))
    found = validate_directory(mdir, NODE)
    dups = [f for f in found if f.code == "duplicate-pod"]
    assert [Path(f.path).name for f in dups] == ["kube-apiserver.yaml.bak"]
    assert "the kubelet reads both files and runs the lexically later one, this file" in dups[0].message
    assert "staticpodctl park kube-apiserver.yaml.bak" in dups[0].hint and "unpark --discard" in dups[0].hint
    assert not [f for f in found if f.severity == "error" and Path(f.path).name == "kube-apiserver.yaml"]


def test_same_name_in_different_namespaces_is_not_a_duplicate(mdir):
    write(mdir, "a.yaml", pod(name="x", namespace="a"))
    write(mdir, "b.yaml", pod(name="x", namespace="b"))
    assert validate_directory(mdir, NODE) == []


@pytest.mark.parametrize(
    "name",
    [
        "kube-apiserver.yaml~",
        "etcd.yaml.bak",
        "etcd.yaml.backup",
        "x.orig",
        "x.dpkg-old",
        "x.rpmnew",
        "4913",
        "#x.yaml#",
        "x.yaml.swp",
        "kube-apiserver.yaml.tmp4718",
        "x.yaml20240131-1234-abcdef",
        "x.yaml.1234.2024-01-31@12:00:00~",
        "restart.sh",
        "README.md",
    ],
)
def test_stray_names(name):
    assert stray_reason(name)


@pytest.mark.parametrize(
    "name",
    [
        "kube-apiserver.yaml",
        "etcd.yml",
        "etcd.json",
        "kube-vip",
        "keepalived.manifest",
        "kube-scheduler-pod.yaml",
        "etcd-pod.yaml",
    ],
)
def test_manifest_names_are_not_strays(name):
    assert stray_reason(name) is None


def test_a_stray_pod_still_runs_and_is_reported(mdir):
    write(mdir, "web.yaml.bak", pod(name="web"))
    found = validate_directory(mdir, NODE)
    assert codes(found) == ["stray"] and "this one runs" in found[0].message


def test_subdirectories_are_ignored_and_reported(mdir):
    (mdir / "apps").mkdir()
    write(mdir / "apps", "web.yaml", pod(name="web"))
    found = validate_directory(mdir, NODE)
    assert codes(found) == ["subdirectory-ignored"]


def test_symlinks_are_followed_and_dangling_ones_skipped(mdir, tmp_path):
    target = write(tmp_path, "real.yaml", pod(name="web"))
    (mdir / "web.yaml").symlink_to(target)
    (mdir / "gone.yaml").symlink_to(tmp_path / "missing.yaml")
    found = validate_directory(mdir, NODE)
    assert sorted(codes(found)) == ["dangling-symlink", "symlink"]
    assert not has_errors(found)


def test_fifo_is_skipped(mdir):
    os.mkfifo(mdir / "pipe")
    assert codes(validate_directory(mdir, NODE)) == ["not-regular-file"]


def test_host_port_conflict_between_two_pods_is_an_error(mdir):
    write(
        mdir, "a.yaml", pod({"hostNetwork": True, "containers": [container(ports=[{"containerPort": 8080}])]}, name="a")
    )
    write(mdir, "b.yaml", pod({"containers": [container(ports=[{"containerPort": 80, "hostPort": 8080}])]}, name="b"))
    write(
        mdir,
        "c.yaml",
        pod({"containers": [container(ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}])]}, name="c"),
    )
    found = validate_directory(mdir, NODE)
    assert [(Path(f.path).name, f.code, f.severity) for f in found] == [("b.yaml", "host-port-conflict", "error")]
    assert "kube-system/a in a.yaml" in found[0].message


def test_a_port_a_control_plane_flag_names_clashes_at_bind_not_at_admission(mdir):
    api = {"hostNetwork": True, "containers": [container(command=["kube-apiserver", "--secure-port=6443"])]}
    write(mdir, "api.yaml", pod(api, name="kube-apiserver"))
    other = {"hostNetwork": True, "containers": [container(ports=[{"containerPort": 6443}])]}
    write(mdir, "lb.yaml", pod(other, name="haproxy"))
    found = validate_directory(mdir, NODE)
    assert codes(found) == ["host-port-bind-conflict"]  # admission sees only declared ports
    assert "admits both pods" in found[0].message and "fails to bind" in found[0].message
    assert "rejects" not in found[0].message and found[0].kubelet == "accepts"


def test_loose_modes_and_owners_warn(mdir):
    write(mdir, "a.yaml", pod(name="a"), mode=0o644)
    b = write(mdir, "b.yaml", pod(name="b"))
    os.chown(b, 65534, 65534)
    found = validate_directory(mdir, NODE)
    assert [(Path(f.path).name, f.code) for f in found] == [
        ("a.yaml", "loose-permissions"),
        ("b.yaml", "loose-permissions"),
    ]
    assert "0644" in found[0].message and "65534:65534" in found[1].message


def test_directory_writable_by_others_warns(mdir):
    mdir.chmod(0o777)
    assert codes(validate_directory(mdir, NODE)) == ["loose-permissions"]


def test_pods_that_fit_alone_but_not_together_predict_out_of_memory(mdir):
    big = {"containers": [container(resources={"requests": {"memory": "5Gi"}})]}
    write(mdir, "a.yaml", pod(big, name="a"))
    write(mdir, "b.yaml", pod(big, name="b"))
    found = validate_directory(mdir, NODE)
    assert [(Path(f.path).name, f.code) for f in found] == [("b.yaml", "out-of-memory")]
    # b needs 5Gi, a uses 5Gi, allocatable is 8Gi - 100Mi: 2Gi + 100Mi are missing
    assert f"q: {2 * 2**30 + 100 * 2**20}" in found[0].message, found[0].message
    assert "UnexpectedAdmissionError" in found[0].message and found[0].kubelet == "fails-admission"


def test_only_the_winning_duplicate_counts_for_node_fit(mdir):
    big = {"containers": [container(resources={"requests": {"cpu": "3"}})]}
    write(mdir, "a.yaml", pod(big, name="a"))
    write(mdir, "a.yaml.bak", pod(big, name="a"))
    assert "out-of-cpu" not in codes(validate_directory(mdir, NODE))


def test_validate_path_accepts_any_file_name_and_refuses_missing_paths(tmp_path):
    p = write(tmp_path, ".ansible_tmpXYZ", pod())
    assert validate_path(p, NODE) == []
    with pytest.raises(FileNotFoundError):
        validate_path(tmp_path / "nope", NODE)


def test_oversized_file_is_refused_but_judged_whole_under_the_kubelets_10_mib(tmp_path):
    p = write(tmp_path, "big.yaml", b"# " + b"x" * 5000 + b"\n" + pod())
    small = NODE.replace(max_bytes=1000)
    assert codes(validate_path(p, small)) == ["too-large"]


def test_oversized_file_reports_its_real_size_not_what_was_read(tmp_path):
    """A 2,001,623-byte file over the 1 MiB default: the message gives 2001623, not limit+1."""
    p = write(tmp_path, "huge.yaml", b"# " + b"x" * (2_001_623 - len(pod()) - 3) + b"\n" + pod())
    assert p.stat().st_size == 2_001_623
    (f,) = validate_path(p, NODE)
    assert f.code == "too-large" and "file is 2001623 bytes" in f.message, f.message
    assert str(NODE.max_bytes + 1) not in f.message


def test_too_large_says_whose_limit_it_is(tmp_path):
    """Over staticpodd's max_manifest_bytes but under the kubelet's 10 MiB: the kubelet still
    runs it; over 10 MiB: the kubelet refuses it (pkg/kubelet/config/file.go maxConfigLength)."""
    mid = write(tmp_path, "mid.yaml", b"#" + b"x" * 1_200_000 + b"\n" + pod())
    (f,) = validate_path(mid, NODE)
    assert "staticpodd's 1048576-byte limit (max_manifest_bytes)" in f.message, f.message
    assert "runs this one" in f.message and "drops" not in f.message
    assert f.kubelet == "accepts" and f.strictness
    big = write(tmp_path, "big.yaml", b"#" + b"x" * (10 * 1024 * 1024) + b"\n" + pod())
    (g,) = validate_path(big, NODE)
    assert "the kubelet reads at most 10485759 bytes" in g.message and "refuses the file" in g.message, g.message
    assert g.kubelet == "refuses"


def test_one_pod_in_two_files_is_a_duplicate_not_a_host_port_conflict(mdir):
    """The kubelet runs one of the two files (docs/kubelet-contract.md "Duplicate names across files"), so
    their shared host port can never conflict; a different pod on that port still does."""
    spec = {"hostNetwork": True, "containers": [container(ports=[{"containerPort": 8080}])]}
    write(mdir, "web.yaml", pod(spec, name="web"))
    write(mdir, "web.yaml.orig", pod(spec, name="web"))
    found = validate_directory(mdir, NODE)
    assert "host-port-conflict" not in codes(found), [f.format() for f in found]
    assert "duplicate-pod" in codes(found)
    write(mdir, "z-other.yaml", pod(spec, name="other"))
    conflicts = [f for f in validate_directory(mdir, NODE) if f.code == "host-port-conflict"]
    assert [(Path(f.path).name, f.severity) for f in conflicts] == [("z-other.yaml", "error")]


def _everything(mdir: Path) -> None:
    """A directory with one of each cross-file finding: a duplicate (a .bak), a host port conflict,
    pods that fit alone but not together, a stray that is not a pod, a loose mode."""
    big = {"containers": [container(resources={"requests": {"memory": "5Gi"}})]}
    write(mdir, "a.yaml", pod(big, name="a"))
    write(mdir, "b.yaml", pod(big, name="b"))
    write(mdir, "b.yaml.bak", pod(big, name="b"), mode=0o644)
    write(mdir, "h1.yaml", pod({"hostNetwork": True, "containers": [container(ports=[{"containerPort": 8080}])]},
                               name="h1"))
    write(mdir, "h2.yaml", pod({"containers": [container(ports=[{"containerPort": 80, "hostPort": 8080}])]}, name="h2"))
    write(mdir, "notes.txt", b"not a pod\n")


def _seen(found: list) -> list[tuple]:
    return [(Path(f.path).name, f.code, f.line, f.column, f.field, f.message) for f in found]


def test_a_memo_of_the_last_pass_gives_the_same_findings_and_validates_only_what_changed(mdir):
    from staticpodd.validate.podfacts import FileMemo

    _everything(mdir)
    memo = FileMemo()
    first = validate_directory(mdir, NODE, memo)
    assert memo.validated == 6
    assert _seen(first) == _seen(validate_directory(mdir, NODE))
    assert {"duplicate-pod", "host-port-conflict", "out-of-memory", "stray", "loose-permissions"} <= set(codes(first))
    # nothing changed: nothing is validated, the findings are the same
    assert _seen(validate_directory(mdir, NODE, memo)) == _seen(first)
    assert memo.validated == 0
    # one file changed (h2 no longer claims 8080; a claims more memory): only it is validated,
    # and the cross-file findings follow it
    write(mdir, "h2.yaml", pod({"containers": [container(ports=[{"containerPort": 80, "hostPort": 9090}])]}, name="h2"))
    again = validate_directory(mdir, NODE, memo)
    assert memo.validated == 1
    assert _seen(again) == _seen(validate_directory(mdir, NODE))
    assert "host-port-conflict" not in codes(again)
    # other options: every file is judged anew
    validate_directory(mdir, NODE.replace(max_bytes=1000), memo)
    assert memo.validated == 6


def test_a_pod_too_big_for_the_node_is_the_only_one_that_fails_admission(mdir):
    # A newcomer's node: kubeadm's control plane and a cache requesting more memory than the node
    # has. Only the cache fails admission; it never runs, so it uses nothing the others need.
    write(mdir, "a-cache.yaml", pod({"containers": [container(resources={"requests": {"memory": "20Gi"}})]},
                                   name="cache"))
    write(mdir, "b.yaml", pod({"containers": [container(resources={"requests": {"memory": "1Gi"}})]}, name="b"))
    write(mdir, "c.yaml", pod({"containers": [container(resources={"requests": {"cpu": "100m"}})]}, name="c"))
    found = validate_directory(mdir, NODE)
    assert [(Path(f.path).name, f.code) for f in found] == [("a-cache.yaml", "out-of-memory")]


def test_a_pod_that_fails_admission_together_takes_nothing_from_the_pods_after_it(mdir):
    big = {"containers": [container(resources={"requests": {"memory": "5Gi"}})]}
    write(mdir, "a.yaml", pod(big, name="a"))
    write(mdir, "b.yaml", pod(big, name="b"))  # a + b > 8Gi - 100Mi: b fails admission
    write(mdir, "c.yaml", pod({"containers": [container(resources={"requests": {"memory": "1Gi"}})]}, name="c"))
    found = validate_directory(mdir, NODE)
    assert [(Path(f.path).name, f.code) for f in found] == [("b.yaml", "out-of-memory")]
