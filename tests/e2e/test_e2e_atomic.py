"""The real-kubelet tier (3) against a real kubelet 1.34 + containerd: the kubelet never sees a partial
or foreign file from us. 50 alternating applies, then every crash point of apply, rollback,
park and unpark killed with SIGKILL (``STATICPODD_TEST_CRASHPOINT``, as tests/core/
test_core_crash.py) and ``recover``: the kubelet's log shows no parse error for our file, and the
pod ends running the bytes that are live. A control run with ``cat new > file`` shows the same
check catching partial reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from e2e_lib import Node, scheduler_bytes, wait_json

CRASH_POINTS = [
    ("apply", "swap:staged"), ("apply", "swap:intent"), ("apply", "swap:renamed"), ("apply", "swap:recorded"),
    ("rollback", "swap:staged"), ("rollback", "swap:intent"), ("rollback", "swap:renamed"), ("rollback", "swap:recorded"),
    ("park", "park:intent"), ("park", "park:renamed"),
    ("unpark", "unpark:intent"), ("unpark", "unpark:renamed"),
]


def _ctl_env(node: Node, *args: str, point: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if point:
        env["STATICPODD_TEST_CRASHPOINT"] = point
    return subprocess.run([str(Path(sys.executable).parent / "staticpodctl"), *args, "--root", str(node.root)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def _our_parse_errors(node: Node, offset: int) -> list[str]:
    path = str(node.manifests / "kube-scheduler.yaml")
    return [ln for ln in node.parse_errors(offset) if path in ln]


def test_applies_and_crash_points_never_show_the_kubelet_a_partial_file(node: Node, tmp_path) -> None:
    a, b = scheduler_bytes(extra_args=("--v=2",)), scheduler_bytes(extra_args=("--v=3",))
    src_a, src_b = tmp_path / "a" / "kube-scheduler.yaml", tmp_path / "b" / "kube-scheduler.yaml"
    for p, data in ((src_a, a), (src_b, b)):
        p.parent.mkdir()
        p.write_bytes(data)
    live = node.manifests / "kube-scheduler.yaml"
    hashes: dict[bytes, str] = {}
    for src, data in ((src_a, a), (src_b, b)):  # the config.hash each version runs under
        res = node.ctl("apply", str(src), "--wait=120s", "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        hashes[data] = wait_json(res)["wait"]["details"]["config_hash"]
    offset = node.lab.log_offset()
    for i in range(50):
        res = _ctl_env(node, "apply", str(src_a if i % 2 == 0 else src_b))
        assert res.returncode == 0, res.stderr
    for verb, point in CRASH_POINTS:
        before = live.read_bytes() if live.exists() else None
        other = src_b if before == a else src_a
        args = {"apply": ["apply", str(other)], "rollback": ["rollback", "kube-scheduler"],
                "park": ["park", "kube-scheduler"], "unpark": ["unpark", "kube-scheduler"]}[verb]
        if verb == "unpark" and not (node.parked / "kube-scheduler.yaml").exists():
            assert _ctl_env(node, "park", "kube-scheduler").returncode == 0
        if verb in ("apply", "rollback", "park") and not live.exists():
            assert _ctl_env(node, "unpark", "kube-scheduler").returncode == 0
        res = _ctl_env(node, *args, point=point)
        assert res.returncode == -signal.SIGKILL, f"{verb} at {point}: exit {res.returncode}: {res.stderr}"
        rec = _ctl_env(node, "recover")
        assert rec.returncode == 0, rec.stderr
        if live.exists():
            assert live.read_bytes() in (a, b), f"{verb} at {point}: live bytes are neither version"
    if not live.exists():
        assert _ctl_env(node, "unpark", "kube-scheduler").returncode == 0
    errors = _our_parse_errors(node, offset)
    assert errors == [], f"{len(errors)} parse errors for our file, e.g. {errors[:1]}"
    want = hashes[live.read_bytes()]
    node.wait(lambda: (s := node.state("kube-scheduler")) is not None and s.config_hash == want, 90,
              "the pod running the live bytes")


def test_control_cat_over_the_live_file_gives_the_kubelet_partial_reads(node: Node, tmp_path) -> None:
    """The same check catches a writer that is not atomic: ``cat new > file`` truncates first,
    and the kubelet reads the empty file on IN_MODIFY."""
    a, b = scheduler_bytes(extra_args=("--v=2",)), scheduler_bytes(extra_args=("--v=3",))
    live = node.write("kube-scheduler.yaml", a)
    (tmp_path / "a").write_bytes(a)
    (tmp_path / "b").write_bytes(b)
    offset = node.lab.log_offset()
    for i in range(50):
        subprocess.run(["sh", "-c", f'cat "{tmp_path / ("a" if i % 2 else "b")}" > "{live}"'], check=True)
    errors = _our_parse_errors(node, offset)
    print(f"\ncontrol: 50 `cat >` writes gave the kubelet {len(errors)} parse errors")
    assert errors, "50 non-atomic writes and not one parse error: the check cannot fail"
