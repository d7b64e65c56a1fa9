"""The textfile built from what the real CLI reports: ``staticpodctl status --json`` and
``staticpodctl validate --json`` on a sandbox --root with kubeadm's manifests from the corpus,
written with write_textfile and parsed back with prometheus_client's parser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from calendar import timegm
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from staticpodd.daemon.metrics import render, snapshot_from_status, write_textfile

CTL = Path(sys.executable).parent / "staticpodctl"


def _corpus() -> Path:
    env = os.environ.get("STATICPODD_CORPUS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


def _ctl(root: Path, *args: str) -> dict:
    proc = subprocess.run(
        [str(CTL), *args, "--root", str(root), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "STATICPODD_NO_JOURNAL": "1"},
    )
    return json.loads(proc.stdout)


def test_status_and_findings_from_the_cli_become_the_right_samples(tmp_path: Path):
    corpus = _corpus()
    if not (corpus / "manifests").is_dir():
        pytest.skip(f"corpus not found at {corpus} (set STATICPODD_CORPUS)")
    if not CTL.exists():
        pytest.skip(f"{CTL} is missing (bash .ci/setup installs the project)")
    root = tmp_path / "root"
    mdir = root / "etc" / "kubernetes" / "manifests"
    mdir.mkdir(parents=True)
    src = tmp_path / "src"
    src.mkdir()
    for n, comp in (
        ("03-zetaoss-kubeadm-kube-scheduler.yaml", "kube-scheduler"),
        ("02-zetaoss-kubeadm-kube-controller-manager.yaml", "kube-controller-manager"),
    ):
        shutil.copyfile(corpus / "manifests" / n, src / f"{comp}.yaml")
        assert _ctl(root, "apply", str(src / f"{comp}.yaml"))["ok"]
    parked = _ctl(root, "park", "kube-scheduler", "--until", "2030-01-01T00:00Z", "--reason", "etcd defrag")
    assert parked["ok"], parked
    # what Ansible's backup: yes leaves behind: a stray that also duplicates the pod
    backup = "kube-controller-manager.yaml.4242.2026-11-29@18:35:09~"
    shutil.copyfile(mdir / "kube-controller-manager.yaml", mdir / backup)

    status = _ctl(root, "status")
    findings = _ctl(root, "validate", str(mdir))["findings"]
    sched = next(c for c in status["components"] if c["component"] == "kube-scheduler")
    since_epoch = timegm(time.strptime(sched["parked"]["since"], "%Y-%m-%dT%H:%M:%SZ"))
    now = since_epoch + 90.0

    snap = snapshot_from_status(status, findings, started_at=now - 600, now=now)
    textfile_dir = tmp_path / "node-exporter"
    textfile_dir.mkdir()
    path = write_textfile(textfile_dir, render(snap))
    assert os.listdir(textfile_dir) == ["staticpodd.prom"]
    fams = {f.name: f for f in text_string_to_metric_families(path.read_text())}

    def val(name, **labels):
        hits = [s.value for s in fams[name].samples if all(s.labels.get(k) == v for k, v in labels.items())]
        assert len(hits) == 1, (name, labels, fams[name].samples)
        return hits[0]

    assert val("staticpodd_component_state", component="kube-scheduler", state="parked") == 1
    assert val("staticpodd_component_state", component="kube-controller-manager", state="live") == 1
    assert val("staticpodd_component_park_deadline_timestamp_seconds", component="kube-scheduler") == timegm(
        (2030, 1, 1, 0, 0, 0)
    )
    assert val("staticpodd_component_park_age_seconds", component="kube-scheduler") == 90
    assert val("staticpodd_component_version", component="kube-scheduler") >= 1
    assert val("staticpodd_strays") == 1
    assert val("staticpodd_duplicates") == 1
    assert val("staticpodd_start_time_seconds") == now - 600
