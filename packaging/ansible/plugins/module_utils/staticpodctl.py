# -*- coding: utf-8 -*-
# Copyright: staticpodd authors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Run the node's ``staticpodctl`` for the staticpodd.node modules.

Every module of the collection goes through :class:`Staticpodctl`: it finds the executable
(``staticpodctl_path`` or ``PATH``), checks that it is at least :data:`MIN_VERSION`
(``staticpodctl --version``), runs one verb with ``--json`` and returns the one JSON object
staticpodctl prints (``format_version`` 1: ``command``, ``ok``, the verb's fields, or ``error``
with a stable ``code``; README "Exit codes" and "Config management"). Nothing staticpodctl does is
done here a second time: no file in the manifest directory is read or written by the modules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time
from datetime import datetime, timezone

#: The oldest staticpodctl these modules can drive: ``apply --json`` with Ansible's diff form,
#: ``park``/``unpark`` error codes ``already-parked``, ``needs-force``, ``not-parked``, ``--wait``.
MIN_VERSION = (0, 1, 0)

#: The ``--json`` format this collection reads (staticpodd.cli.FORMAT_VERSION).
FORMAT_VERSION = 1

#: Options every module of the collection takes (the doc fragment ``staticpodd.node.staticpodctl``).
COMMON_ARGS = dict(
    staticpodctl_path=dict(type="path"),
    root=dict(type="path"),
    manifest_dir=dict(type="path"),
    config=dict(type="path"),
    lock_timeout=dict(type="float"),
)

#: The ``--wait`` options of park, unpark and apply (the doc fragment ``staticpodd.node.wait``).
WAIT_ARGS = dict(
    wait=dict(type="bool", default=False),
    wait_timeout=dict(type="str"),
    node_name=dict(type="str"),
    crictl=dict(type="path"),
    runtime_endpoint=dict(type="str"),
)

#: staticpodctl flags its hints name, and the module options that pass them.
OPTION_FOR_FLAG = (("--rename", "rename=true"), ("--force", "force=true"), ("--unpark", "unpark=true"))

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


class StaticpodctlError(Exception):
    """staticpodctl answered ``ok: false``. ``reply`` is its whole JSON object, ``error`` the
    ``error`` member (``code``, ``message``, ``hint``, ``path``, ``line``, ``column``, ``field``,
    ``findings``), ``rc`` its exit status."""

    def __init__(self, rc, reply):
        self.rc = rc
        self.reply = reply
        self.error = reply.get("error") or {}
        self.code = self.error.get("code") or "error"
        super(StaticpodctlError, self).__init__(self.error.get("message") or "staticpodctl failed")


def format_finding(finding, source=None):
    """One validator finding as ``file:line:column: severity[code] field: message``.

    ``finding``: a dict from staticpodctl's ``findings`` (``path``, ``line``, ``column``,
    ``field``, ``severity``, ``code``, ``message``, ``hint``). ``source``: the name to show
    instead of ``-`` (the manifest was sent on stdin).
    """
    path = finding.get("path") or ""
    if path == "-" and source:
        path = source
    loc = path
    if finding.get("line") is not None:
        loc += ":%s" % finding["line"]
        if finding.get("column") is not None:
            loc += ":%s" % finding["column"]
    text = "%s[%s]" % (finding.get("severity") or "error", finding.get("code") or "?")
    if finding.get("field"):
        text += " %s" % finding["field"]
    text += ": %s" % (finding.get("message") or "")
    if finding.get("hint"):
        text += " (hint: %s)" % finding["hint"]
    return "%s: %s" % (loc, text) if loc else text


def error_message(exc, source=None):
    """A failure message for ``exc`` (:class:`StaticpodctlError`): the location and code of the
    error, each error finding on its own line, and the hint."""
    err = exc.error
    findings = [f for f in err.get("findings") or [] if (f.get("severity") or "error") == "error"]
    if findings:
        head = "%s; nothing was changed" % (err.get("message") or "invalid manifest")
        lines = [format_finding(f, source) for f in findings]
        return "staticpodctl refused the manifest [%s]: %s:\n%s" % (exc.code, head, "\n".join(lines))
    loc = err.get("path") or ""
    if loc == "-" and source:
        loc = source
    if loc and err.get("line") is not None:
        loc += ":%s" % err["line"]
    msg = "staticpodctl %s failed [%s]: " % (exc.reply.get("command") or "", exc.code)
    if loc:
        msg += "%s: " % loc
    if err.get("field"):
        msg += "%s: " % err["field"]
    msg += err.get("message") or ""
    if err.get("hint"):
        msg += " (hint: %s)" % err["hint"]
        options = [opt for flag, opt in OPTION_FOR_FLAG if flag in err["hint"]]
        if options:
            msg += " (module option: %s)" % ", ".join(options)
    return msg


def parse_iso(text):
    """``2026-11-30T06:00:00Z`` or ``2026-11-30T06:00Z`` (ISO 8601; no zone = UTC, as
    ``staticpodctl park --until`` reads it) -> epoch seconds, or None when it cannot be read."""
    if not text:
        return None
    value = str(text).strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text):
    """``90s``, ``30m``, ``1h30m``, ``1d`` or bare seconds ``300`` -> seconds (float), or None when
    it cannot be read. The same forms ``staticpodctl park --for`` reads; used only to compare a
    requested deadline with the one a park already has (staticpodctl itself parses the option)."""
    value = str(text).strip().lower()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION_RE.finditer(value):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total if pos == len(value) and pos else None


class Staticpodctl:
    """The node's staticpodctl, driven by one module invocation.

    ``module``: the AnsibleModule (its params hold :data:`COMMON_ARGS`). Raises nothing: a missing
    or too old staticpodctl, or an answer that is not its JSON, ends the task with ``fail_json``.
    """

    def __init__(self, module):
        self.module = module
        self.last_status = None  # the newest status reply (status())
        self.path = self._find()
        self.version = self._version()

    def _find(self):
        path = self.module.params.get("staticpodctl_path")
        if path:
            import os

            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                self.module.fail_json(
                    msg="staticpodctl_path %s is not an executable file on this node; install the staticpodd "
                    "package (it ships /usr/bin/staticpodctl) or fix staticpodctl_path" % path
                )
            return path
        found = self.module.get_bin_path("staticpodctl", required=False)
        if not found:
            self.module.fail_json(
                msg="staticpodctl was not found on this node's PATH (%s); install the staticpodd package (it ships "
                "/usr/bin/staticpodctl) or set staticpodctl_path" % self._path_env()
            )
        return found

    @staticmethod
    def _path_env():
        import os

        return os.environ.get("PATH", "")

    def _version(self):
        rc, out, err = self.module.run_command([self.path, "--version"], check_rc=False)
        text = (out or "") + (err or "")
        match = _VERSION_RE.search(text)
        if rc != 0 or not match:
            self.module.fail_json(
                msg="%s --version did not answer with a version (exit %s): %s" % (self.path, rc, text.strip()[:300])
            )
        found = tuple(int(x) for x in match.groups())
        if found < MIN_VERSION:
            self.module.fail_json(
                msg="staticpodctl %s at %s is older than the staticpodd.node collection needs (>= %s); upgrade the "
                "staticpodd package on this node" % (".".join(map(str, found)), self.path, ".".join(map(str, MIN_VERSION))),
                staticpodctl_version=".".join(map(str, found)),
            )
        return ".".join(map(str, found))

    def common_args(self):
        """``--root`` … for the options every module takes."""
        p = self.module.params
        args = []
        for key, flag in (("root", "--root"), ("manifest_dir", "--manifest-dir"), ("config", "--config")):
            if p.get(key):
                args += [flag, p[key]]
        if p.get("lock_timeout") is not None:
            args += ["--lock-timeout", "%g" % p["lock_timeout"]]
        return args

    def wait_args(self):
        """``--wait[=T] --node-name … --crictl … --runtime-endpoint …`` when ``wait`` is on."""
        p = self.module.params
        if not p.get("wait"):
            return []
        args = ["--wait=%s" % p["wait_timeout"]] if p.get("wait_timeout") else ["--wait"]
        for key, flag in (("node_name", "--node-name"), ("crictl", "--crictl"), ("runtime_endpoint", "--runtime-endpoint")):
            if p.get(key):
                args += [flag, p[key]]
        return args

    def run(self, verb, args, data=None, ok_statuses=(0,)):
        """Run ``staticpodctl VERB ARGS --json`` (plus :meth:`common_args`); ``data``: text sent on stdin.

        Returns the reply (dict) when ``ok`` is true and the exit status is in ``ok_statuses``.
        Raises :class:`StaticpodctlError` when staticpodctl answered ``ok: false``. An answer that
        is not one JSON object of ``format_version`` 1 ends the task (fail_json) with its output.
        """
        cmd = [self.path, verb] + list(args) + self.common_args() + ["--json"]
        kwargs = {}
        if data is not None:
            kwargs = dict(data=data, binary_data=True)
        started = time.time()
        rc, out, err = self.module.run_command(cmd, check_rc=False, **kwargs)
        reply = None
        for line in reversed((out or "").splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    reply = json.loads(line)
                except ValueError:
                    reply = None
                break
        if not isinstance(reply, dict) or "ok" not in reply:
            self.module.fail_json(
                msg="staticpodctl %s did not answer with its JSON (exit %s)" % (verb, rc),
                cmd=cmd, rc=rc, stdout=out, stderr=err,
            )
        if reply.get("format_version") != FORMAT_VERSION:
            self.module.fail_json(
                msg="staticpodctl %s answered format_version %r; this collection reads %d (upgrade the collection)"
                % (verb, reply.get("format_version"), FORMAT_VERSION),
                cmd=cmd, rc=rc,
            )
        reply["_rc"] = rc
        reply["_stderr"] = err
        reply["_seconds"] = round(time.time() - started, 3)
        if not reply.get("ok") or rc not in ok_statuses:
            raise StaticpodctlError(rc, reply)
        return reply

    def status(self):
        """``staticpodctl status --json``: ``components`` (rows with ``state`` live | parked |
        missing | removed, ``version``, ``digest``, ``drift``, ``stray``, ``parked``: the park
        record or None), ``daemon``, ``interrupted``, ``manifest_dir``."""
        try:
            self.last_status = self.run("status", [])
        except StaticpodctlError as exc:
            self.fail(exc)
        return self.last_status

    def component(self, name):
        """The status row of component ``name`` (also matched by file name), or None."""
        for row in self.status().get("components") or []:
            if name in (row.get("component"), row.get("file_name")):
                return row
        return None

    def fail(self, exc, source=None, **result):
        """End the task for :class:`StaticpodctlError` ``exc``, with its code and the reply."""
        reply = dict(exc.reply)
        for key in ("_rc", "_stderr", "_seconds", "diff"):  # the manifest's bytes: in ``diff`` when asked for
            reply.pop(key, None)
        out = dict(result)
        out.setdefault("changed", bool(reply.get("changed")))
        out.update(
            msg=error_message(exc, source),
            code=exc.code,
            error=exc.error,
            rc=exc.rc,
            staticpodctl=reply,
            stderr=exc.reply.get("_stderr") or "",
        )
        self.module.fail_json(**out)
