#!/usr/bin/env python3
"""Generate the man pages and the bash completion from the argparse parsers, at build time.

The parsers are the single source of every option and verb, so the documentation never drifts:
``staticpodctl(8)`` from ``staticpodd.cli:build_parser`` and ``staticpodd(8)`` from
``staticpodd.daemon:build_parser``. A missing module or ``build_parser`` fails the build with a
message naming it (exit status 1), never a silently empty page.

The pages' prose comes from the same Markdown the docs are read in (``docs/reference/``):
``staticpodctl(8)``'s EXAMPLES are the first ``sh`` block of ``docs/reference/staticpodctl.md``
(which tests/docs runs on a sandbox node), and ``staticpodd.yaml(5)`` and ``staticpodd-hooks(5)``
are ``docs/reference/configuration.md`` and ``docs/reference/hooks.md`` turned into roff.

Usage (from the source tree; the package must be importable, e.g. ``PYTHONPATH=.``)::

    python3 packaging/gen-docs.py --man-dir OUT/man8 --completion OUT/staticpodctl.bash
    python3 packaging/gen-docs.py --parser prog=module:function ... (tests use their own parsers)

``SOURCE_DATE_EPOCH`` (set by dpkg-buildpackage and rpmbuild) fixes the date in the pages.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

DEFAULT_PARSERS = (
    ("staticpodctl", "staticpodd.cli:build_parser"),
    ("staticpodd", "staticpodd.daemon:build_parser"),
)

SUMMARY = {
    "staticpodctl": "version, validate, atomically swap and park the kubelet's static pod manifests",
    "staticpodd": "daemon that watches the kubelet's static pod manifest directory",
}

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference"

#: Section-5 pages: (file name, title, NAME line, Markdown source under DOCS).
FILE_PAGES = (
    ("staticpodd.yaml.5", "STATICPODD.YAML", "staticpodd.yaml \\- configuration of staticpodd and staticpodctl",
     "configuration.md"),
    ("staticpodd-hooks.5", "STATICPODD-HOOKS", "staticpodd-hooks \\- executables run around staticpodctl operations",
     "hooks.md"),
)

# Sections written by hand: what the parsers cannot know. Keep them short and true.
FILES = """\
.TP
.I /etc/kubernetes/manifests/
The kubelet's manifest directory (its \\fBstaticPodPath\\fR, read from
.IR /var/lib/kubelet/config.yaml
when that file sets it).
.TP
.I /etc/kubernetes/manifests/.staticpodd/
Private area on the same mount: \\fBparked/\\fR (parked manifests, plain files that can be moved
back by hand), \\fBstaging/\\fR, \\fBquarantine/\\fR. The kubelet never reads dot-names.
.TP
.I /var/lib/staticpodd/versions.sqlite3
The version store (SQLite, WAL mode).
.TP
.I /run/staticpodd/
The lock shared by staticpodctl and staticpodd, and the daemon's status (\\fBdaemon.json\\fR).
.TP
.I /etc/staticpodd/staticpodd.yaml
Configuration; every key is documented, with its default, in the shipped file. Checked against
.IR /usr/share/staticpodd/schemas/staticpodd-config.schema.json .
.TP
.I /etc/staticpodd/hooks.d/{pre,post}-{apply,park,unpark,rollback}.d/
Hook executables, run in name order.
"""

EXTRA = {
    "staticpodd": """\
.SH SYSTEMD
staticpodd runs as \\fBstaticpodd.service\\fR (\\fBType=notify\\fR). It sends \\fBREADY=1\\fR after the
first full rescan, \\fBSTATUS=\\fR with a one-line summary, \\fBWATCHDOG=1\\fR, and \\fBRELOADING=1\\fR on
SIGHUP. \\fBsystemctl reload staticpodd\\fR runs \\fBstaticpodd --reload\\fR, which waits until the
daemon has loaded the new configuration or refused it (the old one then stays in force).
An invalid configuration at start exits with status 78, which the unit does not restart.
The unit's sandbox lets the daemon write only the manifest directory and its own state; for a
\\fBstaticPodPath\\fR other than \\fI/etc/kubernetes/manifests\\fR add it with
\\fBsystemctl edit staticpodd\\fR (\\fBReadWritePaths=\\fR).
Every event goes to the journal with a fixed \\fBMESSAGE_ID\\fR; \\fBjournalctl -x -u staticpodd\\fR
explains each one (catalog in \\fI/usr/lib/systemd/catalog/staticpodd.catalog\\fR).
.SH SIGNALS
.TP
.B SIGHUP
Reload the configuration.
.TP
.B SIGTERM
Finish the operation in progress and exit 0.
""",
    "staticpodctl": "",
}


#: EXAMPLES: the first ``sh`` block of this docs page (the block tests/docs runs as written).
EXAMPLES = {"staticpodctl": "staticpodctl.md"}


class GenError(Exception):
    """A parser could not be loaded: the message names the module and function."""


def load_parser(spec: str) -> argparse.ArgumentParser:
    """Import ``module:function`` and call it; returns the ArgumentParser. Raises GenError."""
    module_name, _, func_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise GenError(f"cannot import {module_name} for {spec}: {exc}") from exc
    func: Callable[[], argparse.ArgumentParser] | None = getattr(module, func_name, None)
    if func is None:
        raise GenError(f"{module_name} has no {func_name}() (needed: {spec})")
    parser = func()
    if not isinstance(parser, argparse.ArgumentParser):
        raise GenError(f"{spec} returned {type(parser).__name__}, not an argparse.ArgumentParser")
    return parser


# ---------------------------------------------------------------------------------------------
# man pages


def roff(text: str) -> str:
    """Escape plain text for roff: backslashes, hyphens, and lines starting with . or '."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.splitlines())


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split()) if action.help else ""


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"\\fI{roff(action.metavar or action.dest)}\\fR"
    if action.nargs == 0:
        return ", ".join(f"\\fB{roff(o)}\\fR" for o in action.option_strings)
    metavar = action.metavar
    if metavar is None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.nargs == "?":
        return ", ".join(f"\\fB{roff(o)}\\fR[=\\fI{roff(metavar)}\\fR]" for o in action.option_strings)
    return ", ".join(f"\\fB{roff(o)}\\fR \\fI{roff(metavar)}\\fR" for o in action.option_strings)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _options(parser: argparse.ArgumentParser, skip: frozenset[str] = frozenset()) -> list[str]:
    """``.TP`` items for the parser's options; those whose option strings are all in ``skip``
    (the common options, listed once under OPTIONS) are left out."""
    out = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if action.option_strings and set(action.option_strings) <= skip:
            continue
        out.append(".TP\n" + _invocation(action) + "\n" + roff(_help(parser, action) or "(no description)"))
    return out


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().strip()
    usage = usage[len("usage: ") :] if usage.startswith("usage: ") else usage
    return ".nf\n" + roff(" ".join(usage.split())) + "\n.fi"


def _exit_status(prog: str) -> str:
    """EXIT STATUS from staticpodd.errors (every error class with its code), so it cannot drift."""
    try:
        errors = importlib.import_module("staticpodd.errors")
    except ImportError as exc:
        raise GenError(f"cannot import staticpodd.errors: {exc}") from exc
    by_status: dict[int, list[str]] = {}
    seen: set[type] = set()
    todo = [errors.StaticpodError]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        by_status.setdefault(int(cls.exit_status), []).append(str(cls.code))
    by_status.setdefault(0, []).append("ok")
    by_status.setdefault(2, []).append("usage")
    lines = []
    for status in sorted(by_status):
        codes = ", ".join(sorted(set(by_status[status])))
        lines.append(f".TP\n.B {status}\n{roff(codes)}")
    note = (
        "With \\fB\\-\\-json\\fR, the error object carries the code named here."
        if prog == "staticpodctl"
        else "Status 78 (EX_CONFIG): the configuration was refused; systemd does not restart the daemon."
    )
    return ".SH EXIT STATUS\n" + "\n".join(lines) + "\n.PP\n" + note + "\n"


def _doc(name: str) -> str:
    """The text of ``docs/reference/<name>``; GenError when it is missing (never an empty page)."""
    path = DOCS / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GenError(f"cannot read {path}: {exc.strerror or exc} (the man pages are made from it)") from exc


def _first_sh_block(markdown: str) -> str:
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```sh":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            return "\n".join(lines[i + 1 : end])
    raise GenError("no ```sh block to take the EXAMPLES from")


def _examples(name: str) -> str:
    block = _first_sh_block(_doc(name))
    return ".PP\nEach command runs as written on a sandbox node in the project's tests.\n.PP\n.RS 4\n.nf\n" + \
        roff(block) + "\n.fi\n.RE"


def _inline(text: str) -> str:
    """Markdown inline markup to roff: `code` and **bold** in bold, [text](link) as text."""
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    parts = re.split(r"(`[^`]+`|\*\*[^*]+\*\*)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append("\\fB" + roff(part[1:-1]) + "\\fR")
        elif part.startswith("**") and part.endswith("**"):
            out.append("\\fB" + roff(part[2:-2]) + "\\fR")
        else:
            out.append(roff(part))
    return "".join(out)


def markdown_to_roff(markdown: str) -> str:
    """The body of a man page from a docs page: ``##`` headings, paragraphs, ``-`` lists, tables
    (one ``.TP`` item per row) and fenced blocks (``.nf``). The ``#`` title line is dropped (the
    page has its own NAME). Raises nothing: unknown markup passes through as text."""
    out: list[str] = []
    para: list[str] = []
    lines = markdown.splitlines()

    def flush() -> None:
        if para:
            out.append(".PP\n" + _inline(" ".join(para)))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if s.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append(".PP\n.RS 4\n.nf\n" + roff("\n".join(lines[i + 1 : j])) + "\n.fi\n.RE")
            i = j + 1
            continue
        if s.startswith("<!--"):
            i += 1
            continue
        if s.startswith("# "):
            flush()
        elif s.startswith("## "):
            flush()
            out.append(".SH " + roff(s[3:].replace("`", "").upper()))
        elif s.startswith("|"):
            flush()
            cells = [c.strip() for c in s.strip("|").split("|")]
            following = lines[i + 1].strip() if i + 1 < len(lines) else ""
            separator = following.startswith("|") and set(following) <= set("|-: ")
            if separator or set(s) <= set("|-: "):
                pass  # the header row (the .TP items say enough) and the separator row
            else:
                out.append(".TP\n" + _inline(cells[0]) + "\n" + _inline(" \u2014 ".join(c for c in cells[1:] if c)))
        elif s.startswith("- "):
            flush()
            para.append(s[2:])
            out.append(".IP \\(bu 2")
            while i + 1 < len(lines) and lines[i + 1].startswith("  ") and lines[i + 1].strip():
                i += 1
                para.append(lines[i].strip())
            out.append(_inline(" ".join(para)))
            para.clear()
        elif not s:
            flush()
        else:
            para.append(s)
        i += 1
    flush()
    return "\n".join(out)


def file_page(file_name: str, title: str, name_line: str, source: str, version: str, date: str) -> str:
    """A section-5 page (configuration, hooks) from its docs page."""
    body = markdown_to_roff(_doc(source))
    return "\n".join([
        f'.TH {title} 5 "{date}" "staticpodd {version}" "File Formats"',
        ".SH NAME", name_line, ".SH DESCRIPTION", body,
        ".SH SEE ALSO",
        "\\fBstaticpodctl\\fR(8), \\fBstaticpodd\\fR(8), "
        + ", ".join(f"\\fB{n.rsplit('.', 1)[0]}\\fR(5)" for n, *_ in FILE_PAGES if n != file_name),
    ]) + "\n"


def man_page(prog: str, parser: argparse.ArgumentParser, version: str, date: str) -> str:
    """The roff text of ``prog``(8) from its parser: synopsis, options, each verb with its options."""
    parser.prog = prog
    out = [
        f'.TH {prog.upper()} 8 "{date}" "staticpodd {version}" "System Administration"',
        ".SH NAME",
        f"{prog} \\- {roff(SUMMARY.get(prog, parser.description or prog))}",
        ".SH SYNOPSIS",
        _usage(parser),
    ]
    if parser.description:
        out += [".SH DESCRIPTION", roff(parser.description)]
    opts = _options(parser)
    common = frozenset(o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help", "--version"))
    if opts:
        out += [".SH OPTIONS", *opts]
        if common:
            out.append(".PP\nEvery command takes these options too; they are not repeated under each one.")
    sub = _subparsers(parser)
    if sub is not None:
        out.append(".SH COMMANDS")
        helps = {a.dest: (a.help or "") for a in sub._choices_actions}
        seen: set[int] = set()
        for name, subparser in sub.choices.items():
            if id(subparser) in seen:  # aliases
                continue
            seen.add(id(subparser))
            subparser.prog = f"{prog} {name}"
            aliases = [n for n, p in sub.choices.items() if p is subparser and n != name]
            title = f"{name} (alias: {', '.join(aliases)})" if aliases else name
            out += [f".SS {roff(title)}", _usage(subparser)]
            text = helps.get(name) or subparser.description or ""
            if subparser.description and subparser.description != text:
                text = f"{text}\n.PP\n{subparser.description}" if text else subparser.description
            if text:
                out.append(".PP\n" + roff(text).replace("\\&.PP", ".PP"))
            sub_opts = [o for o in _options(subparser, skip=common)
                        if not o.startswith(".TP\n\\fB\\-h\\fR")]
            if sub_opts:
                out += [".RS", *sub_opts, ".RE"]
    if parser.epilog:
        out += [".SH NOTES", roff(parser.epilog)]
    examples = EXAMPLES.get(prog)
    if examples:
        out += [".SH EXAMPLES", _examples(examples)]
    out.append(_exit_status(prog).rstrip("\n"))
    out += [".SH FILES", FILES.rstrip("\n")]
    if EXTRA.get(prog):
        out.append(EXTRA[prog].rstrip("\n"))
    others = [p for p, _ in DEFAULT_PARSERS if p != prog]
    see_also = ", ".join([f"\\fB{p}\\fR(8)" for p in others]
                         + [f"\\fB{name.rsplit('.', 1)[0]}\\fR(5)" for name, *_ in FILE_PAGES])
    out += [
        ".SH SEE ALSO",
        f"{see_also}, \\fBsystemctl\\fR(1), \\fBjournalctl\\fR(1), \\fBkubelet\\fR(8)",
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# bash completion


def _option_words(parser: argparse.ArgumentParser) -> list[str]:
    words: list[str] = []
    for action in parser._actions:
        if action.help != argparse.SUPPRESS:
            words.extend(o for o in action.option_strings if o.startswith("--") or len(o) == 2)
    return words


def _value_cases(parser: argparse.ArgumentParser) -> list[str]:
    """``case $prev`` arms for options that take a value: their choices, file names for paths,
    nothing for other values (durations, numbers). Optional values (``nargs="?"``) get no arm."""
    arms = []
    for a in parser._actions:
        if not a.option_strings or a.nargs in (0, "?") or a.help == argparse.SUPPRESS:
            continue
        pattern = "|".join(a.option_strings)
        hint = f"{a.dest} {a.metavar or ''}".lower()
        if a.choices:
            words = _sh_words(map(str, a.choices))
            arms.append(f"{pattern}) COMPREPLY=($(compgen -W '{words}' -- \"$cur\")); return ;;")
        elif any(w in hint for w in ("file", "path", "dir", "editor")):
            arms.append(f'{pattern}) COMPREPLY=($(compgen -f -- "$cur")); return ;;')
        else:
            arms.append(f"{pattern}) return ;;")
    return arms


def _positional_kinds(parser: argparse.ArgumentParser) -> str:
    kinds = []
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        if action.choices:
            kinds.append("choices:" + " ".join(map(str, action.choices)))
        elif action.dest in ("component", "components") or (action.metavar or "").upper() == "COMPONENT":
            kinds.append("component")
        else:
            kinds.append("file")
    return kinds[0] if kinds else "none"


def _sh_words(words: Iterable[str]) -> str:
    return " ".join(sorted(set(words)))


def completion(prog: str, parser: argparse.ArgumentParser) -> str:
    """A bash completion script for ``prog``: verbs, each verb's options, component names."""
    sub = _subparsers(parser)
    verbs = dict(sub.choices) if sub is not None else {}
    fn = "_" + prog.replace("-", "_")
    lines = [
        f"# bash completion for {prog} -- generated by packaging/gen-docs.py from its argparse",
        "# parser at build time; do not edit.",
        "",
        f"{fn}_components()",
        "{",
        "    # Component names: live manifests and parked ones (file stems), under --root and",
        "    # --manifest-dir when they appear on the command line.",
        "    local root=/ mdir='' i w",
        "    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do",
        '        w=${COMP_WORDS[i]}',
        '        case $w in',
        '            --root) root=${COMP_WORDS[i+1]} ;;',
        '            --root=*) root=${w#--root=} ;;',
        '            --manifest-dir) mdir=${COMP_WORDS[i+1]} ;;',
        '            --manifest-dir=*) mdir=${w#--manifest-dir=} ;;',
        "        esac",
        "    done",
        '    [[ -n $mdir ]] || mdir=${root%/}/etc/kubernetes/manifests',
        "    local f names=()",
        '    for f in "$mdir"/* "$mdir"/.staticpodd/parked/*; do',
        '        [[ -f $f ]] || continue',
        "        f=${f##*/}",
        "        case $f in",
        "            *.yaml) f=${f%.yaml} ;; *.yml) f=${f%.yml} ;;",
        "            *.json) f=${f%.json} ;; *.manifest) f=${f%.manifest} ;;",
        "        esac",
        '        names+=("$f")',
        "    done 2>/dev/null",
        '    printf "%s\\n" "${names[@]}"',
        "}",
        "",
        f"{fn}()",
        "{",
        "    local cur prev verb='' i",
        "    COMPREPLY=()",
        '    cur=${COMP_WORDS[COMP_CWORD]}',
        '    prev=${COMP_WORDS[COMP_CWORD-1]}',
        f"    local verbs='{_sh_words(verbs)}'",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        if [[ " $verbs " == *" ${COMP_WORDS[i]} "* ]]; then verb=${COMP_WORDS[i]}; break; fi',
        "    done",
        '    case $prev in',
        "        --root|--manifest-dir|--config)",
        '            COMPREPLY=($(compgen -d -- "$cur")); return ;;',
        "    esac",
        '    case $verb in',
    ]
    seen: set[int] = set()
    for subparser in verbs.values():
        if id(subparser) in seen:
            continue
        seen.add(id(subparser))
        names = [n for n, p in verbs.items() if p is subparser]
        kind = _positional_kinds(subparser)
        arms = _value_cases(subparser)
        lines.append(f"        {'|'.join(names)})")
        if arms:
            lines.append("            case $prev in")
            lines += [f"                {arm}" for arm in arms]
            lines.append("            esac")
        opt_words = _sh_words(_option_words(subparser))
        lines.append(
            f"            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W '{opt_words}'"
            ' -- "$cur")); return; fi'
        )
        if kind == "component":
            lines.append(f'            COMPREPLY=($(compgen -W "$({fn}_components)" -- "$cur")) ;;')
        elif kind.startswith("choices:"):
            lines.append(f"            COMPREPLY=($(compgen -W '{kind[8:]}' -- \"$cur\")) ;;")
        elif kind == "file":
            lines.append('            COMPREPLY=($(compgen -f -- "$cur")) ;;')
        else:
            lines.append("            ;;")
    lines += [
        "        '')",
        f"            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W '{_sh_words(_option_words(parser))}'"
        ' -- "$cur")); return; fi',
        '            COMPREPLY=($(compgen -W "$verbs" -- "$cur")) ;;',
        "    esac",
        "}",
        f"complete -F {fn} {prog}",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--man-dir", type=Path, help="write <prog>.8 for every parser here")
    ap.add_argument("--completion", type=Path, help="write the bash completion of staticpodctl here")
    ap.add_argument(
        "--parser",
        action="append",
        metavar="PROG=MODULE:FUNCTION",
        help="parsers to document (default: staticpodctl and staticpodd)",
    )
    args = ap.parse_args(argv)
    specs = [tuple(p.split("=", 1)) for p in args.parser] if args.parser else list(DEFAULT_PARSERS)
    try:
        import staticpodd

        version = staticpodd.__version__
        parsers = [(prog, load_parser(spec)) for prog, spec in specs]
    except (GenError, ImportError) as exc:
        print(f"gen-docs: {exc}", file=sys.stderr)
        print("gen-docs: the man pages and completion are generated from the argparse parsers; "
              "the build cannot go on without them.", file=sys.stderr)
        return 1
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date = time.strftime("%Y-%m-%d", time.gmtime(epoch))
    try:
        if args.man_dir:
            args.man_dir.mkdir(parents=True, exist_ok=True)
            for prog, parser in parsers:
                page = man_page(prog, parser, version, date)
                (args.man_dir / f"{prog}.8").write_text(page, encoding="utf-8")
            for file_name, title, name_line, source in FILE_PAGES:
                page = file_page(file_name, title, name_line, source, version, date)
                (args.man_dir / file_name).write_text(page, encoding="utf-8")
        if args.completion:
            prog, parser = parsers[0]
            args.completion.parent.mkdir(parents=True, exist_ok=True)
            args.completion.write_text(completion(prog, parser), encoding="utf-8")
    except GenError as exc:
        print(f"gen-docs: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
