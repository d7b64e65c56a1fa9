"""Salt contracts with the real Salt (``salt-call --local``): ``file.managed`` with
``check_cmd: staticpodctl validate`` and ``cmd.run`` with ``stateful`` reading
``staticpodctl apply --json``.

Salt is not a test dependency (it is large and pins its own libraries): these tests run when
``salt-call`` is found through ``STATICPODD_SALT_CALL`` or on PATH, e.g. from a throwaway
virtualenv: ``python3 -m venv /tmp/saltvenv && /tmp/saltvenv/bin/pip install salt`` then
``STATICPODD_SALT_CALL=/tmp/saltvenv/bin/salt-call``. Otherwise they skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from staticpodd.manifest.cmpatterns import SALT_TEMPFILE, identify

HERE = Path(__file__).resolve().parent
SALT_CALL = os.environ.get("STATICPODD_SALT_CALL") or shutil.which("salt-call")

pytestmark = pytest.mark.skipif(
    not SALT_CALL or not os.path.exists(SALT_CALL),
    reason="salt-call not found (set STATICPODD_SALT_CALL to a salt-call from a throwaway venv)",
)

FILE_ID = "file_|-kube-scheduler-desired_|-"
APPLY_ID = "cmd_|-kube-scheduler-apply_|-"


@pytest.fixture
def salt_apply(sandbox, tmp_path):
    sroot = tmp_path / "salt"
    (sroot / "srv").mkdir(parents=True)
    for sls in ("staticpod.sls", "unsafe_direct.sls"):
        shutil.copyfile(HERE / "salt" / sls, sroot / "srv" / sls)
    (sroot / "minion").write_text(
        "file_client: local\n"
        f"root_dir: {sroot}\ncachedir: {sroot}/cache\npki_dir: {sroot}/pki\n"
        f"log_file: {sroot}/minion.log\nfile_roots:\n  base:\n    - {sroot}/srv\n"
    )

    def run(source: Path, *, test: bool = False, sls: str = "staticpod") -> tuple[int, dict]:
        pillar = json.dumps(
            {"sp_root": str(sandbox.root), "sp_source": str(source), "sp_manifest_dir": str(sandbox.manifest_dir)}
        )
        args = [
            SALT_CALL,
            "--local",
            "-c",
            str(sroot),
            "--out=json",
            "--retcode-passthrough",
            "state.apply",
            sls,
            f"pillar={pillar}",
        ]
        if test:
            args.append("test=True")
        proc = subprocess.run(args, env=sandbox.env, capture_output=True, text=True, cwd=sandbox.work, timeout=300)
        states = json.loads(proc.stdout)["local"]
        return proc.returncode, {
            key.split("_|-")[0] + "_|-" + key.split("_|-")[1] + "_|-": v for key, v in states.items()
        }

    return run


def test_first_run_changes_second_run_is_clean(sandbox, salt_apply, scheduler):
    good, _, _ = scheduler
    rc, states = salt_apply(good)
    assert rc == 0, states
    assert states[FILE_ID]["result"] is True and states[FILE_ID]["changes"]
    apply = states[APPLY_ID]
    assert apply["result"] is True and apply["changes"]["changed"] is True
    assert "apply version 1" in apply["comment"]
    assert sandbox.live().read_bytes() == good.read_bytes()
    before = sandbox.snapshot()

    rc, states = salt_apply(good)
    assert rc == 0
    assert states[FILE_ID]["changes"] == {}
    assert states[APPLY_ID]["result"] is True and states[APPLY_ID]["changes"] == {}
    assert "unchanged" in states[APPLY_ID]["comment"]
    assert sandbox.snapshot() == before


def test_check_cmd_refuses_an_invalid_manifest(sandbox, salt_apply, scheduler):
    good, _, invalid = scheduler
    assert salt_apply(good)[0] == 0
    before = sandbox.snapshot()
    rc, states = salt_apply(invalid)
    assert rc != 0
    assert states[FILE_ID]["result"] is False
    assert "error[yaml-tab]" in json.dumps(states[FILE_ID])
    assert states[APPLY_ID]["result"] is False  # requisite failed: never ran
    assert sandbox.snapshot() == before


def test_test_mode_runs_staticpodctl_check_and_changes_nothing(sandbox, salt_apply, scheduler):
    good, changed, _ = scheduler
    assert salt_apply(good)[0] == 0
    before = sandbox.snapshot()
    rc, states = salt_apply(changed, test=True)
    assert states[FILE_ID]["result"] is None  # "would be changed"
    assert sandbox.snapshot() == before


def test_file_managed_into_the_manifest_directory_creates_a_non_dot_temp_file_there(sandbox, salt_apply, scheduler):
    """Why the README says: never point file.managed at the kubelet's directory. A real inotify
    watch (watchdog) records every name created in the directory while Salt writes."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers.inotify import InotifyObserver

    good, _, _ = scheduler
    created: list[str] = []

    class Record(FileSystemEventHandler):
        def on_created(self, event):
            created.append(os.path.basename(event.src_path))

    observer = InotifyObserver()
    observer.schedule(Record(), str(sandbox.manifest_dir))
    observer.start()
    try:
        rc, _ = salt_apply(good, sls="unsafe_direct")
    finally:
        observer.stop()
        observer.join()
    assert rc == 0
    temps = [n for n in created if n != "kube-scheduler.yaml"]
    assert temps, created
    found = identify(temps[0])
    assert found is not None and found.pattern is SALT_TEMPFILE and found.target == "kube-scheduler.yaml"
    assert sorted(os.listdir(sandbox.manifest_dir)) == ["kube-scheduler.yaml"]  # renamed away afterwards
