"""The real-kubelet tier (7): the real kubelet's verdict on every manifest and case of ../shared/corpus,
compared with ``staticpodctl validate`` on the same bytes.

Each corpus file (and each case directory's files) goes alone into the kubelet's directory with
every ``image:`` rewritten to the lab's local app image and ``imagePullPolicy: Always`` made
``IfNotPresent`` (nothing can be pulled; see kubelet_lab.rewrite_image_text). Nothing else is
changed; the node files kubeadm's manifests mount (``/etc/kubernetes/*.conf``) exist inside the
lab's overlay. B20's case is a node's ``manifests/`` beside a ``manifests-stopped/``: its
``manifests/`` is used.

The kubelet's verdict per file: **created** (its pod is in the kubelet's ``/pods`` and not
Failed), **refused** (the kubelet log names the file with an error: ``Could not process manifest
file`` / ``Unable to process watch event`` / ``Can't process config file``), **failed** (admitted
then failed: phase Failed with its reason, e.g. ``UnexpectedAdmissionError``, from the read-only
port's ``/pods``), or **shadowed** (its pod runs from another file that sorts later).
``staticpodctl validate`` agrees when it reports errors for exactly the refused and failed
files. A file the kubelet runs but validate refuses is a disagreement unless every error is one
of our deliberate strictnesses (README "Validation that agrees with the kubelet" lists them;
:data:`DELIBERATE` pins them here). The table is printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_lib import CORPUS, PARSE_ERRORS, REPO, Node, scheduler_bytes
from kubelet_lab import rewrite_image_text


def _deliberate() -> set[str]:
    """The deliberate strictness codes docs/reference/validation.md lists (its table after
    "Deliberate strictness"): validate may refuse, the kubelet runs the file."""
    text = (REPO / "docs/reference/validation.md").read_text()
    part = text.split("Deliberate strictness", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", part, re.M))


def _entries() -> list[Path]:
    if not (CORPUS / "manifests").is_dir():
        pytest.fail(f"corpus not found at {CORPUS} (../shared/corpus, or set STATICPODD_CORPUS)")
    return sorted((CORPUS / "manifests").iterdir()) + sorted((CORPUS / "cases").iterdir())


def _files_of(entry: Path) -> dict[str, bytes]:
    if entry.is_file():
        return {entry.name: entry.read_bytes()}
    src = entry / "manifests" if (entry / "manifests").is_dir() else entry
    return {p.name: p.read_bytes() for p in sorted(src.iterdir()) if p.is_file()}


def _pod_of(data: bytes) -> tuple[str, str] | None:
    try:
        doc = next(iter(yaml.safe_load_all(data)), None)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        return None
    return str(doc["metadata"].get("namespace") or "default"), str(doc["metadata"].get("name") or "")


def _kubelet_verdicts(node: Node, files: dict[str, bytes], offset: int) -> dict[str, str]:
    mdir = node.manifests
    pods_by_file = {n: _pod_of(d) for n, d in files.items()}
    out: dict[str, str] = {}
    pending: dict[str, float] = {}  # file -> when its pod was first seen in /pods, not Failed
    end = time.monotonic() + 30
    while time.monotonic() < end:
        log = node.lab.log_since(offset).splitlines()
        kpods = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in node.lab.kubelet_pods()}
        for name in files:
            if name in out:
                continue
            path = str(mdir / name)
            bad = [ln for ln in log if path + '"' in ln or path + ":" in ln or path + "\\" in ln]
            bad = [ln for ln in bad if any(e in ln for e in PARSE_ERRORS)]
            if bad:
                text = bad[0].split("err=", 1)[-1]
                text = text.rsplit(path, 1)[-1].lstrip(':\\" ').replace(", please check config file", "")
                text = text.replace('\\"', '"').rstrip('" ')[:160]
                out[name] = f"refused: {text}"
                continue
            key = pods_by_file[name]
            if key and (key[0], node.lab.pod_name(key[1])) in kpods:
                p = kpods[(key[0], node.lab.pod_name(key[1]))]
                st = p.get("status") or {}
                sandboxed = any(sb["metadata"]["name"] == node.lab.pod_name(key[1]) and sb["state"] == "SANDBOX_READY"
                                for sb in node.lab.pods())  # a dead one of an earlier entry does not count
                if st.get("phase") == "Failed":
                    out[name] = f"failed: {st.get('reason')}: {(st.get('message') or '')[:120]}"
                elif st.get("phase") == "Running" or sandboxed or (
                    st.get("phase") and time.monotonic() - pending.setdefault(name, time.monotonic()) >= 10
                ):  # Pending alone for 10 s: admitted (no CNI here: a pod-network pod stays Pending, and a
                    # hostPath it cannot mount keeps a pod Pending). A critical pod that does not fit stays
                    # Pending while the kubelet tries preemption, then fails: seen taking over 3 s under
                    # load, when S10 cpu-over-capacity was called "created" after 3 s
                    # which file the pod came from: the lexically last file defining it
                    same = sorted(n for n, k in pods_by_file.items() if k == key and not n.startswith("."))
                    out[name] = "created" if same[-1] == name else f"shadowed by {same[-1]}"
        if len(out) == len(files):
            break
        time.sleep(0.25)
    for name in files:
        out.setdefault(name, "no verdict (ignored?)")
    return out


def _validate(node: Node, mdir: Path) -> dict[str, dict[str, Any]]:
    """``staticpodctl validate DIR --json`` per file: its verdict (kubelet / staticpodd /
    strictness) and its error findings, with the lab's node: name, CPUs, memory and the
    kubelet's own config (evictionHard) for the allocatable-based node fit, judged against the lab
    kubelet's own minor (its schema and rules)."""
    mem_kib = int(next(ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")))
    res = node.ctl(
        "validate", str(mdir), "--json", "--node-name", node.lab.node_name, "--node-cpu", str(os.cpu_count() or 1),
        "--node-memory", f"{mem_kib}Ki", "--no-host-checks", "--kubelet-config", str(node.lab.work / "kubelet-config.yaml"),
        "--kubernetes-version", node.lab.kubelet_minor,
    )
    body = json.loads(res.stdout)
    out: dict[str, dict[str, Any]] = {}
    for v in body.get("verdicts") or []:
        out[Path(str(v["path"])).name] = {**v, "errors": []}
    for f in body.get("findings") or []:
        name = Path(str(f.get("path") or "")).name
        if f.get("severity") == "error" and name in out:
            out[name]["errors"].append((str(f.get("code")), str(f.get("message"))[:100]))
    return out


def _synthetic() -> dict[str, dict[str, bytes]]:
    """The verdict model's hard cases, built from kubeadm's scheduler manifest."""
    doc = yaml.safe_load(scheduler_bytes())
    js = json.dumps(doc, indent=2)
    big = scheduler_bytes() + (b"# padding " + b"x" * 100 + b"\n") * (2 * 1024 * 1024 // 111)
    mem_kib = int(next(ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")))
    def with_requests(cpu: str | None = None, memory: str | None = None) -> bytes:
        d = yaml.safe_load(scheduler_bytes())
        req = d["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})
        if cpu:
            req["cpu"] = cpu
        if memory:
            req["memory"] = memory
        return yaml.safe_dump(d, sort_keys=False).encode()
    return {
        "S01-json-ok": {"kube-scheduler.json": js.encode()},
        "S02-json-trailing-comma": {"kube-scheduler.json": (js.rstrip()[:-1].rstrip() + ",\n}\n").encode()},
        "S03-json-hash-comment": {"kube-scheduler.json": ("{ # a comment\n" + js.lstrip()[1:]).encode()},
        "S04-json-after-a-comment-line": {"kube-scheduler.json": ("# a comment\n" + js.rstrip()[:-1].rstrip() + ",\n}\n").encode()},
        "S05-json-3e1-integer": {"kube-scheduler.json": js.replace('"failureThreshold": 8', '"failureThreshold": 3e1', 1).encode()},
        "S06-yaml-flow-unquoted-keys": {"kube-scheduler.yaml": yaml.safe_dump(doc, default_flow_style=True).encode()},
        "S07-yaml-duplicate-key": {"kube-scheduler.yaml": scheduler_bytes().replace(b"  namespace: kube-system\n", b"  namespace: default\n  namespace: kube-system\n", 1)},
        "S08-multidoc-pod-first": {"kube-scheduler.yaml": scheduler_bytes() + b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
        "S09-2MiB": {"kube-scheduler.yaml": big},
        "S10-cpu-over-capacity": {"kube-scheduler.yaml": with_requests(cpu="30")},
        "S11-memory-under-capacity-over-allocatable": {"kube-scheduler.yaml": with_requests(memory=f"{mem_kib - 50 * 1024}Ki")},
        "S12-leading-document-marker": {"kube-scheduler.yaml": b"---\n" + scheduler_bytes()},
        "S13-empty-first-document": {"kube-scheduler.yaml": b"---\n---\n" + scheduler_bytes()},
    }


_REAL = {"created": "accepts", "shadowed": "accepts", "refused": "refuses", "failed": "fails-admission"}


def test_the_kubelet_and_validate_agree_on_every_corpus_manifest_and_case(node5: Node) -> None:
    node = node5
    deliberate = _deliberate()
    assert {"duplicate-pod", "multiple-documents", "yaml-duplicate-key"} <= deliberate, deliberate
    entries: list[tuple[str, dict[str, bytes]]] = [
        (e.name, {n: rewrite_image_text(d.decode("utf-8", "replace")).encode() if d else d for n, d in _files_of(e).items()})
        for e in _entries()
    ] + sorted(_synthetic().items())
    rows: list[tuple[str, str, str, str, str]] = []
    disagreements: list[str] = []
    for entry, files in entries:
        node.clean()
        offset = node.lab.log_offset()
        for name, data in files.items():
            node.write(name, data)
        kubelet = _kubelet_verdicts(node, files, offset)
        ours = _validate(node, node.manifests)
        for name in files:
            k = kubelet[name]
            real = _REAL.get(k.split(":")[0].split(" ")[0], "unknown")
            v = ours.get(name) or {"kubelet": "unknown", "staticpodd": "unknown", "strictness": [], "errors": []}
            strict = sorted(set(v.get("strictness") or []))
            said = f"kubelet {v['kubelet']}, staticpodd {v['staticpodd']}" + (f" ({', '.join(strict)})" if strict else "")
            if v["kubelet"] != real:
                verdict = f"DISAGREE: validate says the kubelet {v['kubelet']}, it {real}"
            elif v["staticpodd"] == "refuses" and real == "accepts" and not (strict and set(strict) <= deliberate):
                verdict = f"DISAGREE: refused for {strict or v['errors']}, not a listed strictness"
            elif v["staticpodd"] == "refuses" and real == "accepts":
                verdict = "our strictness"
            else:
                verdict = "agree"
            rows.append((entry, name, k, said, verdict))
            if verdict.startswith("DISAGREE"):
                disagreements.append(f"{entry}/{name}: kubelet {k!r}; validate {said}; {v['errors'][:2]}; {verdict}")
    shutil.rmtree(node.manifests / ".staticpodd", ignore_errors=True)
    width = max(len(r[1]) for r in rows)
    print("\n" + "\n".join(f"{r[0][:32]:32} {r[1][:44]:{min(width, 44)}}  real kubelet: {r[2][:75]:75}  validate: {r[3][:60]:60}  {r[4]}" for r in rows))
    assert not disagreements, "\n".join(disagreements)
