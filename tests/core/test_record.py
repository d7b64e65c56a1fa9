"""staticpodd.record: the value objects that replaced @dataclass keep what the dataclasses
gave their users: == and hash over the fields (minus ``_not_compared``), a readable repr, and
``replace`` through ``__init__`` (so a Finding's kubelet level is filled in again)."""

from __future__ import annotations

import pytest

from staticpodd.config import Config, HooksConfig
from staticpodd.engine.model import Result
from staticpodd.manifest.decoded import Manifest
from staticpodd.store.versions import Version
from staticpodd.validate.findings import Finding


def _version(seq: int = 1) -> Version:
    return Version("web", seq, "web.yaml", "ab" * 32, 10, 0o600, 0, 0, "apply", "root", None, None, "live", 1.0)


def test_frozen_records_are_equal_and_hash_alike_by_their_fields() -> None:
    assert _version() == _version() and hash(_version()) == hash(_version())
    assert _version(1) != _version(2)
    assert len({_version(), _version(), _version(2)}) == 2
    assert _version() != ("web", 1)  # a record never equals a plain tuple of its values


def test_mutable_records_compare_but_do_not_hash() -> None:
    a = Result("apply", "web", "web.yaml", True, "ok")
    b = Result("apply", "web", "web.yaml", True, "ok")
    assert a == b and a.warnings == [] and a.warnings is not b.warnings  # a fresh list each, not shared
    with pytest.raises(TypeError):
        hash(a)


def test_not_compared_fields_are_left_out_of_equality() -> None:
    assert Config(source="/a.yaml", digest="1") == Config(source="/b.yaml", digest="2")
    assert Config(debounce=1.0) != Config()
    m1 = Manifest({"kind": "Pod"}, "web", "default", "d", positions={"kind": (1, 1)})
    assert m1 == Manifest({"kind": "Pod"}, "web", "default", "d", positions={})


def test_replace_builds_through_init_and_refuses_unknown_fields() -> None:
    f = Finding("tab-indent", "error", "x.yaml", 3, 1, None, "a tab")
    assert f.kubelet == "refuses"  # filled in by __post_init__
    g = f.replace(line=9, kubelet=None)
    assert (g.line, g.kubelet, g.code) == (9, "refuses", "tab-indent")
    with pytest.raises(TypeError, match="no field colour"):
        f.replace(colour="red")


def test_repr_names_every_field_and_config_to_dict_is_nested_plain_data() -> None:
    assert repr(HooksConfig(timeout=5)) == "HooksConfig(timeout=5)"
    d = Config().to_dict()
    assert d["hooks"] == {"timeout": 30} and "source" not in d and d["max_manifest_bytes"] == 1024 * 1024
