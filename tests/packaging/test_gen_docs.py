"""packaging/gen-docs.py: man pages and bash completion generated from the argparse parsers.

Real tools: man (groff) renders the pages with warnings on, bash runs the completion function.
The generator is run as a subprocess, as the package builds run it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GEN = REPO / "packaging" / "gen-docs.py"

FAKE = textwrap.dedent(
    """
    import argparse
    def build_parser():
        p = argparse.ArgumentParser(description="Manage manifests. Lines with a leading\\n.dot survive.")
        p.add_argument("--root", default="/", metavar="DIR", help="node root (default: %(default)s)")
        sub = p.add_subparsers(dest="verb", metavar="VERB")
        pk = sub.add_parser("park", help="take a component out of the kubelet's sight")
        pk.add_argument("component", help="component name, e.g. kube-scheduler")
        pk.add_argument("--for", dest="duration", metavar="DURATION", help="restore after DURATION")
        pk.add_argument("--hidden", help=argparse.SUPPRESS)
        v = sub.add_parser("validate", help="check files", aliases=["check"])
        v.add_argument("paths", nargs="+", metavar="PATH")
        s = sub.add_parser("status", help="show status")
        s.add_argument("--format", choices=["text", "json"])
        return p
    def build_daemon():
        p = argparse.ArgumentParser(description="The daemon.")
        p.add_argument("--reload", action="store_true", help="reload the running daemon")
        return p
    """
)


def gen(tmp_path: Path, *args: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath, SOURCE_DATE_EPOCH="1700000000")
    return subprocess.run([sys.executable, str(GEN), *args], capture_output=True, text=True, env=env, cwd=tmp_path)


@pytest.fixture
def fake(tmp_path: Path) -> str:
    (tmp_path / "fakecli.py").write_text(FAKE)
    return f"{tmp_path}{os.pathsep}{REPO}"


#: Plain text out of man: no overstrike bold, wide lines, ASCII hyphens.
MAN_ENV = {k: v for k, v in os.environ.items() if k != "MAN_KEEP_FORMATTING"} | {"MANWIDTH": "200", "LC_ALL": "C.UTF-8"}


def render(page: Path) -> str:
    r = subprocess.run(
        ["man", "--warnings", "-l", str(page)],
        capture_output=True, text=True, env=MAN_ENV,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", f"groff warnings:\n{r.stderr}"
    return r.stdout


def complete(script: Path, *words: str) -> list[str]:
    code = (
        f'source "{script}"; COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); '
        '_staticpodctl; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    r = subprocess.run(["bash", "-c", code, "bash", *words], capture_output=True, text=True, check=True)
    return sorted(w for w in r.stdout.split("\n") if w)


needs_man = pytest.mark.skipif(shutil.which("man") is None, reason="man not installed (apt: man-db)")


@needs_man
def test_man_pages_list_every_verb_and_option(tmp_path: Path, fake: str) -> None:
    r = gen(tmp_path, "--parser", "staticpodctl=fakecli:build_parser", "--parser", "staticpodd=fakecli:build_daemon",
            "--man-dir", "man", pythonpath=fake)
    assert r.returncode == 0, r.stderr
    text = render(tmp_path / "man/staticpodctl.8")
    for expected in ("park", "validate (alias: check)", "status", "--for DURATION", "--format {text,json}",
                     "node root (default: /)", "component name, e.g. kube-scheduler", "2023-11-14",
                     "EXIT STATUS", "config-invalid", "/etc/kubernetes/manifests/.staticpodd/"):
        assert expected in text, expected
    assert "--hidden" not in text
    assert ".dot survive" in text
    assert "SIGHUP" in render(tmp_path / "man/staticpodd.8")


def test_a_missing_parser_fails_the_build_naming_it(tmp_path: Path, fake: str) -> None:
    r = gen(tmp_path, "--parser", "staticpodd=fakecli:no_such_function", "--man-dir", "man", pythonpath=fake)
    assert r.returncode == 1
    assert "fakecli has no no_such_function()" in r.stderr
    r = gen(tmp_path, "--parser", "staticpodd=no_such_module:build_parser", "--man-dir", "man", pythonpath=fake)
    assert r.returncode == 1
    assert "cannot import no_such_module" in r.stderr
    assert not (tmp_path / "man").exists()


def test_completion_offers_verbs_options_choices_and_components(tmp_path: Path, fake: str) -> None:
    r = gen(tmp_path, "--parser", "staticpodctl=fakecli:build_parser", "--completion", "c.bash", pythonpath=fake)
    assert r.returncode == 0, r.stderr
    script = tmp_path / "c.bash"
    subprocess.run(["bash", "-n", str(script)], check=True)
    root = tmp_path / "node"
    manifests = root / "etc/kubernetes/manifests"
    (manifests / ".staticpodd/parked").mkdir(parents=True)
    (manifests / "kube-apiserver.yaml").touch()
    (manifests / "etcd.json").touch()
    (manifests / ".staticpodd/parked/kube-scheduler.yaml").touch()
    assert complete(script, "staticpodctl", "") == ["check", "park", "status", "validate"]
    assert complete(script, "staticpodctl", "--r") == ["--root"]
    assert complete(script, "staticpodctl", "--root", str(root), "park", "") == [
        "etcd", "kube-apiserver", "kube-scheduler"]
    assert complete(script, "staticpodctl", f"--root={root}", "park", "kube-s") == ["kube-scheduler"]
    assert complete(script, "staticpodctl", "park", "--") == ["--for", "--help"]
    assert complete(script, "staticpodctl", "status", "--format", "") == ["json", "text"]
    assert complete(script, "staticpodctl", "park", "--for", "") == []


@needs_man
def test_real_parsers_document_every_verb_and_option(tmp_path: Path) -> None:
    """The pages built from staticpodd.cli and staticpodd.daemon name every verb and option."""
    cli = pytest.importorskip("staticpodd.cli", reason="staticpodd/cli.py not there yet")
    daemon = pytest.importorskip("staticpodd.daemon", reason="staticpodd/daemon.py not there yet")
    r = gen(tmp_path, "--man-dir", "man", "--completion", "staticpodctl", pythonpath=str(REPO))
    assert r.returncode == 0, r.stderr
    for prog, parser in (("staticpodctl", cli.build_parser()), ("staticpodd", daemon.build_parser())):
        text = render(tmp_path / f"man/{prog}.8")
        parsers = [parser]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    assert f"{prog} {verb}" in text, verb
                    parsers.append(sub)
        for p in parsers:
            for action in p._actions:
                if action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
                    for option in action.option_strings:
                        assert option in text, f"{prog}: {option}"
    subprocess.run(["bash", "-n", str(tmp_path / "staticpodctl")], check=True)


@needs_man
def test_staticpodctl_8_has_examples_from_the_docs_and_the_common_options_once(tmp_path: Path) -> None:
    """EXAMPLES is docs/reference/staticpodctl.md's first sh block (the one tests/docs runs), and
    --root, --config, --json ... are described once under OPTIONS, not under every verb."""
    pytest.importorskip("staticpodd.cli", reason="staticpodd/cli.py not there yet")
    r = gen(tmp_path, "--man-dir", "man", pythonpath=str(REPO))
    assert r.returncode == 0, r.stderr
    text = render(tmp_path / "man/staticpodctl.8")
    examples = text.split("EXAMPLES", 1)[1].split("EXIT STATUS", 1)[0]
    assert 'staticpodctl park kube-scheduler --for 30m --reason "manual scheduling drill"' in examples
    assert "staticpodctl unpark kube-scheduler" in examples
    for option in ("--root DIR", "--manifest-dir DIR", "--config FILE", "--lock-timeout SECONDS"):
        assert text.count(option + "\n") + text.count(option + " ") <= 2, option  # OPTIONS (+ SYNOPSIS)
    assert "take every default path under" in text or "--root DIR" in text


@needs_man
def test_the_section_5_pages_come_from_the_docs_and_render_cleanly(tmp_path: Path) -> None:
    """staticpodd.yaml(5) and staticpodd-hooks(5) are docs/reference/configuration.md and hooks.md:
    every configuration key of the docs table is on the page, groff gives no warning."""
    pytest.importorskip("staticpodd.cli", reason="staticpodd/cli.py not there yet")
    r = gen(tmp_path, "--man-dir", "man", pythonpath=str(REPO))
    assert r.returncode == 0, r.stderr
    conf = render(tmp_path / "man/staticpodd.yaml.5")
    keys = re.findall(r"^\| `([a-z_.]+)` \|", (REPO / "docs/reference/configuration.md").read_text(), re.M)
    assert len(keys) >= 20
    for key in keys:
        assert key in conf, key
    assert "STATICPODD.YAML(5)" in conf and "staticpodd-hooks(5)" in conf
    hooks = render(tmp_path / "man/staticpodd-hooks.5")
    for expected in ("STATICPODD_COMPONENT", "post-park.d/50-log", "process group is killed"):
        assert expected in hooks, expected
    assert "staticpodd.yaml(5)" in render(tmp_path / "man/staticpodctl.8")


def test_a_missing_docs_page_fails_the_build_naming_it(tmp_path: Path) -> None:
    """The section-5 pages are never silently empty: without their docs page the build fails."""
    tree = tmp_path / "tree"
    (tree / "packaging").mkdir(parents=True)
    shutil.copy(GEN, tree / "packaging" / "gen-docs.py")
    (tree / "docs" / "reference").mkdir(parents=True)
    (tree / "docs" / "reference" / "staticpodctl.md").write_text("# x\n\n```sh\nstaticpodctl status\n```\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), SOURCE_DATE_EPOCH="1700000000")
    r = subprocess.run([sys.executable, str(tree / "packaging" / "gen-docs.py"), "--man-dir", "man"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 1
    assert "configuration.md" in r.stderr and "the man pages are made from it" in r.stderr
