"""The configuration file: defaults, schema errors that name the key, YAML errors with a line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from staticpodd.config import Config, NodeCapacity, load_config, load_schema, parse_quantity
from staticpodd.errors import EXIT_CONFIG, ConfigError
from staticpodd.layout import Layout

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "schemas" / "staticpodd.example.yaml"


def write(tmp_path: Path, text: str, name: str = "staticpodd.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_missing_default_file_means_all_defaults(tmp_path):
    cfg = load_config(Layout.build(tmp_path))
    assert cfg == Config.default()
    assert cfg.source is None
    assert (cfg.rescan_interval, cfg.debounce, cfg.lock_timeout) == (20, 0.3, 30)
    assert (cfg.on_invalid, cfg.on_stray) == ("alert", "alert")
    assert cfg.max_manifest_bytes == 1024 * 1024
    assert cfg.wait.timeout == 300 and cfg.wait.rollback_on_failure is False
    assert cfg.hooks.timeout == 30
    assert cfg.manifest_dir is None and cfg.node_name is None and cfg.node_capacity is None


def test_the_layout_reads_root_etc_staticpodd(tmp_path):
    layout = Layout.build(tmp_path)
    layout.config_path.parent.mkdir(parents=True)
    layout.config_path.write_text("on_invalid: restore\nwait:\n  timeout: 60\n")
    cfg = load_config(layout)
    assert cfg.on_invalid == "restore"
    assert cfg.wait.timeout == 60 and cfg.wait.crictl == "crictl"
    assert cfg.source == str(layout.config_path)
    assert len(cfg.digest or "") == 64


def test_path_keyword_overrides_the_layout(tmp_path):
    other = write(tmp_path, "on_stray: quarantine\n", "other.yaml")
    cfg = load_config(Layout.build(tmp_path), path=other)
    assert cfg.on_stray == "quarantine"


def test_an_explicit_file_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "nope.yaml")
    assert "not found" in e.value.message
    assert e.value.exit_status == EXIT_CONFIG == 78


def test_an_empty_file_means_defaults(tmp_path):
    assert load_config(write(tmp_path, "# nothing\n")) == Config.default()


def test_a_value_below_its_minimum_names_the_key_and_line(tmp_path):
    p = write(tmp_path, "debounce: 0.5\nrescan_interval: -1\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    err = e.value
    assert err.message.startswith("rescan_interval: -1 is less than the minimum of 1")
    assert (err.path, err.line, err.field) == (str(p), 2, "rescan_interval")
    assert str(err).startswith(f"{p}:2:")


def test_a_nested_wrong_type_names_the_dotted_key(tmp_path):
    p = write(tmp_path, "wait:\n  timeout: soon\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.field == "wait.timeout"
    assert e.value.message.startswith("wait.timeout: 'soon' is not of type 'number'")
    assert e.value.line == 2


def test_an_unknown_key_is_refused_with_its_name(tmp_path):
    p = write(tmp_path, "hooks:\n  timeout: 5\n  tiemout: 6\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.field == "hooks.tiemout"
    assert "unknown key" in e.value.message and e.value.line == 3


def test_a_policy_outside_its_choices_is_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "on_invalid: fix\n"))
    assert e.value.field == "on_invalid" and "'alert', 'restore'" in e.value.message


def test_a_boolean_is_not_a_number(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "debounce: yes\n"))
    assert e.value.field == "debounce"


def test_broken_yaml_names_file_line_and_column(tmp_path):
    p = write(tmp_path, "debounce: 0.3\nwait:\n\ttimeout: 5\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.path == str(p) and e.value.line == 3
    assert "YAML syntax error" in e.value.message


def test_a_duplicate_key_is_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "debounce: 1\ndebounce: 2\n"))
    assert e.value.line == 2 and "duplicate key 'debounce'" in e.value.message


def test_a_top_level_list_is_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "- a\n- b\n"))
    assert "mapping" in e.value.message


def test_node_capacity_quantities(tmp_path):
    cfg = load_config(write(tmp_path, "node_capacity:\n  cpu: 3500m\n  memory: 16Gi\n"))
    assert cfg.node_capacity == NodeCapacity(cpu="3500m", memory="16Gi")
    assert cfg.node_capacity.cpu_millis == 3500
    assert cfg.node_capacity.memory_bytes == 16 * 2**30
    assert parse_quantity(4) == 4 and parse_quantity("1e3") == 1000
    with pytest.raises(ConfigError):
        load_config(write(tmp_path, "node_capacity:\n  memory: 16gb\n"))


def test_schema_defaults_match_the_code():
    """The JSON Schema documents the same defaults as Config (one source of truth each, kept equal)."""
    schema = load_schema()
    defaults = Config.default().to_dict()
    for key, prop in schema["properties"].items():
        assert key in defaults, key
        assert prop.get("default") == defaults[key], key
        for sub, subprop in prop.get("properties", {}).items():
            if "default" in subprop:
                assert subprop["default"] == defaults[key][sub], f"{key}.{sub}"
    assert set(schema["properties"]) == set(defaults)


def test_the_example_file_documents_every_key_with_its_default(tmp_path):
    """Uncommenting every setting in the shipped example gives exactly the defaults."""
    lines = []
    for line in EXAMPLE.read_text().splitlines():
        m = re.match(r"^#(\s*[a-z_]+:.*)$", line)
        if m and not m.group(1).startswith(" ") or (m and m.group(1).startswith("  ")):
            lines.append(m.group(1))
    text = "\n".join(lines) + "\n"
    data = load_config(write(tmp_path, text)).to_dict()
    expected = Config.default().to_dict()
    expected["node_capacity"] = {"cpu": "4", "memory": "16Gi"}  # the example shows a sample value
    assert data == expected
    schema = load_schema()
    for key in schema["properties"]:
        assert re.search(rf"^#{key}:", EXAMPLE.read_text(), re.M), f"{key} missing from the example"
    assert load_config(EXAMPLE) == Config.default()  # as shipped: all commented out


def test_importing_config_does_not_import_jsonschema_or_yaml():
    code = (
        "import sys, staticpodd.config; "
        "print(json.dumps(sorted(m for m in ('jsonschema', 'yaml', 'watchdog') if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_check_config_exits_0_or_78_naming_the_key(tmp_path):
    root = tmp_path / "root"
    cmd = [sys.executable, "-m", "staticpodd.daemon", "--root", str(root), "--check-config"]
    ok = subprocess.run(cmd, capture_output=True, text=True)
    assert ok.returncode == 0 and "absent: all defaults" in ok.stdout
    (root / "etc/staticpodd").mkdir(parents=True)
    (root / "etc/staticpodd/staticpodd.yaml").write_text("on_stray: delete\n")
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode == 78
    assert "staticpodd.yaml:1:11: on_stray: 'delete' is not one of ['alert', 'quarantine']" in bad.stderr


def test_a_config_that_sets_nothing_loads_without_the_schema_library(tmp_path):
    """Daemon memory: the packaged staticpodd.yaml is all comments; a missing file or one
    that sets nothing means all defaults, with no jsonschema in the process (about 4 MB)."""
    comments = tmp_path / "comments.yaml"
    comments.write_text("# rescan_interval: 20\n# on_invalid: alert\n")
    code = ("import sys\nfrom staticpodd.config import load_config\nfrom staticpodd.layout import Layout\n"
            f"load_config({str(comments)!r})\n"
            f"load_config(Layout.build({str(tmp_path)!r}))  # no file at all\n"
            "print('jsonschema' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
    # a file that sets something is still checked against the schema
    bad = tmp_path / "bad.yaml"
    bad.write_text("rescan_interval: -1\n")
    with pytest.raises(ConfigError, match="rescan_interval"):
        load_config(bad)


@pytest.mark.parametrize("text, line, field", [
    ("debounce: 0.5\nrescan_interval: .nan\n", 2, "rescan_interval"),
    ("retention:\n  keep_versions: 3\n  keep_for: .inf\n", 3, "retention.keep_for"),
    ("wait:\n  settle: .nan\n", 2, "wait.settle"),
])
def test_a_number_that_is_not_finite_is_refused_naming_the_key_and_line(tmp_path, text, line, field):
    # .nan passes every minimum and maximum of the schema (each comparison with NaN is false): a
    # rescan_interval of .nan had the daemon spin at 80 % CPU (a newcomer's finding)
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert (e.value.line, e.value.field) == (line, field)
    assert "not finite" in e.value.message


def test_retention_keep_for_0_is_refused_as_the_cli_refuses_it(tmp_path):
    # keep_for: 0 kept nothing for its age: the daemon's first prune deleted every version but the
    # protected ones (a newcomer's finding; "0 = forever" is what many tools mean by it)
    p = write(tmp_path, "retention:\n  keep_for: 0\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert (e.value.line, e.value.field) == (2, "retention.keep_for")
    assert load_config(write(tmp_path, "retention:\n  keep_for: 60\n")).retention.keep_for == 60
