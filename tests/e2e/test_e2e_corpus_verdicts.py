"""Proof 7 of issue 10: the real kubelet's verdict on every manifest and case of ../shared/corpus,
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
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_lib import CORPUS, PARSE_ERRORS, Node
from kubelet_lab import rewrite_image_text

#: Finding codes that are staticpodd's own strictness, not the kubelet's: validate refuses, the
#: kubelet runs the file. Each is listed in README "Validation that agrees with the kubelet".
DELIBERATE = {
    "duplicate-pod",  # two files define one pod: the kubelet runs the lexically last, we refuse to guess
    "stray-file",  # a .bak/.tmp copy the kubelet runs anyway
    "duplicate-key",  # the kubelet takes the last value; we refuse the ambiguity
    "multiple-documents",  # the kubelet runs the first document; we refuse the rest being ignored
    "host-port-conflict",  # two pods on one host port: the kubelet admits both, one crash-loops
}


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
    end = time.monotonic() + 12
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
                if st.get("phase") == "Failed":
                    out[name] = f"failed: {st.get('reason')}: {(st.get('message') or '')[:120]}"
                elif st.get("phase"):
                    # which file the pod came from: the lexically last file defining it
                    same = sorted(n for n, k in pods_by_file.items() if k == key and not n.startswith("."))
                    out[name] = "created" if same[-1] == name else f"shadowed by {same[-1]}"
        if len(out) == len(files):
            break
        time.sleep(0.25)
    for name in files:
        out.setdefault(name, "no verdict (ignored?)")
    return out


def _validate(node: Node, mdir: Path) -> dict[str, list[tuple[str, str]]]:
    mem_kib = int(next(ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")))
    res = node.ctl(
        "validate", str(mdir), "--json", "--node-name", node.lab.node_name, "--node-cpu", str(os.cpu_count() or 1),
        "--node-memory", f"{mem_kib}Ki", "--no-host-checks",
    )
    body = json.loads(res.stdout)
    out: dict[str, list[tuple[str, str]]] = {}
    for f in body.get("findings") or []:
        if f.get("severity") != "error":
            continue
        name = Path(str(f.get("path") or "")).name
        out.setdefault(name, []).append((str(f.get("code")), str(f.get("message"))[:100]))
    return out


def test_the_kubelet_and_validate_agree_on_every_corpus_manifest_and_case(node5: Node) -> None:
    node = node5
    rows: list[tuple[str, str, str, str, str]] = []
    disagreements: list[str] = []
    for entry in _entries():
        node.clean()
        files = {n: rewrite_image_text(d.decode("utf-8", "replace")).encode() if d else d for n, d in _files_of(entry).items()}
        offset = node.lab.log_offset()
        for name, data in files.items():
            node.write(name, data)
        kubelet = _kubelet_verdicts(node, files, offset)
        ours = _validate(node, node.manifests)
        for name in files:
            k = kubelet[name]
            errs = ours.get(name, [])
            codes = sorted({c for c, _ in errs})
            v = "ok" if not errs else "error: " + ", ".join(codes)
            kubelet_says_bad = k.startswith(("refused", "failed"))
            if kubelet_says_bad and not errs:
                verdict = "DISAGREE (validate passes what the kubelet refuses)"
            elif not kubelet_says_bad and errs and not set(codes) <= DELIBERATE:
                verdict = "DISAGREE (validate refuses what the kubelet runs)"
            elif not kubelet_says_bad and errs:
                verdict = "our strictness"
            else:
                verdict = "agree"
            rows.append((entry.name, name, k, v, verdict))
            if verdict.startswith("DISAGREE"):
                disagreements.append(f"{entry.name}/{name}: kubelet {k!r}; validate {v!r}; {errs[:2]}")
    shutil.rmtree(node.manifests / ".staticpodd", ignore_errors=True)
    width = max(len(r[1]) for r in rows)
    print("\n" + "\n".join(f"{r[0][:28]:28} {r[1]:{width}}  kubelet: {r[2][:70]:70}  validate: {r[3][:50]:50}  {r[4]}" for r in rows))
    assert not disagreements, "\n".join(disagreements)


def _unused(_: Any) -> None:  # keep Any imported for the type of JSON bodies
    return None
