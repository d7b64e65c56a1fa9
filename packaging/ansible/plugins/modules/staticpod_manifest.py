#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: staticpodd authors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: staticpod_manifest
short_description: Put a static pod manifest in the kubelet's directory, validated, versioned and swapped atomically
version_added: 1.0.0
description:
  - Applies a manifest to one component of the kubelet's static pod directory (C(staticPodPath)) with the node's
    C(staticpodctl apply). The bytes are validated with the kubelet's own rules first, recorded as a new version,
    and renamed into place atomically; nothing reaches the kubelet when they are invalid.
  - C(changed) only when the bytes differ from the current file; an unchanged file is not touched (no rename, no
    chmod, no mtime change; the kubelet reacts to those too).
  - Check mode asks C(staticpodctl apply --check) and changes nothing; diff mode returns the current and the new
    bytes (C(before)/C(after)).
  - O(state=absent) takes the component out of the directory for good; its bytes stay in the version store
    (C(staticpodctl history), C(staticpodctl rollback) puts it back).
  - A component that is parked (M(staticpodd.node.staticpod_park)) stays parked; its parked copy is updated, unless
    O(unpark=true).
author:
  - staticpodd authors (@staticpodd)
extends_documentation_fragment:
  - staticpodd.node.staticpodctl
  - staticpodd.node.staticpodctl.wait
attributes:
  check_mode:
    description: Asks C(staticpodctl apply --check); nothing is written, no version is recorded.
    support: full
  diff_mode:
    description: Returns the current and the new bytes as C(before)/C(after).
    support: full
options:
  name:
    description:
      - The component (the file stem in the directory, e.g. C(kube-scheduler) for C(kube-scheduler.yaml)), or its
        file name.
    type: str
    required: true
    aliases: [component]
  src:
    description:
      - Path of the manifest B(on the managed node), as C(kubernetes.core.k8s) reads O(src).
      - To send a file or template from the controller, use O(content) with the C(ansible.builtin.template) or
        C(ansible.builtin.file) lookup (C(lstrip)/C(rstrip) off; the bytes are compared exactly).
      - Mutually exclusive with O(content); one of them is required with O(state=present).
    type: path
  content:
    description:
      - The manifest itself (text). Sent to staticpodctl on stdin; it is never written to a temporary file.
      - Mutually exclusive with O(src).
    type: str
  state:
    description:
      - V(present) applies the manifest.
      - V(absent) parks the component and discards the parked copy (C(staticpodctl park), then C(unpark --discard)),
        so the kubelet stops the pod and the directory holds no file for it; its versions stay in history.
    type: str
    choices: [present, absent]
    default: present
  reason:
    description:
      - Why; recorded with the version and logged to the journal. Default C(ansible).
    type: str
  validate:
    description:
      - staticpodctl always validates a manifest before it can reach the kubelet (an invalid file kills the running
        pod at the kubelet's next relist, about 20 s); that gate cannot be turned off.
      - V(true) also makes every validator warning on the new bytes a task warning.
      - V(false) is refused with an error, so that a playbook written for C(ansible.builtin.copy)'s C(validate) does
        not believe it skipped the check.
    type: bool
    default: true
  rollback_on_failure:
    description:
      - When the O(wait) fails, put the previous version back atomically and record why
        (C(--rollback-on-failure)); implies O(wait).
      - Default is the configuration's C(wait.rollback_on_failure).
    type: bool
  rename:
    description:
      - Allow the new manifest to define another pod (C(metadata.name)/C(namespace)) than the current one (C(--rename)).
    type: bool
    default: false
  unpark:
    description:
      - When the component is parked, also unpark it (C(--unpark)); without it the parked copy is updated and the
        component stays parked.
    type: bool
    default: false
  force:
    description:
      - With O(state=absent), take out even a component the kubelet's own connection to the apiserver depends on
        (local kube-apiserver, etcd, an API load balancer), as C(staticpodctl park --force).
    type: bool
    default: false
notes:
  - Runs C(staticpodctl) on the managed node, which takes the same lock as the staticpodd daemon; the daemon need not
    run.
  - >-
    A failure carries staticpodctl's stable error code in RV(code) (C(invalid-manifest), C(hook-failed),
    C(wait-timeout), C(lock-timeout), ...) and, for an invalid manifest, every finding in C(msg) as
    C(file:line:column: error[code] field: message).
"""

EXAMPLES = r"""
- name: kube-scheduler from a template on the controller
  staticpodd.node.staticpod_manifest:
    name: kube-scheduler
    content: "{{ lookup('ansible.builtin.template', 'kube-scheduler.yaml.j2') }}"
    reason: "CHG-1234 scheduler flags"
    wait: true
    wait_timeout: 5m
    rollback_on_failure: true

- name: a manifest already on the node
  staticpodd.node.staticpod_manifest:
    name: kube-apiserver
    src: /etc/staticpodd/desired/kube-apiserver.yaml

- name: retire a component (its versions stay in history)
  staticpodd.node.staticpod_manifest:
    name: old-haproxy
    state: absent
    reason: replaced by kube-vip
"""

RETURN = r"""
component:
  description: The component acted on.
  returned: always
  type: str
  sample: kube-scheduler
file_name:
  description: Its file name in the directory.
  returned: when staticpodctl named it
  type: str
  sample: kube-scheduler.yaml
version:
  description:
    - The version now in place (C(seq)), the one this change recorded or, when nothing changed, the current one.
    - C(null) in check mode when it would change, and when the bytes in place were never recorded.
  returned: always
  type: int
  sample: 3
digest:
  description: sha256 of the bytes now in place (in check mode, of the bytes that would be).
  returned: always
  type: str
  sample: 5043c3459691f67fed0ea7f5ed92ca2bd8e1191e3df45fa1bc1c1a0c46bfb65a
previous_digest:
  description: sha256 of the bytes before.
  returned: when there were any
  type: str
location:
  description: Where the bytes are, V(live) or V(parked).
  returned: with state=present
  type: str
  sample: live
diff:
  description: The current and the new bytes (C(before), C(after), C(before_header), C(after_header)).
  returned: in diff mode, when something changed or would change
  type: dict
warnings_found:
  description: Validator and post-hook warnings staticpodctl reported.
  returned: always
  type: list
  elements: dict
wait:
  description: What O(wait) saw (C(state) V(running), V(stopped), V(unhealthy) ...; C(details) with the config.hash).
  returned: when O(wait) ran
  type: dict
rollback:
  description: The automatic rollback after a failed O(wait).
  returned: when it ran
  type: dict
code:
  description: staticpodctl's stable error code.
  returned: on failure
  type: str
  sample: invalid-manifest
error:
  description: staticpodctl's error object (C(code), C(message), C(hint), C(path), C(line), C(column), C(field), C(findings)).
  returned: on failure
  type: dict
staticpodctl:
  description: staticpodctl's JSON reply, without the bytes of the manifest (see RV(diff)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.staticpodd.node.plugins.module_utils.staticpodctl import (
    COMMON_ARGS,
    WAIT_ARGS,
    Staticpodctl,
    StaticpodctlError,
    format_finding,
)

DEFAULT_REASON = "ansible"


def _clean(reply):
    """staticpodctl's reply without the module's own keys, and without the manifest's bytes (its
    ``diff``: the old and new texts), which the task returns as ``diff`` in diff mode only; 500
    nodes' results must not carry every manifest twice."""
    out = dict(reply)
    for key in ("_rc", "_stderr", "_seconds", "diff"):
        out.pop(key, None)
    return out


def _result(module, reply):
    """The task result from an apply reply (ok or failed-after-the-swap)."""
    res = dict(
        changed=bool(reply.get("changed")),
        component=reply.get("component") or module.params["name"],
        file_name=reply.get("file_name"),
        version=reply.get("version"),
        digest=reply.get("digest"),
        previous_digest=reply.get("previous_digest"),
        location=reply.get("location"),
        msg=reply.get("msg") or "",
        warnings_found=reply.get("warnings") or [],
        staticpodctl=_clean(reply),
    )
    for key in ("wait", "rollback"):
        if reply.get(key) is not None:
            res[key] = reply[key]
    diff = reply.get("diff")
    if module._diff and res["changed"] and isinstance(diff, dict):
        res["diff"] = dict((k, diff.get(k, "")) for k in ("before", "after", "before_header", "after_header"))
    return res


def _warn(module, reply, source):
    if not module.params["validate"]:
        return
    for w in reply.get("warnings") or []:
        if isinstance(w, dict):
            module.warn(format_finding(dict(w, severity=w.get("severity") or "warning"), source))


def present(module, ctl):
    p = module.params
    source = p["src"] or "content"
    args = ["apply", p["src"] or "-", "--as", p["name"], "--reason", p["reason"] or DEFAULT_REASON]
    data = None
    if p["content"] is not None:
        data = p["content"].encode("utf-8")
    if module.check_mode:
        args.append("--check")
    else:
        if p["unpark"]:
            args.append("--unpark")
        args += ctl.wait_args()
        if p["rollback_on_failure"] is True:
            args.append("--rollback-on-failure")
        elif p["rollback_on_failure"] is False:
            args.append("--no-rollback-on-failure")
    if p["rename"]:
        args.append("--rename")
    if module.check_mode and p["unpark"]:
        args.append("--unpark")
    try:
        reply = ctl.run(args[0], args[1:], data=data)
    except StaticpodctlError as exc:
        extra = {}
        if exc.reply.get("changed"):  # the swap happened; the wait (or a later step) failed
            extra = _result(module, exc.reply)
            extra.pop("msg", None)
        ctl.fail(exc, source=source, **extra)
    _warn(module, reply, source)
    module.exit_json(**_result(module, reply))


def absent(module, ctl):
    p = module.params
    row = ctl.component(p["name"])
    reason = p["reason"] or DEFAULT_REASON
    if row is None or row.get("state") == "removed":
        module.exit_json(changed=False, component=p["name"], version=None, digest=None,
                         msg="%s: not in the directory" % p["name"], warnings_found=[], staticpodctl={})
    comp = row["component"]
    res = dict(changed=True, component=comp, file_name=row.get("file_name"), version=None,
               digest=None, previous_digest=row.get("digest"), warnings_found=[])
    if module._diff:
        before = ""
        try:
            shown = ctl.run("show", [comp])
            before = shown.get("content") or "" if shown.get("encoding") == "utf-8" else "(binary)"
        except StaticpodctlError:
            before = ""
        res["diff"] = dict(before=before, after="", before_header="%s (%s)" % (comp, row.get("state")),
                           after_header="%s (absent)" % comp)
    if module.check_mode:
        res["msg"] = "%s: would take %s out of the directory (%s)" % (comp, row.get("file_name"), row.get("state"))
        res["staticpodctl"] = {}
        module.exit_json(**res)
    replies = []
    if row.get("state") == "live":
        park = ["--reason", reason] + (["--force"] if p["force"] else [])
        try:
            replies.append(ctl.run("park", [comp] + park))
        except StaticpodctlError as exc:
            if exc.code != "already-parked":  # parked meanwhile: discard below
                ctl.fail(exc, changed=False)
    try:
        replies.append(ctl.run("unpark", [comp, "--discard", "--reason", reason]))
    except StaticpodctlError as exc:
        if exc.code == "not-parked" and not replies:
            module.exit_json(changed=False, component=comp, msg="%s: not parked any more" % comp,
                             staticpodctl=_clean(exc.reply), warnings_found=[])
        ctl.fail(exc, changed=bool(replies))
    last = replies[-1]
    res.update(version=last.get("version"), msg=last.get("msg") or "", staticpodctl=_clean(last))
    module.exit_json(**res)


def main():
    argument_spec = dict(
        name=dict(type="str", required=True, aliases=["component"]),
        src=dict(type="path"),
        content=dict(type="str"),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        reason=dict(type="str"),
        validate=dict(type="bool", default=True),
        rollback_on_failure=dict(type="bool"),
        rename=dict(type="bool", default=False),
        unpark=dict(type="bool", default=False),
        force=dict(type="bool", default=False),
    )
    argument_spec.update(COMMON_ARGS)
    argument_spec.update(WAIT_ARGS)
    module = AnsibleModule(
        argument_spec=argument_spec,
        mutually_exclusive=[("src", "content")],
        required_if=[("state", "present", ("src", "content"), True)],
        supports_check_mode=True,
    )
    if not module.params["validate"]:
        module.fail_json(
            msg="validate=false is not supported: staticpodctl validates every manifest before it can reach the "
            "kubelet, and an invalid file kills the running pod at the kubelet's next relist (about 20 s); remove "
            "the option"
        )
    ctl = Staticpodctl(module)
    if module.params["state"] == "absent":
        absent(module, ctl)
    else:
        present(module, ctl)


if __name__ == "__main__":
    main()
