"""Adversarial: staticpodctl edit with odd editors."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("editor", ["/nonexistent/editor", "rm"])
def test_edit_editor_missing_or_copy_removed(kubeadm, ctl_proc, editor):
    before = kubeadm.snapshot()
    p = ctl_proc("edit", "kube-scheduler", "--json", env={"EDITOR": editor, "VISUAL": ""})
    assert "Traceback" not in p.stderr, p.stderr
    obj = json.loads(p.stdout.splitlines()[-1])
    assert obj["ok"] is False and obj["error"]["code"] != "internal"
    assert p.returncode == 1
    after = kubeadm.snapshot()
    assert {k: v for k, v in after.items() if not k.startswith(".")} == \
        {k: v for k, v in before.items() if not k.startswith(".")}
