"""A full disk, at every fill level from 0 to 200 KB free: every verb, the CLI and the daemon.

A fault seen before: a full disk gave tracebacks (raw ``sqlite3.OperationalError: database or
disk is full``), and when the rename had happened but the COMMIT after it failed the CLI exited 1
without saying that the kubelet already had the new file. Now every failure is a ``store-error``
or ``fs-error`` that says whether the change reached the kubelet (``details.reached_kubelet``)
and that ``recover`` records it; nothing is lost.

The whole --root is one real tmpfs (the version store, /run and the manifest directory share it);
a ballast file outside the manifest directory sets the free space. After every verb the suite
checks the bytes: each file in the manifest directory (live or parked) has a sha256 that is
recorded, or is recorded by ``recover`` once space returns; nothing that was ever in the
directory is missing from history at the end; no invalid file is ever live.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_harness import KUBEADM, Daemon, NotifySocket, corpus_dir, wait_until
from faultlib import Tmpfs, assert_no_traceback, recorded, recorded_digests, run_ctl, sha

#: free bytes to leave, 0 to 200 KB (tmpfs counts in 4 KiB pages)
LEVELS = [0, 4096, 8192, 12288, 16384, 24576, 32768, 49152, 65536, 98304, 131072, 163840, 204800]
DOCUMENTED = {0, 1, 3, 4, 5}  # README "Exit codes" (doctor: 1 = problems found)
MDIR = "etc/kubernetes/manifests"


@pytest.fixture
def full_root(tmp_path: Path) -> Iterator[tuple[Path, Tmpfs]]:
    corpus = corpus_dir() / "manifests"
    if not corpus.is_dir():
        pytest.fail(f"the corpus is missing at {corpus} (../shared/corpus)")
    fs = Tmpfs(tmp_path / "root", 8 * 1024 * 1024)
    root = fs.path
    (root / MDIR).mkdir(parents=True)
    for name, src in KUBEADM.items():
        shutil.copyfile(corpus / src, root / MDIR / name)
        os.chmod(root / MDIR / name, 0o600)
    try:
        yield root, fs
    finally:
        fs.close()


def _dir_contents(root: Path) -> dict[str, bytes]:
    """Live files and parked copies -> bytes (what the kubelet reads, and what is parked)."""
    out = {}
    for sub in ("", ".staticpodd/parked"):
        d = root / MDIR / sub
        if not d.is_dir():
            continue
        for n in os.listdir(d):
            p = d / n
            if not n.startswith(".") and p.is_file():
                out[f"{sub}/{n}" if sub else n] = p.read_bytes()
    return out


def code_of(reply: dict) -> str:
    return (reply.get("error") or {}).get("code", "")


def _check_reply(res, verb: str) -> dict:
    assert_no_traceback(res.stdout, res.stderr)
    assert res.returncode in DOCUMENTED, (verb, res.returncode, res.stdout, res.stderr)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    reply = json.loads(lines[-1]) if lines else {}
    if res.returncode == 1 and reply:
        if verb == "doctor" and "error" not in reply:
            return reply  # doctor exits 1 when it found problems (a full disk is one)
        assert code_of(reply) in ("store-error", "fs-error", "invalid-manifest", "hook-failed", "editor-failed"), \
            (verb, reply)
        code = code_of(reply)
        if code in ("store-error", "fs-error") and verb in ("apply", "rollback", "park", "unpark", "edit"):
            reached = reply["error"].get("details", {}).get("reached_kubelet")
            assert reached in (True, False), (verb, reply)
            if reached:
                assert "recover" in (reply["error"].get("hint") or "") + reply["error"]["message"], reply
            else:
                assert "nothing was changed" in reply["error"]["message"], reply
    return reply


def test_every_verb_at_every_fill_level_gives_a_clean_error_and_loses_nothing(
        full_root: tuple[Path, Tmpfs], tmp_path: Path) -> None:
    root, fs = full_root
    assert run_ctl(root, "recover").returncode == 0
    assert run_ctl(root, "park", "kube-scheduler").returncode == 0  # adopt the directory: versions 1
    assert run_ctl(root, "unpark", "kube-scheduler").returncode == 0
    ever: set[str] = {sha(b) for b in _dir_contents(root).values()}
    counts = {"runs": 0, "ok": 0, "store-error": 0, "fs-error": 0, "reached_kubelet_unrecorded": 0}
    base = (root / MDIR / "kube-scheduler.yaml").read_bytes()
    outside = tmp_path / "src"
    outside.mkdir()
    for level in LEVELS:
        fs.fill_to(level)
        new = outside / "kube-scheduler.yaml"
        new.write_bytes(base + f"# level {level} apply\n".encode())
        # a hand edit at this level, which the next changing verb must record (drift)
        hand = root / MDIR / "etcd.yaml"
        try:
            with open(hand, "ab") as fh:
                fh.write(f"# hand edit at level {level}\n".encode())
        except OSError:
            pass  # no room for it: then nobody wrote it
        ever |= {sha(b) for b in _dir_contents(root).values()}
        verbs = [
            ("status",), ("history", "etcd"), ("show", "kube-scheduler@1"), ("diff", "etcd"),
            ("validate", str(root / MDIR)),
            ("apply", str(new)), ("rollback", "kube-scheduler"),
            ("park", "kube-controller-manager"), ("unpark", "kube-controller-manager"),
            ("recover",), ("edit", "kube-apiserver"), ("doctor",),
        ]
        for verb in verbs:
            # edit: a non-interactive "editor" that appends one line to the copy it is given
            res = run_ctl(root, *verb, "--json", "--lock-timeout", "5",
                          EDITOR=f"sh -c 'echo \"# edit at level {level}\" >> \"$1\"' edit")
            reply = _check_reply(res, verb[0])
            counts["runs"] += 1
            if res.returncode == 0:
                counts["ok"] += 1
            else:
                code = code_of(reply) or f"{verb[0]}-exit-{res.returncode}"  # doctor: problems found
                counts[code] = counts.get(code, 0) + 1
                if (reply.get("error") or {}).get("details", {}).get("reached_kubelet"):
                    counts["reached_kubelet_unrecorded"] += 1
            snap = _dir_contents(root)
            ever |= {sha(b) for b in snap.values()}
            assert not any("stage-" in k for k in snap), snap.keys()  # no staging file where the kubelet reads
        fs.unfill()
        # space is back: recover records whatever reached the kubelet unrecorded
        res = run_ctl(root, "recover", "--json")
        _check_reply(res, "recover")
        assert res.returncode == 0, (res.stdout, res.stderr)
        st = run_ctl(root, "status", "--json")
        assert st.returncode == 0, st.stderr
        comps = json.loads(st.stdout.splitlines()[-1])["components"]
        assert not [c for c in comps if c["state"] == "missing"], comps
        res = run_ctl(root, "park", "kube-controller-manager", "--json")  # a changing verb: records drift
        assert res.returncode in (0, 4), (res.stdout, res.stderr)
        run_ctl(root, "unpark", "kube-controller-manager")
    have = recorded_digests(root)
    lost = ever - have
    assert not lost, f"{len(lost)} byte strings that were in the directory are in no version"
    # the validator never let an invalid file in: every live file passes
    v = run_ctl(root, "validate", str(root / MDIR))
    assert v.returncode == 0, v.stdout + v.stderr
    print(f"disk full walk: {len(LEVELS)} levels x {len(verbs)} verbs: {counts}")


def test_the_daemon_on_a_full_disk_never_tracebacks_and_records_everything_once_space_returns(
        full_root: tuple[Path, Tmpfs]) -> None:
    root, fs = full_root
    notify = NotifySocket()
    d = Daemon(root, notify)
    live = root / MDIR / "kube-apiserver.yaml"
    written: list[bytes] = []
    try:
        d.wait_ready()
        for level in LEVELS:
            fs.fill_to(level)
            try:
                with open(live, "ab") as fh:
                    fh.write(f"# hand edit at level {level}\n".encode())
                written.append(live.read_bytes())
            except OSError:
                pass
            time.sleep(0.6)  # debounce + a pass at this level
            assert d.proc.poll() is None, d.stderr
        fs.unfill()
        last = live.read_bytes()
        wait_until(lambda: sha(last) in recorded_digests(root, "kube-apiserver"), timeout=30,
                   what="the daemon records the last hand edit once space returns")
        assert d.proc.poll() is None
        assert "Traceback" not in d.stderr, d.stderr
        # every line anyone appended is in some version (later appends carry the earlier ones)
        versions = [r[4] for r in recorded(root, "kube-apiserver")]
        for w in written:
            assert any(v.startswith(w) for v in versions), w[-60:]
    finally:
        if d.proc.poll() is None:
            d.stop()
        notify.close()


def test_a_commit_that_fails_after_the_rename_says_the_kubelet_has_it_and_recover_records_it(
        tmp_path: Path) -> None:
    """The store on its own small tmpfs; a 60 KB manifest. At some free level the intent (a few
    hundred bytes) fits and the version's blob does not: the rename is done, the COMMIT after it
    fails. The error must say the kubelet has the new file, and recover must record it."""
    root = tmp_path / "root"
    (root / MDIR).mkdir(parents=True)
    fs = Tmpfs(root / "var/lib/staticpodd", 16 * 1024 * 1024)
    try:
        from spd_testlib import small_pod

        (root / MDIR / "web.yaml").write_text(small_pod("web"))
        assert run_ctl(root, "recover").returncode == 0
        # the store exists before the fill levels (its schema is ~120 KB of pages): each level then
        # tests one apply's own commits, not the store's creation
        first = tmp_path / "first.yaml"
        first.write_text(small_pod("web", image="nginx:1.26"))
        assert run_ctl(root, "apply", str(first), "--as", "web").returncode == 0
        seen_after_rename = 0
        for level in range(0, 200 * 1024, 4096):
            new = tmp_path / "web.yaml"
            # random padding: the store compresses blobs, and this one must stay ~60 KB
            data = (small_pod("web") + "".join(f"# padding line {i:05d} {os.urandom(20).hex()}\n" for i in range(1000))
                    + f"# level {level}\n").encode()
            new.write_bytes(data)
            fs.fill_to(level)
            res = run_ctl(root, "apply", str(new), "--json")
            _check_reply(res, "apply")
            reply = json.loads(res.stdout.splitlines()[-1])
            fs.unfill()
            if res.returncode == 1 and reply["error"].get("details", {}).get("reached_kubelet"):
                seen_after_rename += 1
                assert (root / MDIR / "web.yaml").read_bytes() == data  # the kubelet has it
                assert "is in place" in reply["error"]["message"] and "recording it failed" in reply["error"]["message"]
                assert "staticpodctl recover" in reply["error"]["hint"]
                assert sha(data) not in recorded_digests(root, "web")
                rec = run_ctl(root, "recover", "--json")
                assert rec.returncode == 0, rec.stdout + rec.stderr
                assert json.loads(rec.stdout)["recovered"][0]["outcome"] == "finished"
                last = recorded(root, "web")[-1]
                assert sha(last[4]) == sha(data) and last[2:4] == ("apply", "root")
            elif res.returncode == 0:
                assert sha(data) in recorded_digests(root, "web")
            else:
                assert (root / MDIR / "web.yaml").read_bytes() != data  # nothing changed
        assert seen_after_rename >= 1, "no fill level hit the COMMIT after the rename"
        print(f"COMMIT-after-rename failures seen: {seen_after_rename} of {200 // 4} levels")
    finally:
        fs.close()
