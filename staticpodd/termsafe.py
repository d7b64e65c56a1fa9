"""Text for a terminal: control characters from file names or manifests shown escaped.

File names are the hostile part: a name may hold a newline (``printf 'x\\nstaticpodd: all good'``)
that would forge a line of output. :func:`shown_name` escapes every control character in a name
(newline and tab too, as ``ls -b`` does); :func:`note_names` registers names seen on disk so
that :func:`safe` escapes them wherever they appear in a message, whoever built the message.
"""

from __future__ import annotations

from collections.abc import Iterable

_CONTROL = {c: f"\\x{c:02x}" for c in range(32) if c not in (9, 10)}
_CONTROL[127] = "\\x7f"


_NAME_CONTROL = {c: f"\\x{c:02x}" for c in range(32)}
_NAME_CONTROL.update({9: "\\t", 10: "\\n", 13: "\\r", 127: "\\x7f"})

#: File names with control characters seen on disk in this process (see :func:`note_names`).
_hostile: set[str] = set()


def has_control(name: str) -> bool:
    """Whether ``name`` holds a control character (C0, DEL): it must never reach a screen raw."""
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in name)


def shown_name(name: str) -> str:
    """``name`` for one line of text: every control character escaped (``\\n``, ``\\t``, ``\\r``,
    else ``\\xNN``) and non-UTF-8 bytes as ``\\xNN``. Structured fields (JSON, journal fields)
    keep the raw name."""
    return printable_name(name).translate(_NAME_CONTROL)


def note_names(names: Iterable[str]) -> None:
    """Remember the names among ``names`` that hold control characters, so that :func:`safe`
    escapes them in any text (a message built by code that did not know the name was hostile)."""
    for n in names:
        if has_control(n):
            for form in (n, n.rsplit(".", 1)[0]):  # the file name, and its stem (the component)
                if has_control(form):
                    _hostile.add(form)
                    _hostile.add(printable_name(form))


def safe(text: str) -> str:
    """``text`` with control characters (ESC, CR, NUL …; not tab or newline) escaped as ``\\xNN``,
    so a hostile file name cannot rewrite the operator's screen; a file name registered with
    :func:`note_names` is escaped whole, its newlines and tabs too, so it cannot forge a line.
    JSON output needs no such care."""
    for n in sorted(_hostile, key=len, reverse=True):
        if n in text:
            text = text.replace(n, shown_name(n))
    return text.translate(_CONTROL)


def one_line(text: str) -> str:
    """``text`` as a single line: every control character escaped, newline and tab included (for
    the journal's MESSAGE, which is one line by contract)."""
    return safe(text).translate(_NAME_CONTROL)


def shell_word(name: str) -> str:
    """``name`` as a shell word in a hint: quoted when needed, escaped when it holds control
    characters, and after ``--`` when it starts with ``-`` (a component named ``--help`` must
    not read as an option: ``staticpodctl unpark -- --help``)."""
    import shlex

    if has_control(name):  # bash/zsh ANSI-C quoting, so the hint can be pasted as it is shown
        body = printable_name(name).replace("\\", "\\\\").replace("'", "\\'").translate(_NAME_CONTROL)
        word = f"$'{body}'"
    else:
        word = shlex.quote(printable_name(name))
    return f"-- {word}" if name.startswith("-") else word


def printable_name(value: str) -> str:
    """``value`` made valid UTF-8: bytes of a non-UTF-8 file name (surrogate-escaped by
    ``os.listdir``) are shown as ``\\xNN``, so it can be printed, logged or put in JSON."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that did not come from a byte
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(obj: object) -> object:
    """``obj`` (dicts, lists, str …) with every str made valid UTF-8 by :func:`printable_name`,
    so ``json.dumps`` never writes lone-surrogate escapes (``"\\udcff"``) that strict JSON
    parsers reject. Returns the same object when nothing needed changing."""
    if isinstance(obj, str):
        return printable_name(obj)
    if isinstance(obj, dict):
        return {json_safe(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
