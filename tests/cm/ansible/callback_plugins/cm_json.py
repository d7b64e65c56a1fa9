"""Minimal JSON stdout callback for the config-management tests (offline, no collections).

ansible-core does not ship a JSON stdout callback (ansible.posix.json lives in a Galaxy
collection), so this one prints, at the end of the run, one JSON object:
``{"tasks": [{"task", "host", "status": ok|changed|failed|skipped|unreachable, "result"}],
"stats": {host: {"ok", "changed", "failures", "skipped", "unreachable"}}}`` plus every
``--diff`` diff under ``"diffs"``. Nothing else is written to stdout.
"""

from __future__ import annotations

import json

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: cm_json
    type: stdout
    short_description: one JSON object with every task result (staticpodd tests)
    description: prints task results and stats as JSON at the end of the playbook
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "cm_json"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tasks = []
        self.diffs = []

    def _add(self, result, status):
        res = dict(result._result)
        res.pop("invocation", None)
        self.tasks.append(
            {
                "task": result.task_name or result._task.get_name(),
                "host": result._host.get_name(),
                "status": status,
                "result": res,
            }
        )

    def v2_runner_on_ok(self, result):
        self._add(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._add(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._add(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._add(result, "unreachable")

    def v2_on_file_diff(self, result):
        diff = result._result.get("diff")
        if diff:
            self.diffs.append({"task": result.task_name or result._task.get_name(), "diff": diff})

    def v2_playbook_on_stats(self, stats):
        hosts = {h: stats.summarize(h) for h in sorted(stats.processed)}
        self._display.display(json.dumps({"tasks": self.tasks, "diffs": self.diffs, "stats": hosts}, default=str))
