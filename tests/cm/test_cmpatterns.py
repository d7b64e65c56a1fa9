"""File-name patterns of config-management leftovers (staticpodd.manifest.cmpatterns), by name only.

The names produced by the real tools are checked in test_ansible.py / test_puppet.py; here the
documented examples and near misses are checked, and the validator is asked to agree.
"""

from __future__ import annotations

import pytest

from staticpodd.manifest.cmpatterns import (
    ANSIBLE_BACKUP,
    ANSIBLE_TMP,
    CHEF_TEMPFILE,
    PATTERNS,
    PUPPET_BACKUP,
    PUPPET_TEMPFILE,
    SALT_TEMPFILE,
    SALT_TMP,
    UNSAFE_PATTERNS,
    identify,
)


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: f"{p.tool}-{p.kind}-{p.example}")
def test_each_documented_example_is_identified_as_its_own_pattern(pattern):
    found = identify(pattern.example)
    assert found is not None and found.pattern is pattern
    assert pattern.kubelet_reads is (not pattern.example.startswith("."))


@pytest.mark.parametrize(
    "name, pattern, target",
    [
        ("kube-apiserver.yaml.16532.2026-11-29@18:35:09~", ANSIBLE_BACKUP, "kube-apiserver.yaml"),
        ("etcd.yaml.2014-02-03@12:00:00~", ANSIBLE_BACKUP, "etcd.yaml"),  # before the PID was added
        ("etcd.yaml.2013-05-01@09:30~", ANSIBLE_BACKUP, "etcd.yaml"),  # before seconds were added
        ("kube-apiserver.yaml20261129-14192-1xi1mkg", PUPPET_TEMPFILE, "kube-apiserver.yaml"),
        ("kube-apiserver.yaml20261129-14192-1xi1mkg-3", PUPPET_TEMPFILE, "kube-apiserver.yaml"),
        ("etcd220261129-1-a", PUPPET_TEMPFILE, "etcd2"),
        ("kube-scheduler.yaml.puppet-bak", PUPPET_BACKUP, "kube-scheduler.yaml"),
        ("kube-scheduler.yamlz_wylkjp", SALT_TEMPFILE, "kube-scheduler.yaml"),
        ("etcd.json0a1b2c3d", SALT_TEMPFILE, "etcd.json"),
        ("__salt.tmp.3qfps4mv", SALT_TMP, None),
        (".ansible_tmpabc123kube-scheduler.yaml", ANSIBLE_TMP, None),
        (".chef-kube-scheduler20261129-1-x.yaml", CHEF_TEMPFILE, None),
    ],
)
def test_identify_names_the_tool_and_the_managed_file(name, pattern, target):
    found = identify(name)
    assert found is not None
    assert found.pattern is pattern
    assert found.target == target
    assert pattern.tool in found.describe()


@pytest.mark.parametrize(
    "name",
    [
        "kube-apiserver.yaml",
        "etcd.json",
        "kube-scheduler.manifest",
        "10-kube-vip.yaml",
        "kube-apiserver.yaml~",  # an editor backup: a stray, but no CM tool's
        "kube-apiserver.yaml.bak",
        "kube-apiserver.yaml.12345.2026-11-29~",  # no @time
        "kube-scheduler.yamlshort",  # 5 chars, not mkstemp's 8
        "kube-scheduler.yamlTOOLONG1",
        "haproxy20261129.yaml",
        ".staticpodd",
    ],
)
def test_ordinary_manifests_and_other_leftovers_are_not_claimed(name):
    assert identify(name) is None


def test_validator_flags_every_unsafe_example_as_a_stray():
    """The validator owns stray detection; every name a CM tool leaves must be one of its strays."""
    directory = pytest.importorskip("staticpodd.validate.directory")
    for pattern in UNSAFE_PATTERNS:
        assert directory.stray_reason(pattern.example), pattern.example
