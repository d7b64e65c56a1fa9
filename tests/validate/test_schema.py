"""Layer 3: the generated Pod schemas, and our checker agreeing with the jsonschema library on them."""

from __future__ import annotations

import copy
import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from staticpodd.manifest.decoding import decode
from staticpodd.validate import SUPPORTED_VERSIONS, validate_bytes
from staticpodd.validate.schema import available_versions, load_schema, schema_dir
from tests.validate.conftest import NODE

REPO = Path(__file__).resolve().parents[2]
SCHEMA_CODES = {"schema-type", "schema-required", "schema-enum", "schema-unknown-field"}


def _refs(node) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if "$ref" in n:
                out.add(n["$ref"].rsplit("/", 1)[-1])
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return out


def test_at_least_four_minors_are_shipped_and_supported():
    assert len(SUPPORTED_VERSIONS) >= 4
    assert available_versions() == list(SUPPORTED_VERSIONS)


def test_schemas_are_trimmed_to_the_pod_and_generated():
    for v in SUPPORTED_VERSIONS:
        s = json.loads((schema_dir() / f"pod-{v}.json").read_text())
        assert s["x-staticpodd-generated-by"] == "schemas/generate.py"
        assert "io.k8s.api.core.v1.PodSpec" in s["$defs"]
        assert "io.k8s.api.apps.v1.DeploymentSpec" not in s["$defs"]
        refs = _refs(s)
        assert refs == set(s["$defs"]), "every definition is referenced and every reference resolves"


@pytest.mark.skipif(
    importlib.util.find_spec("kubernetes_validate") is None,
    reason="kubernetes-validate (dev-only) is not installed: cannot regenerate the schemas",
)
def test_committed_schemas_match_the_generator(tmp_path):
    subprocess.run(
        [
            sys.executable,
            str(REPO / "schemas" / "generate.py"),
            "--out",
            str(tmp_path),
            "--versions",
            ",".join(SUPPORTED_VERSIONS),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    for v in SUPPORTED_VERSIONS:
        assert (tmp_path / f"pod-{v}.json").read_bytes() == (schema_dir() / f"pod-{v}.json").read_bytes(), v


def test_schemas_load_once_per_process():
    load_schema.cache_clear()
    for _ in range(3):
        validate_bytes(
            b"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: 'i:1'}]}", "x", NODE
        )
    assert load_schema.cache_info().misses == 1


def test_fast_imports_do_not_pull_in_jsonschema_or_watchdog():
    code = (
        "import sys, staticpodd.manifest.decoding, staticpodd.validate, staticpodd.validate.cli as c\n"
        "from staticpodd.validate import validate_bytes, VALIDATOR_ID\n"
        "validate_bytes(b'apiVersion: v1\\nkind: Pod\\nmetadata: {name: a}\\n"
        "spec: {containers: [{name: c, image: i}]}', 'x')\n"
        "bad = [m for m in ('jsonschema', 'watchdog') if m in sys.modules]\n"
        "assert not bad, bad\nprint(VALIDATOR_ID)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("staticpodd-validate/")


# ------------------------------------------------------------------ agreement with jsonschema

_VALUES = ["x", 1, 1.5, True, None, [], {}, ["x"], {"k": "v"}]


def _leaves(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, (*path, i))
    else:
        yield path, node


def _set(doc, path, value):
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value


def _mutants(doc, rnd: random.Random, n: int):
    paths = [p for p, _ in _leaves(doc) if p and p[0] in ("spec", "metadata")]
    for _ in range(n):
        d = copy.deepcopy(doc)
        path = rnd.choice(paths)
        if rnd.random() < 0.2:
            parent = d
            for p in path[:-1]:
                parent = parent[p]
            if isinstance(parent, dict):
                parent["unknownField" + str(rnd.randint(0, 9))] = 1
        else:
            _set(d, path, rnd.choice(_VALUES))
        yield d


def _null_list_item(node) -> bool:
    """Whether a list anywhere in ``node`` holds a null: encoding/json decodes a null element of a
    slice of structs as the zero struct (its required fields missing), which jsonschema cannot
    know; tests/validate/test_rules.py holds that case to the kubelet's reading."""
    if isinstance(node, dict):
        return any(_null_list_item(v) for v in node.values())
    if isinstance(node, list):
        return any(v is None or _null_list_item(v) for v in node)
    return False


@pytest.mark.parametrize("version", ["1.31", "1.37"])
def test_checker_agrees_with_jsonschema_on_corpus_mutants(corpus, version):
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema(version)
    validator = jsonschema.Draft202012Validator(schema)
    rnd = random.Random(4)
    opts_version = NODE.__class__(**{**NODE.__dict__, "kubernetes_version": version})
    checked = 0
    problems = []
    for path in sorted((corpus / "manifests").iterdir()):
        doc = decode(path.read_bytes()).doc
        for m in [doc, *_mutants(doc, rnd, 25)]:
            if not (isinstance(m.get("metadata"), dict) and m["metadata"].get("name") and m.get("kind") == "Pod"):
                continue
            if _null_list_item(m):
                continue
            # null matches both branches of IntOrString/Quantity's oneOf, which jsonschema calls
            # invalid; the kubelet decodes null as the zero value, so that is not a disagreement.
            theirs = all(e.validator == "oneOf" and e.instance is None for e in validator.iter_errors(m))
            data = json.dumps(m).encode()
            found = validate_bytes(data, "m.json", NODE.__class__(**{**opts_version.__dict__, "strict": True}))
            ours = not any(f.code in SCHEMA_CODES for f in found)
            checked += 1
            if ours != theirs:
                problems.append(
                    (
                        path.name,
                        [f.format() for f in found if f.code in SCHEMA_CODES],
                        [e.message for e in validator.iter_errors(m)][:3],
                    )
                )
    assert checked > 300
    assert not problems, problems[:5]


def test_validator_id_changes_when_the_schemas_change(tmp_path):
    for v in SUPPORTED_VERSIONS:
        (tmp_path / f"pod-{v}.json").write_bytes((schema_dir() / f"pod-{v}.json").read_bytes())
    code = "from staticpodd.validate import VALIDATOR_ID; print(VALIDATOR_ID)"

    def vid() -> str:
        env = dict(__import__("os").environ, STATICPODD_SCHEMAS=str(tmp_path))
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=60
        ).stdout.strip()

    before = vid()
    assert before == vid(), "stable for the same rules and schemas"
    p = tmp_path / f"pod-{SUPPORTED_VERSIONS[-1]}.json"
    p.write_text(p.read_text().replace('"title": "core/v1 Pod', '"title": "core/v1  Pod'))
    assert vid() != before
