#!/usr/bin/env python3
"""Generate ``schemas/pod-1.NN.json``: the core/v1 Pod JSON Schema for each Kubernetes minor.

Never hand-edit the output: run this script. Source of truth: the JSON Schemas that the
``kubernetes-validate`` package ships (generated upstream from the official Kubernetes
OpenAPI v3 definitions, ``-local-strict`` variant: ``additionalProperties: false`` on every
object so unknown fields are visible). For each minor we keep the Pod and only the
definitions it references (transitively), rewrite ``$ref`` to ``#/$defs/<name>``, and drop
``description`` and ``x-kubernetes-*`` annotations the validator does not use.

Usage (dev only; kubernetes-validate is not a runtime dependency):
    .venv/bin/pip install kubernetes-validate
    .venv/bin/python schemas/generate.py [--versions 1.31,1.32,...] [--out schemas/]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
KEEP_X = {"x-kubernetes-int-or-string"}


def _source_dir(version: str) -> Path:
    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).resolve().parent / "kubernetes-json-schema"
    candidates = sorted(base.glob(f"v{version}.*-local-strict"))
    if not candidates:
        raise SystemExit(f"kubernetes-validate ships no schema for Kubernetes {version}")
    return candidates[-1]


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _clean(node: Any, refs: set[str]) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                continue
            if k.startswith("x-kubernetes-") and k not in KEEP_X:
                continue
            if k == "$ref":
                name = _ref_name(v)
                refs.add(name)
                out[k] = f"#/$defs/{name}"
                continue
            out[k] = _clean(v, refs)
        return out
    if isinstance(node, list):
        return [_clean(v, refs) for v in node]
    return node


def build(version: str) -> dict:
    """The trimmed Pod schema for ``version`` (``"1.NN"``) as a JSON-compatible dict."""
    src = _source_dir(version)
    pod = json.loads((src / "pod-v1.json").read_text())
    all_defs = json.loads((src / "_definitions.json").read_text())["$defs"]
    refs: set[str] = set()
    top = _clean({k: v for k, v in pod.items() if k not in ("$schema", "$id")}, refs)
    defs: dict[str, Any] = {}
    todo = sorted(refs)
    while todo:
        name = todo.pop()
        if name in defs:
            continue
        found: set[str] = set()
        defs[name] = _clean(all_defs[name], found)
        todo.extend(sorted(found - defs.keys()))
    import kubernetes_validate.version as kv

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://staticpodd.invalid/schemas/pod-{version}.json",
        "title": f"core/v1 Pod, Kubernetes {version}",
        "x-staticpodd-generated-by": "schemas/generate.py",
        "x-staticpodd-source": f"kubernetes-validate {kv.__version__} {src.name}",
        **top,
        "$defs": dict(sorted(defs.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS))
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)
    for version in args.versions.split(","):
        schema = build(version.strip())
        target = args.out / f"pod-{version.strip()}.json"
        target.write_text(json.dumps(schema, indent=1, sort_keys=False) + "\n")
        print(f"{target}: {len(schema['$defs'])} definitions, {target.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
