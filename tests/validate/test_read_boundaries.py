"""What the kubelet reads: a regular file of fewer than 10 MiB. A FIFO, a socket or a device is
skipped (and never blocks validate); a file that reaches 10 MiB is refused, because the kubelet
reads with ``utilio.ReadAtMost(file, maxConfigLength)``, which fails when the limit is *reached*
(pkg/kubelet/config/file.go; KUBELET.md "Which files are pods")."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest

LIMIT = 10 * 1024 * 1024
POD = (b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  namespace: kube-system\nspec:\n  containers:\n"
       b"  - name: c\n    image: registry.k8s.io/pause:3.10\n")


def _sized(path, size: int) -> None:
    pad = size - len(POD) - len(b"# \n")
    assert pad > 0
    path.write_bytes(POD + b"# " + b"x" * pad + b"\n")
    assert path.stat().st_size == size


@pytest.mark.parametrize("size, kubelet_refuses", [(LIMIT - 1, False), (LIMIT, True), (LIMIT + 1, True)])
def test_the_10_mib_boundary_is_the_kubelets_to_the_byte(ctl_proc, tmp_path, size, kubelet_refuses) -> None:
    f = tmp_path / "big.yaml"
    _sized(f, size)
    p = ctl_proc("validate", str(f), "--json")
    findings = [x for x in json.loads(p.stdout)["findings"] if x["code"] == "too-large"]
    assert findings, p.stdout
    msg = findings[0]["message"]
    if kubelet_refuses:
        assert "10485760-byte (10 MiB) limit" in msg and "the kubelet refuses it" in msg, msg
    else:
        assert "max_manifest_bytes" in msg and "runs this one" in msg, msg  # only staticpodd's own limit


def test_validate_of_a_fifo_answers_at_once(ctl_proc, tmp_path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    try:
        p = ctl_proc("validate", str(fifo), "--json", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("validate blocked on a FIFO with no writer")
    assert p.returncode == 1
    assert [x["code"] for x in json.loads(p.stdout)["findings"]] == ["not-regular-file"]


def test_a_fifo_and_a_socket_in_the_directory_are_skipped_like_the_kubelet_does(sandbox, ctl_proc) -> None:
    os.mkfifo(sandbox.manifests / "pipe.yaml")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sandbox.manifests / "sock.yaml"))
    try:
        p = ctl_proc("validate", str(sandbox.manifests), "--json", timeout=20)
    finally:
        s.close()
    codes = {(x["path"].rsplit("/", 1)[-1], x["code"]) for x in json.loads(p.stdout)["findings"]}
    assert codes == {("pipe.yaml", "not-regular-file"), ("sock.yaml", "not-regular-file")}, codes
