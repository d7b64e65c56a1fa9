"""The node_exporter textfile: rendered text parsed back with prometheus_client's own parser,
and the atomic write checked on a real directory with a real concurrent reader."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from staticpodd import __version__
from staticpodd.daemon.metrics import (
    STATES,
    ComponentMetrics,
    MetricsSnapshot,
    format_value,
    render,
    snapshot_from_status,
    write_textfile,
)
from staticpodd.errors import FsError

NOW = 1_764_441_600.0  # 2025-11-29T18:40:00Z
STARTED = NOW - 3600


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """{family name: [(labels, value), ...]} and checks every family has HELP and gauge TYPE."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        assert fam.documentation, f"{fam.name} has no HELP"
        assert fam.type == "gauge", f"{fam.name} is {fam.type}"
        out[fam.name] = [(dict(s.labels), s.value) for s in fam.samples]
    return out


def value(fams, name: str, **labels: str) -> float:
    hits = [v for lab, v in fams[name] if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, f"{name}{labels}: {hits}"
    return hits[0]


class F:
    """Stands in for staticpodd.validate.Finding (same attribute names)."""

    def __init__(self, code: str, severity: str, path: str) -> None:
        self.code, self.severity, self.path = code, severity, path
        self.line = self.column = self.field = None
        self.message = self.hint = ""


STATUS = {
    "components": [
        {
            "component": "kube-apiserver",
            "file_name": "kube-apiserver.yaml",
            "state": "live",
            "version": 4,
            "digest": "0123456789abcdef" * 4,
            "drift": False,
            "parked": None,
        },
        {
            "component": "kube-scheduler",
            "file_name": "kube-scheduler.yaml",
            "state": "parked",
            "version": 2,
            "digest": "fedcba9876543210" * 4,
            "drift": False,
            "parked": {"since": NOW - 600, "until": NOW + 3000, "actor": "alice", "reason": "etcd defrag"},
        },
        {
            "component": "etcd",
            "file_name": "etcd.yaml",
            "state": "live",
            "version": 1,
            "digest": "aa" * 32,
            "drift": True,
            "parked": None,
        },
        {
            "component": "kube-vip",
            "file_name": "kube-vip.yaml",
            "state": "parked",
            "version": None,
            "digest": None,
            "drift": False,
            "parked": {"since": NOW - 60, "until": None, "actor": "bob", "reason": ""},
        },
        {
            "component": "kube-controller-manager",
            "file_name": "kube-controller-manager.yaml",
            "state": "missing",
            "version": 3,
            "digest": "bb" * 32,
            "drift": False,
            "parked": None,
        },
    ]
}

FINDINGS = [
    F("yaml-syntax", "error", "/etc/kubernetes/manifests/etcd.yaml"),
    F("no-ephemeral-containers", "error", "/etc/kubernetes/manifests/etcd.yaml"),
    F("unknown-field", "warning", "/etc/kubernetes/manifests/kube-apiserver.yaml"),
    F("stray-backup", "error", "/etc/kubernetes/manifests/kube-apiserver.yaml.bak"),
    F("stray", "warning", "/etc/kubernetes/manifests/4913"),
    F("duplicate-pod", "error", "/etc/kubernetes/manifests/kube-apiserver.yaml"),
]


def test_rendered_status_parses_back_to_the_numbers():
    snap = snapshot_from_status(STATUS, FINDINGS, started_at=STARTED, now=NOW)
    fams = parse(render(snap))

    assert value(fams, "staticpodd_build_info", version=__version__) == 1
    assert value(fams, "staticpodd_start_time_seconds") == STARTED
    assert value(fams, "staticpodd_components", state="live") == 2
    assert value(fams, "staticpodd_components", state="parked") == 2
    assert value(fams, "staticpodd_components", state="missing") == 1

    assert value(fams, "staticpodd_component_state", component="kube-scheduler", state="parked") == 1
    assert value(fams, "staticpodd_component_state", component="kube-scheduler", state="live") == 0
    assert value(fams, "staticpodd_component_state", component="kube-apiserver", state="live") == 1
    assert value(fams, "staticpodd_component_state", component="kube-controller-manager", state="missing") == 1
    assert len(fams["staticpodd_component_state"]) == 5 * len(STATES)
    assert value(fams, "staticpodd_component_state", component="etcd", state="live", file_name="etcd.yaml") == 1

    assert value(fams, "staticpodd_component_version", component="kube-apiserver") == 4
    assert value(fams, "staticpodd_component_version", component="kube-scheduler") == 2
    assert not [lab for lab, _ in fams["staticpodd_component_version"] if lab["component"] == "kube-vip"]
    assert value(fams, "staticpodd_component_info", component="kube-apiserver", digest="0123456789ab") == 1
    assert value(fams, "staticpodd_component_drift", component="etcd") == 1
    assert value(fams, "staticpodd_component_drift", component="kube-apiserver") == 0

    assert value(fams, "staticpodd_component_parked_since_timestamp_seconds", component="kube-scheduler") == NOW - 600
    assert value(fams, "staticpodd_component_park_age_seconds", component="kube-scheduler") == 600
    assert value(fams, "staticpodd_component_park_age_seconds", component="kube-vip") == 60
    assert value(fams, "staticpodd_component_park_deadline_timestamp_seconds", component="kube-scheduler") == NOW + 3000
    # parked without a deadline: no deadline sample (an alert on "past deadline" must not fire)
    assert [lab["component"] for lab, _ in fams["staticpodd_component_park_deadline_timestamp_seconds"]] == [
        "kube-scheduler"
    ]

    assert value(fams, "staticpodd_component_last_validation_failure_timestamp_seconds", component="etcd") == NOW
    assert [lab["component"] for lab, _ in fams["staticpodd_component_last_validation_failure_timestamp_seconds"]] == [
        "etcd"
    ]
    assert value(fams, "staticpodd_component_validation_errors", component="etcd") == 2
    assert value(fams, "staticpodd_component_validation_errors", component="kube-apiserver") == 0  # warning only

    assert value(fams, "staticpodd_strays") == 2
    assert value(fams, "staticpodd_duplicates") == 1
    assert value(fams, "staticpodd_findings", severity="error") == 4
    assert value(fams, "staticpodd_findings", severity="warning") == 2


def test_every_family_is_named_staticpodd_and_output_is_stable():
    snap = snapshot_from_status(STATUS, FINDINGS, started_at=STARTED, now=NOW)
    text = render(snap)
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert render(snap) == text
    names = [f.name for f in text_string_to_metric_families(text)]
    assert names and all(n.startswith("staticpodd_") for n in names)
    shuffled = {"components": list(reversed(STATUS["components"]))}
    assert render(snapshot_from_status(shuffled, list(reversed(FINDINGS)), started_at=STARTED, now=NOW)) == text


def test_last_validation_failure_carries_over_while_the_component_is_clean():
    first = snapshot_from_status(STATUS, FINDINGS, started_at=STARTED, now=NOW)
    later = snapshot_from_status(STATUS, [], started_at=STARTED, now=NOW + 120, previous=first)
    fams = parse(render(later))
    assert value(fams, "staticpodd_component_last_validation_failure_timestamp_seconds", component="etcd") == NOW
    assert value(fams, "staticpodd_component_validation_errors", component="etcd") == 0
    assert value(fams, "staticpodd_strays") == 0
    again = snapshot_from_status(STATUS, FINDINGS[:1], started_at=STARTED, now=NOW + 240, previous=later)
    assert (
        value(parse(render(again)), "staticpodd_component_last_validation_failure_timestamp_seconds", component="etcd")
        == NOW + 240
    )


def test_findings_as_dicts_are_accepted_too():
    as_dicts = [{"code": f.code, "severity": f.severity, "path": f.path} for f in FINDINGS]
    a = render(snapshot_from_status(STATUS, as_dicts, started_at=STARTED, now=NOW))
    b = render(snapshot_from_status(STATUS, FINDINGS, started_at=STARTED, now=NOW))
    assert a == b


@pytest.mark.parametrize(
    "name",
    ['we"ird', "back\\slash", "new\nline", 'all\\"of\nthem"\\', "ünïcödé", "trailing\\"],
)
def test_label_values_are_escaped_so_the_parser_gets_them_back(name):
    snap = MetricsSnapshot(
        now=NOW,
        started_at=STARTED,
        build_version='1.0"\\\n',
        components=(
            ComponentMetrics(component=name, file_name=name + ".yaml", state="live", version=1, digest="cc" * 32),
        ),
    )
    fams = parse(render(snap))
    assert value(fams, "staticpodd_component_version", component=name) == 1
    assert value(fams, "staticpodd_component_state", component=name, file_name=name + ".yaml", state="live") == 1
    assert value(fams, "staticpodd_build_info", version='1.0"\\\n') == 1


def test_undecodable_file_names_still_render_valid_utf8():
    raw = os.fsdecode(b"kube-\xff.yaml")  # a byte that is not UTF-8, as os.listdir returns it
    snap = MetricsSnapshot(
        now=NOW, started_at=STARTED, components=(ComponentMetrics(component=raw, file_name=raw, state="live"),)
    )
    text = render(snap)
    text.encode("utf-8")  # would raise on a lone surrogate
    fams = parse(text)
    assert value(fams, "staticpodd_component_state", file_name="kube-\\xff.yaml", state="live") == 1


@pytest.mark.parametrize(
    "v, s",
    [
        (1, "1"),
        (0, "0"),
        (1764441600.0, "1764441600"),
        (0.25, "0.25"),
        (float("nan"), "NaN"),
        (float("inf"), "+Inf"),
        (-float("inf"), "-Inf"),
        (1764441600.123, "1764441600.123"),
    ],
)
def test_format_value(v, s):
    assert format_value(v) == s


def test_empty_node_renders_the_daemon_families_only():
    fams = parse(render(MetricsSnapshot(now=NOW, started_at=STARTED)))
    assert value(fams, "staticpodd_strays") == 0
    assert value(fams, "staticpodd_components", state="parked") == 0
    assert "staticpodd_component_state" not in fams


# ---- atomic write ------------------------------------------------------------------------------


def test_write_textfile_leaves_only_the_prom_file(tmp_path: Path):
    text = render(snapshot_from_status(STATUS, FINDINGS, started_at=STARTED, now=NOW))
    path = write_textfile(tmp_path, text)
    assert path == tmp_path / "staticpodd.prom"
    assert path.read_text() == text
    assert os.listdir(tmp_path) == ["staticpodd.prom"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    write_textfile(tmp_path, "# second\n")
    assert os.listdir(tmp_path) == ["staticpodd.prom"]
    assert path.read_text() == "# second\n"


def test_temp_file_is_a_dot_name_node_exporter_ignores(tmp_path: Path, monkeypatch):
    """Spies on os.replace to see the temp name (the rename itself is real)."""
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((Path(src), Path(dst)))
        assert Path(src).exists() and Path(src).read_text() == "x 1\n"
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_textfile(tmp_path, "x 1\n")
    ((src, dst),) = seen
    assert src.parent == tmp_path == dst.parent
    assert src.name.startswith(".staticpodd.prom.") and not src.name.endswith(".prom")


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path, monkeypatch):
    """A disk error cannot be produced on demand here, so fsync is made to fail with EIO."""
    old = write_textfile(tmp_path, "staticpodd_strays 0\n")

    def broken_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(FsError) as info:
        write_textfile(tmp_path, "staticpodd_strays 5\n")
    assert info.value.path == str(tmp_path / "staticpodd.prom")
    assert "Input/output error" in info.value.message
    assert os.listdir(tmp_path) == ["staticpodd.prom"]
    assert old.read_text() == "staticpodd_strays 0\n"


def test_missing_directory_is_an_fs_error_naming_it(tmp_path: Path):
    with pytest.raises(FsError) as info:
        write_textfile(tmp_path / "nope", "x 1\n")
    assert info.value.path == str(tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("name", ["staticpodd.txt", ".staticpodd.prom", "a/b.prom"])
def test_textfile_name_must_be_a_plain_prom_name(tmp_path: Path, name):
    with pytest.raises(ValueError):
        write_textfile(tmp_path, "x 1\n", name=name)


def test_concurrent_reader_never_sees_a_partial_file(tmp_path: Path):
    """A real reader thread polls the file while the writer alternates two large versions."""
    big_a = render(snapshot_from_status(STATUS, FINDINGS, started_at=STARTED, now=NOW)) * 200
    big_b = render(snapshot_from_status(STATUS, [], started_at=STARTED, now=NOW + 1)) * 300
    target = write_textfile(tmp_path, big_a)
    stop = threading.Event()
    bad: list[int] = []
    reads = [0]

    def reader():
        while not stop.is_set():
            data = target.read_text()
            reads[0] += 1
            if data not in (big_a, big_b):
                bad.append(len(data))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(150):
            write_textfile(tmp_path, big_b if i % 2 == 0 else big_a)
    finally:
        stop.set()
        t.join()
    assert reads[0] > 0
    assert bad == []
    assert sorted(os.listdir(tmp_path)) == ["staticpodd.prom"]
