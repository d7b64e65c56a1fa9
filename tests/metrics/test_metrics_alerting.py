"""Metrics that alerting can use, from a real daemon on a sandbox --root.

Real parts: staticpodd as a subprocess (tests/daemon/daemon_harness.py), the version store,
Debian's ``promtool`` (package ``prometheus``): ``promtool check metrics`` lints the textfile and
``promtool test rules`` runs docs/tasks/alert-with-prometheus.md's example alert rules on series made from the textfile
the daemon wrote before and after a hand edit.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_harness import Daemon as DaemonProc
from daemon_harness import NotifySocket, make_root, wait_until

REPO = Path(__file__).resolve().parents[2]
PROM_DIR = "var/lib/prometheus/node-exporter"
CONFIG = "metrics:\n  enabled: true\n  textfile_dir: /var/lib/prometheus/node-exporter\non_invalid: restore\n"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def promtool() -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool not installed (apt: prometheus, in .ci/apt-packages.txt)")
    return tool


def samples(text: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of an exposition text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def readme_rules() -> str:
    text = (REPO / "docs/tasks/alert-with-prometheus.md").read_text()
    block = text.split("<!-- staticpodd-alert-rules -->", 1)[1].split("<!-- /staticpodd-alert-rules -->", 1)[0]
    return block.split("```yaml\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def notify():
    s = NotifySocket()
    yield s
    s.close()


def start(root: Path, notify: NotifySocket) -> DaemonProc:
    d = DaemonProc(root, notify)
    try:
        d.wait_ready()
    except BaseException:
        d.stop()  # never leave a daemon behind
        raise
    return d


def test_counters_count_what_happened_and_survive_a_restart(tmp_path: Path, notify: NotifySocket) -> None:
    root = make_root(tmp_path, CONFIG)
    (root / PROM_DIR).mkdir(parents=True)
    prom = root / PROM_DIR / "staticpodd.prom"
    d = start(root, notify)
    try:
        first = samples(wait_until(lambda: prom.exists() and prom.read_text(), what="textfile"))
        # adoption of the fresh store is not an external change
        assert first["staticpodd_external_changes_total"] == 0
        assert "staticpodd_last_external_change_timestamp_seconds" not in first
        m = root / "etc/kubernetes/manifests"
        t0 = time.time()
        with open(m / "kube-scheduler.yaml", "a") as f:
            f.write("# hand edit\n")
        # an invalid write, restored by on_invalid: restore
        (m / "etcd.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata:\n\tname: etcd\n")
        after = wait_until(
            lambda: (s := samples(prom.read_text())).get("staticpodd_restores_total", 0) >= 1
            and s.get("staticpodd_external_changes_total", 0) >= 2 and s, what="counters moved")
        assert after["staticpodd_last_external_change_timestamp_seconds"] >= t0 - 1
        assert after["staticpodd_last_restore_timestamp_seconds"] >= t0 - 1
        bad = tmp_path / "bad.yaml"
        bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  hostNetwork: 'yes'\n")
        r = subprocess.run([sys.executable, "-m", "staticpodd.cli", "apply", str(bad), "--as", "kube-scheduler",
                            "--root", str(root)], capture_output=True, text=True, cwd=REPO)
        assert r.returncode != 0, r.stdout + r.stderr
        wait_until(lambda: samples(prom.read_text()).get("staticpodd_refused_applies_total") == 1,
                   what="refused apply counted")
    finally:
        d.stop()
    before_restart = samples(prom.read_text())
    d = start(root, notify)
    try:
        time.sleep(1.5)
        wait_until(lambda: samples(prom.read_text())["staticpodd_start_time_seconds"]
                   != before_restart["staticpodd_start_time_seconds"], what="rewritten by the new daemon")
        again = samples(prom.read_text())
    finally:
        d.stop()
    for name in ("staticpodd_external_changes_total", "staticpodd_restores_total", "staticpodd_refused_applies_total",
                 "staticpodd_last_external_change_timestamp_seconds", "staticpodd_last_restore_timestamp_seconds"):
        assert again[name] == before_restart[name], name
    r = subprocess.run([promtool(), "check", "metrics"], input=prom.read_text(), capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_a_removed_component_leaves_no_series(tmp_path: Path, notify: NotifySocket) -> None:
    root = make_root(tmp_path, CONFIG)
    (root / PROM_DIR).mkdir(parents=True)
    prom = root / PROM_DIR / "staticpodd.prom"
    d = start(root, notify)
    try:
        wait_until(lambda: prom.exists() and 'component="etcd"' in prom.read_text(), what="etcd in metrics")
        (root / "etc/kubernetes/manifests/etcd.yaml").unlink()
        wait_until(lambda: 'component="etcd"' not in prom.read_text(), what="etcd's series gone")
        text = prom.read_text()
    finally:
        d.stop()
    assert 'state="removed"' not in text
    assert samples(text)["staticpodd_external_changes_total"] == 1  # the removal is counted


def test_the_readme_drift_alert_fires_for_a_hand_edit(tmp_path: Path, notify: NotifySocket) -> None:
    """Series: the daemon's textfile before the edit for 5 minutes, after it from then on (one
    sample a minute, as node_exporter would be scraped); the documented rules through promtool."""
    root = make_root(tmp_path, CONFIG)
    (root / PROM_DIR).mkdir(parents=True)
    prom = root / PROM_DIR / "staticpodd.prom"
    d = start(root, notify)
    try:
        before = samples(wait_until(lambda: prom.exists() and prom.read_text(), what="textfile"))
        with open(root / "etc/kubernetes/manifests/kube-apiserver.yaml", "a") as f:
            f.write("# hand edit\n")
        after = wait_until(
            lambda: (s := samples(prom.read_text())).get("staticpodd_external_changes_total", 0) >= 1 and s,
            what="the edit counted")
    finally:
        d.stop()
    series = []
    for name in sorted(set(before) | set(after)):
        if not name.startswith(("staticpodd_external_changes_total", "staticpodd_strays",
                                "staticpodd_failed_unparks_total")):
            continue
        b, a = before.get(name), after.get(name)
        values = " ".join(["_" if b is None else format(b, "g")] * 5 + ["_" if a is None else format(a, "g")] * 15)
        labels = name if "{" in name else name + "{}"
        series.append(f"      - series: '{labels[:-1]}{',' if labels[-2] != '{' else ''}instance=\"node-1\"}}'\n"
                      f"        values: '{values}'")
    rules = tmp_path / "rules.yaml"
    rules.write_text(readme_rules())
    test = tmp_path / "test.yaml"
    test.write_text(f"""rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{chr(10).join(series)}
    alert_rule_test:
      - eval_time: 4m
        alertname: StaticPodManifestChangedByHand
        exp_alerts: []
      - eval_time: 7m
        alertname: StaticPodManifestChangedByHand
        exp_alerts:
          - exp_labels: {{severity: warning, instance: node-1}}
            exp_annotations:
              summary: "node-1: a static pod manifest was changed outside staticpodctl"
              description: "journalctl -u staticpodd STATICPODD_EVENT=EXTERNAL_CHANGE; staticpodctl history COMPONENT"
      - eval_time: 7m
        alertname: StaticPodStrayFile
        exp_alerts: []
""")
    r = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([promtool(), "test", "rules", str(test)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{test.read_text()}"
    assert before["staticpodd_external_changes_total"] == 0 and after["staticpodd_external_changes_total"] == 1


def test_counters_are_zero_before_anything_was_recorded(tmp_path: Path) -> None:
    from staticpodd.daemon.metrics import COUNTERS, store_counters

    got = store_counters(tmp_path / "var/lib/staticpodd/versions.sqlite3")
    assert got == {"counters": dict.fromkeys(COUNTERS, 0), "last_external_change": None, "last_restore": None}
