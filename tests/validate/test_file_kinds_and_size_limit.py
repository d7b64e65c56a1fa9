"""What the kubelet's file source reads: regular files only (a FIFO, socket or device is skipped,
never opened: pkg/kubelet/config/file.go), and only below maxConfigLength (10 MiB): it reads with
utilio.ReadAtMost(file, 10 MiB), which fails with "the read limit is reached" once the limit is
reached, so a file of exactly 10 MiB is refused."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from staticpodd.manifest.decoded import KUBELET_MAX_BYTES, KUBELET_MAX_CONFIG_LENGTH
from staticpodd.node import fsops
from staticpodd.validate.refused import kubelet_refuses

LIMIT = 10 * 1024 * 1024  # maxConfigLength, pkg/kubelet/config/common.go
POD = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: a\n    image: nginx:1.27\n"


def _pod_of_size(size: int) -> bytes:
    data = POD + b"#" + b"x" * (size - len(POD) - 2) + b"\n"
    assert len(data) == size
    return data


def test_the_limit_is_the_kubelets_max_config_length_and_the_largest_file_read_is_one_byte_less():
    assert KUBELET_MAX_CONFIG_LENGTH == LIMIT
    assert KUBELET_MAX_BYTES == fsops.KUBELET_MAX_BYTES == LIMIT - 1


@pytest.mark.parametrize(("size", "kubelet_reads"), [(LIMIT - 1, True), (LIMIT, False), (LIMIT + 1, False)],
                         ids=["limit-1", "limit", "limit+1"])
def test_the_10_mib_boundary_is_the_kubelets_on_both_sides(sandbox, ctl_proc, size, kubelet_reads):
    data = _pod_of_size(size)
    assert (kubelet_refuses(data) is None) == kubelet_reads
    path = sandbox.root / "web.yaml"
    path.write_bytes(data)
    run = ctl_proc("validate", str(path))
    assert run.returncode == 1, run.stderr  # over max_manifest_bytes (1 MiB) either way
    if kubelet_reads:
        assert "the kubelet refuses it" not in run.stdout, run.stdout
        assert f"the kubelet reads files of up to {LIMIT - 1} bytes" in run.stdout, run.stdout
    else:
        assert "the kubelet refuses it" in run.stdout, run.stdout
        assert f"file is {size} bytes; the kubelet reads at most {LIMIT - 1} bytes" in run.stdout, run.stdout
        assert "the read limit is reached" in run.stdout


def _fifo(path):
    os.mkfifo(path)
    return path


def _socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return path


@pytest.mark.parametrize("make", [_fifo, _socket, lambda p: "/dev/zero"], ids=["fifo", "socket", "device"])
def test_validate_refuses_a_file_that_is_not_regular_at_once(sandbox, ctl_proc, make):
    target = make(sandbox.root / "web.yaml")
    try:
        run = ctl_proc("validate", str(target), timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"validate {target} hung")
    assert run.returncode == 1, run.stderr
    assert "not-regular-file" in run.stdout and "reads regular files only" in run.stdout, run.stdout


def test_a_fifo_in_the_manifest_directory_hangs_no_verb(kubeadm, ctl_proc):
    os.mkfifo(kubeadm.manifests / "notes.yaml")
    for args in (("validate",), ("status",), ("park", "kube-scheduler", "--reason", "drill"), ("doctor",)):
        try:
            run = ctl_proc(*args, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{' '.join(args)} hung on a FIFO in the manifest directory")
        assert "Traceback" not in run.stderr, run.stderr
