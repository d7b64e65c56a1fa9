"""Driver for test_journald_gone.py: runs inside ``unshare --mount --propagation private``.

In its own mount namespace it puts tmpfs over journald's sockets and journal directories
(/run/systemd/journal, /run/log/journal, /var/log/journal), so the machine's journald is not
touched; starts a private, real systemd-journald there; starts staticpodd on the --root given;
then kills that private journald mid-run and goes on writing. It prints one JSON object with
what it saw. Usage: journald_gone_driver.py ROOT WORKDIR
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOURNAL_DIRS = ("/run/systemd/journal", "/run/log/journal", "/var/log/journal")


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def journald_answers() -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect("/run/systemd/journal/socket")
        return True
    except OSError:
        return False
    finally:
        s.close()


def recorded(root: Path) -> set[str]:
    db = root / "var/lib/staticpodd/versions.sqlite3"
    if not db.exists():
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT lower(hex(digest)) FROM versions")}  # raw bytes (schema 4)
    except sqlite3.Error:
        return set()
    finally:
        con.close()


def wait(pred, timeout: float) -> float | None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def entries(root: Path) -> list[dict]:
    out = subprocess.run(["journalctl", "--directory", "/run/log/journal", "--no-pager", "-o", "json",
                          f"STATICPODD_ROOT={root}"], capture_output=True, text=True).stdout
    return [json.loads(ln) for ln in out.splitlines() if ln.strip()]


def main() -> int:
    root, work = Path(sys.argv[1]), Path(sys.argv[2])
    for d in JOURNAL_DIRS:
        os.makedirs(d, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d], check=True)
    jd = subprocess.Popen(["/lib/systemd/systemd-journald"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
    result: dict = {"private_journald_up": wait(journald_answers, 10) is not None}
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NOTIFY_SOCKET", None)
    err_path = work / "daemon.stderr"
    with open(err_path, "wb") as err:
        daemon = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(root)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO))
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    try:
        # up: the heartbeat is written and the start-up scan has adopted the four manifests
        result["daemon_up"] = wait(lambda: (root / "run/staticpodd/daemon.json").exists()
                                   and len(recorded(root)) >= 4, 30) is not None
        # 1. journald is there: a hand edit is recorded, and its entry reaches the private journal
        a = live.read_bytes() + b"# hand edit A, journald up\n"
        live.write_bytes(a)
        result["a_recorded_s"] = wait(lambda: sha(a) in recorded(root), 20)
        result["a_in_journal"] = wait(lambda: any(e.get("STATICPODD_EVENT") == "EXTERNAL_CHANGE"
                                                  for e in entries(root)), 10) is not None
        # 2. journald goes away mid-run (our private one: SIGKILL; its socket file stays behind)
        os.killpg(jd.pid, signal.SIGKILL)
        jd.wait()
        result["socket_left_behind"] = os.path.exists("/run/systemd/journal/socket")
        result["journald_answers_after_kill"] = journald_answers()
        # 3. the daemon goes on: a second hand edit is recorded, promptly
        b = a + b"# hand edit B, journald gone\n"
        live.write_bytes(b)
        result["b_recorded_s"] = wait(lambda: sha(b) in recorded(root), 20)
        # 4. the CLI goes on too; its entries go to stderr
        t0 = time.monotonic()
        park = subprocess.run([sys.executable, "-m", "staticpodd.cli", "park", "kube-scheduler", "--root", str(root)],
                              env=env, capture_output=True, text=True, timeout=60)
        result["park_rc"] = park.returncode
        result["park_s"] = time.monotonic() - t0
        result["park_stderr"] = park.stderr
        parked = root / "etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml"
        result["parked_sha_ok"] = parked.exists() and sha(parked.read_bytes()) == sha(b)
        time.sleep(1.0)
        result["daemon_alive"] = daemon.poll() is None
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                result["daemon_rc"] = daemon.wait(20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                result["daemon_rc"] = "hung"
        if jd.poll() is None:
            os.killpg(jd.pid, signal.SIGKILL)
            jd.wait()
    result["daemon_stderr"] = err_path.read_text(errors="replace")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
