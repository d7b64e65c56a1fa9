"""``on_invalid: restore`` acts only on bytes the kubelet itself refuses (two levels: what the kubelet refuses vs our strictness).

A multi-document file whose first document is the Pod, and a file with a duplicate key, are
refused by staticpodd (its own strictness) but run by the kubelet (docs/kubelet-contract.md "How a file is
decoded"). Restoring over them would restart a healthy pod for nothing, with a false message:
this is what the daemon did before. A tab in the indentation the kubelet refuses: restored.

Real parts: the staticpodd subprocess with inotify on a tmp_path --root, real SQLite, real
journald. No kubelet here (tests/e2e proves the kubelet's side of the same verdicts).
"""

from __future__ import annotations

import time

from daemon_harness import make_root, wait_journal, wait_until

MANIFESTS = "etc/kubernetes/manifests"


def _write(path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    tmp.rename(path)


def test_restore_leaves_what_the_kubelet_runs_and_restores_what_it_refuses(tmp_path, run_daemon):
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "kube-scheduler.yaml"
    good = live.read_bytes()
    d = run_daemon(root)
    d.wait_ready()

    multidoc = good + b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n"
    _write(live, multidoc)
    e = wait_journal(root, "INVALID_LIVE", lambda e: "multiple-documents" in e.get("FINDINGS", ""))
    assert e["KUBELET"] == "accepts" and e["POLICY_ACTION"] == "none", e
    assert e["PRIORITY"] == "4", e  # a warning: the pod keeps running
    assert "drops its pod" not in e["MESSAGE"] and "the kubelet runs it" in e["MESSAGE"], e["MESSAGE"]
    assert "not restored: the kubelet runs this file" in e["MESSAGE"], e["MESSAGE"]
    time.sleep(1.0)  # far past the debounce: nothing is put back
    assert live.read_bytes() == multidoc

    dup = good.replace(b"  name: kube-scheduler\n", b"  name: kube-scheduler\n  name: kube-scheduler\n", 1)
    assert dup != good
    _write(live, dup)
    e = wait_journal(root, "INVALID_LIVE", lambda e: "yaml-duplicate-key" in e.get("FINDINGS", ""))
    assert e["KUBELET"] == "accepts" and e["POLICY_ACTION"] == "none", e
    time.sleep(1.0)
    assert live.read_bytes() == dup

    tab = good.replace(b"\n  name: kube-scheduler", b"\n\tname: kube-scheduler", 1)
    _write(live, tab)
    e = wait_journal(root, "INVALID_LIVE", lambda e: "yaml-tab" in e.get("FINDINGS", ""))
    assert e["KUBELET"] == "refuses" and e["POLICY_ACTION"] == "restore", e
    assert e["PRIORITY"] == "3" and "the kubelet drops its pod" in e["MESSAGE"], e["MESSAGE"]
    # back to the newest version that passes validation: the original bytes
    wait_until(lambda: live.read_bytes() == good, what="the tab-indented bytes restored")


def test_an_emptied_manifest_is_restored(tmp_path, run_daemon):
    """``: > kube-scheduler.yaml`` (corpus B05-empty.yaml: "Object 'Kind' is missing in 'null'",
    the kubelet drops the pod). An empty file has a digest like any other: the restore used to
    take it for "no file", refuse as "changed after it was judged", and retry every second."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "kube-scheduler.yaml"
    good = live.read_bytes()
    d = run_daemon(root)
    d.wait_ready()
    with open(live, "wb"):
        pass  # truncated in place, as the shell's `: >` does
    wait_until(lambda: live.read_bytes() == good, what="the emptied file restored")
    e = wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("FILE_NAME") == "kube-scheduler.yaml")
    assert "version 1" in e["MESSAGE"], e["MESSAGE"]


def test_a_deeply_nested_json_write_is_restored_and_the_daemon_lives_on(tmp_path, run_daemon):
    """100,000 nested ``[`` in a file that starts with ``{``: Go's encoding/json refuses it
    (max depth 10000), Python's json raises RecursionError. The close-write fast path let that
    escape and the daemon died (found by a newcomer's try); now it is a refusal like any other."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "kube-scheduler.yaml"
    good = live.read_bytes()
    d = run_daemon(root)
    d.wait_ready()
    with open(live, "wb") as f:
        f.write(b'{"apiVersion": "v1", "kind": "Pod", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    wait_until(lambda: live.read_bytes() == good, what="the nested JSON restored")
    time.sleep(0.5)
    assert d.proc.poll() is None, "the daemon died"
