"""Differential test: our reading vs the kubelet's own decode step, on every supported minor.

A small Go program (tests/validate/y2j/main.go) is built in the test set-up, once per kubelet
version in KUBELET_VERSIONS (the oldest and newest supported minors), against the very modules
that kubelet version pins: its k8s.io/kubernetes go.mod gives the staging modules' v0.x.y
(k8s.io/api, k8s.io/apimachinery) and every other module's version (sigs.k8s.io/yaml,
go.yaml.in/yaml/v2, ...); Go module proxy, cached with tests/e2e/build-binaries' modules. For each
input it runs what pkg/kubelet/config/common.go tryDecodeSinglePod runs: util/yaml.ToJSON (strict
JSON when the first non-space byte is '{', else YAMLToJSON) and the JSON serializer into a v1 Pod.
We compare the verdict and the decoded document. Where they disagree we follow the kubelet;
staticpodd's own strictness (a duplicate key, a second document: the kubelet accepts them) shows
as a *note* on a document that must still equal the kubelet's (the last value wins, the first
document). A difference between minors shows as a test that fails for one version only
(tests/e2e/KUBELET-DIFFERENCES.md lists what was seen).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from staticpodd.manifest.decoded import DecodeProblem
from staticpodd.manifest.decoding import decode, json_prefixed

HERE = Path(__file__).resolve().parent
# Go modules and build cache shared with tests/e2e/build-binaries (kept outside the clone)
CACHE = Path(os.environ.get("STATICPODD_E2E_CACHE", "/var/cache/staticpodd-e2e"))


#: the kubelet versions whose decode step the differential runs: the oldest and newest supported
#: minors (STATICPODD_Y2J_KUBE_VERSIONS, space-separated, to choose others)
KUBELET_VERSIONS = os.environ.get("STATICPODD_Y2J_KUBE_VERSIONS", "v1.35.4 v1.37.2").split()


def _go_env() -> dict[str, str]:
    env = dict(
        os.environ,
        GOMODCACHE=str(CACHE / "gomod"),
        GOCACHE=str(CACHE / "gobuild"),
        GOFLAGS="-modcacherw -buildvcs=false -mod=mod",
        CGO_ENABLED="0",
        GOTOOLCHAIN="local",
    )
    env.setdefault("GOPROXY", "https://proxy.golang.org,direct")
    return env


def y2j_module(kube: str, env: dict[str, str]) -> str:
    """The go.mod of y2j for kubelet ``kube`` ("v1.37.2"): the module requires what that
    k8s.io/kubernetes go.mod requires (its own versions of sigs.k8s.io/yaml, go.yaml.in/yaml/v2, ...)
    and its staging modules at v0.x.y; ``go mod tidy`` keeps only what y2j imports, at those versions.
    Raises AssertionError when the Go module proxy cannot serve it."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{kube}"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"go mod download k8s.io/kubernetes@{kube} failed:\n{proc.stderr}"
    kmod = Path(json.loads(proc.stdout)["GoMod"]).read_text()
    go_line = next(line for line in kmod.splitlines() if line.startswith("go "))
    staging = "v0." + kube.removeprefix("v1.")
    requires: list[str] = []
    block = False
    for line in kmod.splitlines():
        t = line.strip()
        if t.startswith("require ("):
            block = True
        elif block and t == ")":
            block = False
        elif block and t and not t.startswith("//"):
            name, version = t.split()[:2]
            requires.append(f"\t{name} {staging if version == 'v0.0.0' else version}")
    for name in ("k8s.io/api", "k8s.io/apimachinery"):
        if not any(r.split()[0] == name for r in requires):
            requires.append(f"\t{name} {staging}")
    return f"module staticpodd.test/y2j\n\n{go_line}\n\nrequire (\n" + "\n".join(requires) + "\n)\n"


@pytest.fixture(scope="module", params=KUBELET_VERSIONS, ids=lambda v: f"kubelet-{v}")
def y2j(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Build the Go converter once per kubelet version, against the modules that version pins (see
    :func:`y2j_module`), from the Go module proxy, cached in $STATICPODD_E2E_CACHE. Skips with a
    reason (a failure in strict mode) when Go is missing."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed (Go >= 1.24 is needed for the differential test's y2j helper)")
    out = tmp_path_factory.mktemp("y2j")
    CACHE.mkdir(parents=True, exist_ok=True)
    env = _go_env()
    src = out / "src"
    src.mkdir()
    shutil.copy(HERE / "y2j" / "main.go", src / "main.go")
    (src / "go.mod").write_text(y2j_module(request.param, env))
    binary = out / "y2j"
    for argv in (["go", "mod", "tidy"], ["go", "build", "-o", str(binary), "."]):
        proc = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{' '.join(argv)} of tests/validate/y2j for kubelet {request.param} failed:\n{proc.stderr}"

    def run(docs: list[bytes]) -> list[dict]:
        payload = json.dumps([base64.b64encode(d).decode() for d in docs])
        proc = subprocess.run([str(binary)], input=payload, capture_output=True, text=True, check=True, timeout=120)
        return json.loads(proc.stdout)

    return run


def ours(data: bytes) -> tuple[str, object, set[str]]:
    """(verdict, document, codes of the notes: what only staticpodd refuses) for ``data``."""
    try:
        d = decode(data, max_bytes=10 * 1024 * 1024)
    except DecodeProblem as p:
        return p.code, p.message, set()
    codes = {n.code for n in d.notes}
    if any(n.code == "yaml-duplicate-key" and "at random" in n.message for n in d.notes):
        codes.add("random-duplicate")
    return "ok", d.doc, codes


def agree(data: bytes, go: dict) -> str | None:
    """None when we agree with the kubelet's decode step on ``data``, else a description.

    The kubelet's verdict is ``go["ok"]``; where it accepts, our document must equal its JSON.
    Allowed: a duplicate key the kubelet resolves at random (an int key ``1`` and a string key
    ``'1'``: sigs.k8s.io/yaml converts a Go map in random order), which we refuse (a note).
    """
    verdict, doc, notes = ours(data)
    if go["json_prefix"] != json_prefixed(data):
        return f"JSON prefix (apimachinery hasJSONPrefix): Go says {go['json_prefix']}"
    if not go["ok"]:
        if verdict == "ok":
            return f"Go refuses ({go['error']}) but we accept"
        if verdict == "json-syntax" and f"json parse error: {go['error']}" not in str(doc):
            return f"JSON error text differs:\n ours {doc}\n Go   {go['error']}"  # doc holds our message
        return None
    if verdict != "ok":
        return f"Go accepts but we say {verdict}"
    expected = json.loads(go["json"])
    if doc != expected or _types(doc) != _types(expected):
        if "random-duplicate" in notes:
            return None  # keys of different YAML types that collide as JSON strings: random in Go
        return f"decoded differently:\n ours {doc!r}\n Go   {expected!r}"
    return None


def _types(v: object) -> object:
    if isinstance(v, dict):
        return {k: _types(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_types(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return "int"
    if isinstance(v, float):
        return "float"  # also a JSONNumber (a JSON number with a fraction or exponent)
    return type(v).__name__


def _corpus_inputs(corpus: Path) -> list[Path]:
    files = sorted((corpus / "manifests").iterdir())
    files += sorted(p for p in (corpus / "cases").rglob("*") if p.is_file())
    return files


def test_corpus_and_cases_agree_with_yamltojson(y2j, corpus):
    files = _corpus_inputs(corpus)
    datas = [p.read_bytes() for p in files]
    results = y2j(datas)
    problems = [f"{p.name}: {why}" for p, d, r in zip(files, datas, results, strict=True) if (why := agree(d, r))]
    assert not problems, "\n".join(problems)
    assert len(files) >= 24 + 15


TRICKY = [
    b"a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: n\ng: true\nh: True\ni: tRUE\n",
    b"a: 0777\nb: 0x1F\nc: 0o17\nd: 0b101\ne: 1_000\nf: +5\ng: -0\nh: 08\ni: 0999\nj: -0b11\n",
    b"a: 1e3\nb: 1.0\nc: 1.5\nd: .5\ne: 1.\nf: -.5e-3\ng: 6.8523015e+5\nh: 1e21\ni: 123456789012345678901234\n",
    b"a: 1:20\nb: 2001-12-14\nc: 2001-12-14t21:59:43.10-05:00\nd: ~\ne: null\nf:\ng: Null\n",
    b"1: a\ntrue: b\nn: c\n1.5: d\n~: e\n",
    b"y: 1\n",
    b"9223372036854775807: x\n18446744073709551615: y\n",
    b"a: 9223372036854775808\nb: 18446744073709551616\nc: -9223372036854775809\n",
    b"a: !!str 5\nb: !!int '7'\nc: !!float 1\nd: !custom x\ne: !!bool yes\n",
    b"a: !!int x\n",
    b"base: &b {p: 1, q: 2}\nthing:\n  <<: *b\n  q: 3\n",
    b"a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n",
    b"a: &x 1\na2: *x\nb: &x 2\nb2: *x\n",
    b"a: .inf\n",
    b"a: .NaN\n",
    b"a: -.Inf\n",
    b"\xef\xbb\xbfa: 1\n",
    b"a: 1\n---\nb: 2\n",
    b"---\na: 1\n---\n",
    b"---\n",
    b"",
    b"# only a comment\n",
    b"...\n",
    b"a: 1\na: 2\n",
    b"a: {b: 1, b: 1}\n",
    b"1: x\n'1': y\n",
    b"a:\n\tb: 1\n",
    b"a: 'x\ty'\n",
    b"a:\t1\n",
    b"\ta: 1\n",
    b"a: [1, 2\n",
    b'{"a": 1 "b": 2}\n',
    b"a: b: c\n",
    b"- a\nb: c\n",
    b"a: *nope\n",
    b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": []}}',
    b"a: |\n  line\n   more\nb: >-\n  folded\n  text\n",
    b"a: 'it''s'\nb: \"\\u00e9\\t\"\n",
    b"[1, 2, 3]\n",
    b"plain string\n",
    b"42\n",
    b"a: [y, n, yes, Off]\n",
    b"? complex\n: value\n",
    b"? [a, b]\n: value\n",
    b"a: &r [*r]\n",
    b'{"a": "\\ud800\\udc00"}',
    # the non-specific tag and numbers out of float64's range
    b"a: ! 5\nb: ! yes\nc: ! ~\nd: !  1.5\n",
    b"! 5\n",
    b"a: !! 5\n",
    b"! a: 1\n",
    b"a: 1e400\nb: -1e400\nc: 1e-400\nd: 1.0e+400\n",
    b"1e400: x\n",
    b"a: 0x1p400000\nb: 99999999999999999999999\nc: -99999999999999999999\n",
    b"a: !!float 1e400\n",
    b"a: !!int 1e400\n",
    b"a: !!str 1e400\n",
    # !!binary: go-yaml v2 base64-decodes it into the string (Go's decoder skips \r and \n, wants
    # the padding, refuses anything else); a pod name written so names the pod
    b"name: !!binary a3ViZS1zY2hlZHVsZXI=\n",
    b"a: !!binary |\n  a3ViZS1z\n  Y2hlZHVsZXI=\n",
    b"a: !!binary a3ViZS1zY2hlZHVsZXI\n",
    b"a: !!binary 'a3V iZS1z'\n",
    b"a: !!binary _-_-\n",
    b"a: !!binary /w==\n",
    b"!!binary YQ==: 1\n",
    # a first non-space byte '{' is strict JSON (apimachinery util/yaml hasJSONPrefix)
    b'{"a": 1,}',
    b'{"a": [1, 2,]}',
    b'{"a": 1} # comment\n',
    b'# comment\n{"a": 1,}',
    b"{a: 1}",
    b"{'a': 1}",
    b'{"a": 3e1, "b": 30.0, "c": -0, "d": 1E2, "e": 1e400}',
    b'{"a": 01}',
    b'{"a": .5}',
    b'{"a": +1}',
    b'{"a": NaN}',
    b'{"a": tru}',
    b'{"a": "x\ty"}',
    b'{"a": "\\x41"}',
    b'{"a": "\\ud800"}',
    b'{"a": "\xff\xfe"}',
    b'{"a": 1, "a": 2}',
    b'{"a": 1}\n---\n{"b": 2}',
    b'{"a": 1} {"b": 2}',
    b'{"a": 1, \xff}',
    b'{"a": 1, \xc3\xa9}',
    b'{"a": 1\x00}',
    b'{"a": "\x01"}',
    b'{"a": "\\u12"}',
    b'{"a": -}',
    b'{"a": 1.}',
    b'{"a": 1e}',
    b'{"a": 1e+}',
    b'{"a": nul}',
    b'{"a": falsy}',
    b'{"a" 1}',
    b'{"a": [1 2]}',
    b'{\n"a": 1\n"b": 2}',
    b"\xc2\xa0{\"a\": 1}",
    b"\xc2\x85{\"a\": 1}",
    b"\x0b{\"a\": 1}",
    b"\x0c{\"a\": 1}",
    b"\xe3\x80\x80{\"a\": 1}",
    b"\xef\xbb\xbf{\"a\": 1,}",
    b'\n\n  {\n  "a": [\n    {"b": "c"},\n  ]\n}\n',
    b'{"a": "\\u00e9", "b": "\\/", "c": "\\b\\f\\n\\r\\t"}',
    b'{"a": [], "b": {}, "c": null, "d": true, "e": false, "f": -1.5e-3}',
    b"{",
    b'{"a"',
    b'{"a":',
    b'{"a": "b',
    # byte order marks
    "a: 1\nb: [x, y]\n".encode("utf-16-le"),
    b"\xff\xfe" + "a: 1\nb: [x, y]\n".encode("utf-16-le"),
    b"\xfe\xff" + "a: 1\nb: [x, y]\n".encode("utf-16-be"),
    b"\xff\xfe" + '{"a": 1,}'.encode("utf-16-le"),
    b"\xff\xfe\x00\x00" + "a: 1\n".encode("utf-32-le"),
    b"\x00\x00\xfe\xff" + "a: 1\n".encode("utf-32-be"),
    b"\xff\xfe" + b"\x00\xd8a\x00",
    b"\xef\xbb\xbf\xef\xbb\xbfa: 1\n",
    b"a: 1\n\xef\xbb\xbf\n",
    b"a: 1\n\xef\xbb\xbfb: 2\n",
    b"a: x\xef\xbb\xbfy\n",
    b"a: 1\n\xef\xbb\xbf# c\n",
    b"- 1\n\xef\xbb\xbf- 2\n",
    b"a:\n  \xef\xbb\xbfb: 2\n",
]


def test_tricky_inputs_agree_with_yamltojson(y2j):
    results = y2j(TRICKY)
    problems = [f"{d!r}: {why}" for d, r in zip(TRICKY, results, strict=True) if (why := agree(d, r))]
    assert not problems, "\n".join(problems)


_SCALARS = st.sampled_from(
    [
        "yes",
        "no",
        "y",
        "n",
        "on",
        "Off",
        "true",
        "False",
        "~",
        "null",
        "",
        "0777",
        "0x1F",
        "0o17",
        "0b11",
        "1_000",
        "1e3",
        "1.0",
        "1.5",
        ".5",
        "08",
        "09.5",
        "1:20",
        "2001-12-14",
        "+5",
        "-7",
        "v1",
        "Pod",
        "10m",
        "128Mi",
        "'quoted'",
        '"dq yes"',
        "'0777'",
        "a b",
        "-",
        "+",
        ".",
        "1.2.3",
        "0",
        "-0",
        "00",
        "*anc",
        "|\n    block yes\n",
        "# comment",
        "'multi\n    line'",
        # tags and numbers out of range
        "! 5",
        "! yes",
        "! ~",
        "!  1.5",
        "!!str 7",
        "!!int 7",
        "!!float 7",
        "!!bool yes",
        "!!null ~",
        "!custom x",
        "&an ! 3",
        "1e400",
        "-1e400",
        "1e-400",
        ".1e999",
        "1_0e400",
        "18446744073709551616",
        "-9223372036854775809",
        "0x1p400000",
    ]
)
_KEYS = st.sampled_from(
    ["name", "image", "y", "n", "on", "1", "true", "key", "a", "b", "x-y", "'k'", "07", "! 1", "1e400", "!!str 2"]
)


@st.composite
def _yaml_text(draw: st.DrawFn) -> str:
    def node(depth: int, indent: int) -> str:
        kind = draw(st.sampled_from(["scalar", "map", "seq", "flowmap", "flowseq"] if depth < 3 else ["scalar"]))
        pad = " " * indent
        if kind == "scalar":
            return " " + draw(_SCALARS) + "\n"
        if kind == "flowseq":
            items = draw(st.lists(_SCALARS.filter(lambda s: s not in ("", "-") and "\n" not in s), max_size=3))
            return " [" + ", ".join(items) + "]\n"
        if kind == "flowmap":
            keys = draw(st.lists(_KEYS, max_size=3))
            vals = draw(
                st.lists(
                    _SCALARS.filter(lambda s: s not in ("", "-", "a b") and "\n" not in s),
                    min_size=len(keys),
                    max_size=len(keys),
                )
            )
            return " {" + ", ".join(f"{k}: {v}" for k, v in zip(keys, vals, strict=True)) + "}\n"
        step = draw(st.sampled_from([2, 4]))
        if kind == "map":
            keys = draw(st.lists(_KEYS, min_size=1, max_size=4))
            merge = f"{pad}<<: *anc\n" if draw(st.integers(0, 4)) == 0 else ""
            return "\n" + merge + "".join(f"{pad}{k}:" + node(depth + 1, indent + step) for k in keys)
        n = draw(st.integers(1, 3))
        return "\n" + "".join(f"{pad}-" + node(depth + 1, indent + step) for _ in range(n))

    keys = draw(st.lists(_KEYS, min_size=1, max_size=5))
    text = "anc: &anc {p: 1, q: yes, 1: on}\n" + "".join(f"{k}:" + node(1, 2) for k in keys)
    if draw(st.integers(0, 3)) == 0 and "\n  " in text:
        text = text.replace("\n  ", "\n\t", 1)  # a tab in indentation
    if draw(st.integers(0, 9)) == 0:
        text += "---\nextra: 1\n"
    return text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_yaml_text(), min_size=20, max_size=20))
def test_generated_yaml_agrees_with_yamltojson(y2j, texts):
    datas = [t.encode() for t in texts]
    results = y2j(datas)
    problems = [f"{d.decode()!r}: {why}" for d, r in zip(datas, results, strict=True) if (why := agree(d, r))]
    assert not problems, "\n".join(problems)


_JSON_VALUES = st.sampled_from(
    ['"s"', "1", "-0", "3e1", "30.0", "1E2", "1e400", "-1e400", "1e-400", "true", "false", "null", "[]", "{}",
     '"\\u00e9"', '"\\ud800"', '"a\\/b"', "[1, 2]", '{"k": 1}']
)
_JSON_KEYS = st.sampled_from(['"a"', '"b"', '"name"', '"a"', "a", "'a'"])
_JSON_NOISE = st.sampled_from(["", "", "", "", ",", " # c", "\t", "\n", " ", "//c\n", "}"])


@st.composite
def _json_text(draw: st.DrawFn) -> bytes:
    """A JSON-prefixed document (first non-space byte '{'), valid or with one JSON mistake
    (trailing comma, comment, unquoted or single-quoted key, a stray brace)."""
    keys = draw(st.lists(_JSON_KEYS, min_size=0, max_size=4))
    parts = []
    for k in keys:
        v = draw(_JSON_VALUES)
        if draw(st.integers(0, 5)) == 0:
            v = "{" + f"{draw(_JSON_KEYS)}: {draw(_JSON_VALUES)}{draw(_JSON_NOISE)}" + "}"
        parts.append(f"{k}: {v}{draw(_JSON_NOISE) if draw(st.integers(0, 6)) == 0 else ''}")
    lead = draw(st.sampled_from(["", " ", "\n\n", "\t", "# yaml\n", "\u00a0", "\u3000", "\ufeff"]))
    body = "{" + ", ".join(parts) + draw(_JSON_NOISE) + "}"
    tail = draw(st.sampled_from(["", "\n", " ", "\n---\n", " x", "\n{}"]))
    return (lead + body + tail).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_json_text(), min_size=20, max_size=20))
def test_generated_json_agrees_with_the_kubelets_decoder(y2j, datas):
    """a file whose first non-space byte is '{' is strict JSON to the kubelet."""
    results = y2j(datas)
    problems = [f"{d!r}: {why}" for d, r in zip(datas, results, strict=True) if (why := agree(d, r))]
    assert not problems, "\n".join(problems)


def _pod_with(value: str, *, json_syntax: bool) -> bytes:
    if json_syntax:
        return (
            '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": '
            '[{"name": "a", "image": "nginx:1.27", "ports": [{"containerPort": ' + value + "}]}]}}"
        ).encode()
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: a\n"
        "    image: nginx:1.27\n    ports:\n    - containerPort: " + value + "\n"
    ).encode()


@pytest.mark.parametrize("json_syntax", [True, False], ids=["json", "yaml"])
def test_numbers_in_an_integer_field_agree_with_the_kubelets_pod_decoder(y2j, json_syntax):
    """3e1 for containerPort: 30 in YAML, refused in JSON ("cannot unmarshal number 3e1 into Go
    struct field ... of type int32"); the same for 30.0, 1E2, 1e400, 2147483648 (int32 range)."""
    from staticpodd.validate import validate_bytes
    from tests.validate.conftest import NODE

    values = ["30", "3e1", "30.0", "1E2", "-0", "8080", "1e400", "2147483648", "1.5", '"80"', "0x50", "0o120"]
    datas = [_pod_with(v, json_syntax=json_syntax) for v in values]
    results = y2j(datas)
    problems = []
    for v, d, r in zip(values, datas, results, strict=True):
        findings = validate_bytes(d, "web.yaml", NODE)
        decode_refused = any(f.code in ("schema-type", "json-syntax", "yaml-syntax") for f in findings)
        if decode_refused != (not r["pod_ok"]):
            problems.append(f"{v!r}: kubelet decode {'ok' if r['pod_ok'] else r['pod_error']}; ours "
                            f"{[f.code for f in findings if f.severity == 'error']}")
    assert not problems, "\n".join(problems)


DEEP_POD = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers: []\n"


def _deep_flow(n: int) -> bytes:
    return DEEP_POD + b"x: " + b"[" * n + b"]" * n + b"\n"


def _deep_block(n: int) -> bytes:
    return DEEP_POD + b"y:\n" + b"".join(b" " * (i + 1) + b"a:\n" for i in range(n)) + b" " * (n + 1) + b"b\n"


def test_deep_nesting_the_kubelet_reads_is_never_called_a_kubelet_refusal(y2j):
    # Seen with y2j: go-yaml v2 and encoding/json read nesting up to 10000 levels (flow 9999 runs,
    # 10000 is refused); libyaml stops at 1000, and our decoder called that a kubelet refusal, so
    # the daemon's on_invalid: restore would have put old bytes over a file the kubelet runs.
    from staticpodd.validate.refused import kubelet_refuses

    cases = {f"flow-{n}": _deep_flow(n) for n in (500, 999, 1000, 5000, 9999, 10001)}
    cases.update({f"block-{n}": _deep_block(n) for n in (999, 1001, 3000)})
    results = y2j(list(cases.values()))
    wrong = []
    for (name, data), go in zip(cases.items(), results, strict=True):
        try:
            decode(data, max_bytes=10 * 1024 * 1024)
            level = "ok"
        except DecodeProblem as p:
            level = "staticpodd refuses" if p.kubelet == "accepts" else "kubelet refuses"
        if go["ok"] and go["pod_ok"] and (level == "kubelet refuses" or kubelet_refuses(data) is not None):
            wrong.append(f"{name}: the kubelet runs it, we say {level!r} / refused: {kubelet_refuses(data)!r}")
        if not go["ok"] and level == "ok":
            wrong.append(f"{name}: the kubelet refuses it ({go['error']}), we accept it")
    assert not wrong, "\n".join(wrong)


_HUGE = "9" * 5000  # more digits than Python's int() converts (sys.get_int_max_str_digits: 4300)


def _go_json(text: str) -> object:
    """The Go side's JSON text as a document, with integer literals too long for int() kept as
    JSONNumber, as staticpodd's JSON reader keeps them."""
    from staticpodd.manifest.jsondecode import _MAX_INT_DIGITS, JSONNumber

    return json.loads(text, parse_int=lambda s: int(s) if len(s) <= _MAX_INT_DIGITS else JSONNumber(s))


@pytest.mark.parametrize("json_syntax", [True, False], ids=["json", "yaml"])
def test_a_5000_digit_integer_gets_the_kubelets_verdict(y2j, json_syntax):
    """A 5,000-digit integer (say a stray notes.yaml.bak) raised ValueError in int() and ended every
    verb in a traceback. The kubelet reads it: in YAML it is out of every Go integer's and float64's
    range, so go-yaml v2 keeps the scalar as a string; in JSON it stays a number. In an unknown
    field the pod runs; in an int32 field (containerPort) the kubelet refuses the pod."""
    from staticpodd.validate import validate_bytes
    from tests.validate.conftest import NODE

    pod = DEEP_POD.decode()
    if json_syntax:
        docs = {
            "bare": '{"a": ' + _HUGE + "}",
            "negative": '{"a": -' + _HUGE + "}",
            "fraction": '{"a": ' + _HUGE + ".5}",
            "unknown-field": '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, '
            '"spec": {"containers": []}, "notes": ' + _HUGE + "}",
        }
    else:
        docs = {
            "bare": f"a: {_HUGE}\n",
            "negative": f"a: -{_HUGE}\n",
            "octal": f"a: 0{'7' * 5000}\n",
            "hex": f"a: 0x{'f' * 5000}\n",
            "underscores": f"a: 1_{_HUGE}\n",
            "fraction": f"a: {_HUGE}.5\n",
            "key": f"{_HUGE}: x\n",
            "list": f"a: [{_HUGE}, -{_HUGE}]\n",
            "tagged-int": f"a: !!int {_HUGE}\n",
            "tagged-str": f"a: !!str {_HUGE}\n",
            "unknown-field": pod + f"notes: {_HUGE}\n",
        }
    datas = [d.encode() for d in docs.values()]
    results = y2j(datas)
    problems = []
    for name, data, go in zip(docs, datas, results, strict=True):
        verdict, doc, _notes = ours(data)
        if go["ok"] != (verdict == "ok"):
            problems.append(f"{name}: Go {'accepts' if go['ok'] else go['error'][:120]}, we say {verdict}")
        elif go["ok"] and doc != _go_json(go["json"]):
            problems.append(f"{name}: decoded differently")
    pods = [_pod_with(v, json_syntax=json_syntax) for v in (_HUGE, "-" + _HUGE)]
    pods.append(datas[-1])
    for data, go in zip(pods, y2j(pods), strict=True):
        findings = validate_bytes(data, "web.yaml", NODE)
        refused = any(f.code in ("schema-type", "json-syntax", "yaml-syntax") for f in findings)
        if refused != (not go["pod_ok"]):
            problems.append(f"pod {data[-60:]!r}: kubelet {'runs' if go['pod_ok'] else go['pod_error'][:120]}; "
                            f"ours {[f.code for f in findings if f.severity == 'error']}")
    assert not problems, "\n".join(problems)
