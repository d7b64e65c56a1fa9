#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: staticpodd authors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: staticpod_park
short_description: Park (stop) and unpark a static pod component, e.g. kube-scheduler, keeping its manifest
version_added: 1.0.0
description:
  - Parks a component with the node's C(staticpodctl park). Its manifest is renamed out of the kubelet's sight
    (into C(.staticpodd/parked/) on the same mount), recorded with who, why and until when, and the kubelet stops the
    pod at its next look. Unparks it with C(staticpodctl unpark); the same bytes go back to the same path, so the pod
    comes back with the same C(config.hash).
  - Idempotent. Parking a parked component is C(ok); unparking a live one is C(ok).
  - B(A different deadline on a parked component is refused), and the task fails with code C(deadline-differs).
    staticpodctl has no way to move a park's deadline without starting the pod, and unparking and parking again
    would start it for a moment. O(for) is measured from when the park began, to within a minute (so a rerun of the
    same task is C(ok)); O(until) must name the same second. Without O(for)/O(until) any park satisfies O(state=parked).
    To change a deadline, unpark first.
  - Check mode reads C(staticpodctl status) and reports what would change; nothing is changed. A refusal only the
    real run can see (C(needs-force), another file defining the same pod, a failing pre-hook) is not predicted.
author:
  - staticpodd authors (@staticpodd)
extends_documentation_fragment:
  - staticpodd.node.staticpodctl
  - staticpodd.node.staticpodctl.wait
attributes:
  check_mode:
    description: Judged from C(staticpodctl status); nothing is changed.
    support: full
  diff_mode:
    description: Returns the component's state before and after (C(live), C(parked)).
    support: full
options:
  name:
    description: The component (C(kube-scheduler)) or its file name.
    type: str
    required: true
    aliases: [component]
  state:
    description:
      - V(parked) takes it out of the kubelet's directory; V(unparked) puts it back.
    type: str
    choices: [parked, unparked]
    default: parked
  for:
    description:
      - Park for this long, then the staticpodd daemon unparks it (C(--for); C(90s), C(30m), C(1h30m), or seconds).
      - Measured from when the park began, also when the component is parked already.
      - Mutually exclusive with O(until).
    type: str
    aliases: [for_]
  until:
    description:
      - Park until this time (ISO 8601, e.g. C(2030-01-31T06:00Z); no zone means UTC), then the daemon unparks it.
    type: str
  reason:
    description: Why; recorded with the park and logged. Default C(ansible).
    type: str
  force:
    description:
      - Park even a component the kubelet's own connection to the apiserver depends on (local kube-apiserver, etcd,
        an API load balancer), or one file of a pod that another file also defines (C(--force)).
      - Without it such a park fails with code C(needs-force), and nothing is changed.
    type: bool
    default: false
notes:
  - With a deadline, the staticpodd daemon does the unpark; when it is not running the module warns (nothing unparks
    the component until it starts).
  - A failure carries staticpodctl's stable error code in RV(code) (C(needs-force), C(unknown-component),
    C(conflict), C(live-file-exists), C(hook-failed), C(wait-timeout), C(deadline-differs) ...).
"""

EXAMPLES = r"""
- name: stop kube-scheduler for an etcd defrag, at most 30 minutes
  staticpodd.node.staticpod_park:
    name: kube-scheduler
    for: 30m
    reason: etcd defrag CHG-42
    wait: true

- name: start it again and confirm it runs and passes its probes
  staticpodd.node.staticpod_park:
    name: kube-scheduler
    state: unparked
    wait: true
    wait_timeout: 2m
"""

RETURN = r"""
component:
  description: The component.
  returned: always
  type: str
  sample: kube-scheduler
state:
  description: Its state now (in check mode, the state it would have), V(parked) or V(live).
  returned: always
  type: str
park:
  description: The park record (C(since), C(until), C(actor), C(reason), C(digest)); null when not parked.
  returned: always
  type: dict
version:
  description: The version recorded for the park or unpark; null when nothing changed.
  returned: always
  type: int
digest:
  description: sha256 of the component's bytes.
  returned: always
  type: str
wait:
  description: What O(wait) saw (C(state) V(stopped) after a park, V(running) after an unpark).
  returned: when O(wait) ran
  type: dict
code:
  description: staticpodctl's stable error code (or C(deadline-differs)).
  returned: on failure
  type: str
  sample: needs-force
staticpodctl:
  description: staticpodctl's JSON reply of the change (empty when nothing ran).
  returned: always
  type: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.staticpodd.node.plugins.module_utils.staticpodctl import (
    COMMON_ARGS,
    WAIT_ARGS,
    Staticpodctl,
    StaticpodctlError,
    parse_duration,
    parse_iso,
)

DEFAULT_REASON = "ansible"
#: How far ``since + for`` may be from the park's ``until`` and still be the same deadline: staticpodctl
#: takes the clock before it waits for the lock (up to lock_timeout) and records the park after it.
FOR_TOLERANCE = 60.0


def _clean(reply):
    out = dict(reply or {})
    for key in ("_rc", "_stderr", "_seconds"):
        out.pop(key, None)
    return out


def deadline_problem(park, want_for, want_until):
    """Why the existing ``park`` (its status record) does not have the deadline asked for, or None.

    ``want_for``: the O(for) text or None; ``want_until``: the O(until) text or None. Without
    either, any park will do.
    """
    since, until = parse_iso(park.get("since")), parse_iso(park.get("until"))
    have = park.get("until") or "no deadline (until unparked)"
    if want_for:
        seconds = parse_duration(want_for)
        if seconds is None:
            return "cannot read for=%s" % want_for
        if until is None or since is None or abs(since + seconds - until) > FOR_TOLERANCE:
            return "it is parked since %s with %s, not for %s" % (park.get("since"), have, want_for)
    elif want_until:
        wanted = parse_iso(want_until)
        if wanted is None:
            return "cannot read until=%s (ISO 8601, e.g. 2030-01-31T06:00Z)" % want_until
        if until is None or abs(wanted - until) >= 1.0:
            return "it is parked with %s, not until %s" % (have, want_until)
    return None


def main():
    argument_spec = dict(
        name=dict(type="str", required=True, aliases=["component"]),
        state=dict(type="str", default="parked", choices=["parked", "unparked"]),
        reason=dict(type="str"),
        force=dict(type="bool", default=False),
        until=dict(type="str"),
    )
    argument_spec["for"] = dict(type="str", aliases=["for_"])
    argument_spec.update(COMMON_ARGS)
    argument_spec.update(WAIT_ARGS)
    module = AnsibleModule(
        argument_spec=argument_spec,
        mutually_exclusive=[("for", "until")],
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "unparked" and (p["for"] or p["until"]):
        module.fail_json(msg="for/until only apply to state=parked")
    ctl = Staticpodctl(module)
    if p["state"] == "parked":
        park(module, ctl)
    else:
        unpark(module, ctl)


def _row_or_fail(module, ctl):
    row = ctl.component(module.params["name"])
    if row is None or row.get("state") == "removed":
        module.fail_json(
            msg="%s: no such component in the kubelet's directory (see staticpodctl status)" % module.params["name"],
            code="unknown-component", changed=False,
        )
    return row


def _diff(module, res, before, after):
    if module._diff:
        res["diff"] = dict(before="state: %s\n" % before, after="state: %s\n" % after,
                           before_header=res["component"], after_header=res["component"])


def _already_parked(module, row):
    p = module.params
    rec = row.get("parked") or {}
    if row.get("state") == "missing":
        module.warn("%s is parked but its parked copy is gone; `staticpodctl unpark %s` puts its newest version back"
                    % (row["component"], row["component"]))
    problem = deadline_problem(rec, p["for"], p["until"])
    if problem:
        module.fail_json(
            msg="%s is already parked and a different deadline was asked: %s. staticpodctl cannot move a park's "
            "deadline without starting the pod; unpark it first, or ask for the same deadline" % (row["component"], problem),
            code="deadline-differs", changed=False, component=row["component"], park=rec,
        )
    res = dict(changed=False, component=row["component"], state="parked", park=rec, version=None,
               digest=row.get("digest"), staticpodctl={},
               msg="%s is already parked since %s by %s" % (row["component"], rec.get("since"), rec.get("actor")))
    module.exit_json(**res)


def park(module, ctl):
    p = module.params
    row = _row_or_fail(module, ctl)
    comp = row["component"]
    if row.get("state") in ("parked", "missing"):
        _already_parked(module, row)
    if module.check_mode:
        until = None
        if p["for"]:
            seconds = parse_duration(p["for"])
            until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds)) if seconds else None
        elif p["until"]:
            until = p["until"]
        res = dict(changed=True, component=comp, state="parked", version=None, digest=row.get("digest"),
                   park=dict(component=comp, until=until, reason=p["reason"] or DEFAULT_REASON),
                   staticpodctl={}, msg="%s: would park %s" % (comp, row.get("file_name")))
        _diff(module, res, "live", "parked")
        module.exit_json(**res)
    args = [comp, "--reason", p["reason"] or DEFAULT_REASON]
    if p["for"]:
        args += ["--for", p["for"]]
    if p["until"]:
        args += ["--until", p["until"]]
    if p["force"]:
        args.append("--force")
    args += ctl.wait_args()
    try:
        reply = ctl.run("park", args)
    except StaticpodctlError as exc:
        if exc.code == "already-parked":  # parked meanwhile, under the lock: judge that park
            fresh = ctl.component(comp)
            if fresh is not None and fresh.get("parked"):
                _already_parked(module, fresh)
        extra = {}
        if exc.reply.get("changed"):  # parked, but the wait failed: it stays parked
            extra = dict(component=comp, state="parked", park=exc.reply.get("park"), wait=exc.reply.get("wait"),
                         version=exc.reply.get("version"), digest=exc.reply.get("digest"))
        ctl.fail(exc, **extra)
    res = dict(changed=bool(reply.get("changed")), component=reply.get("component") or comp, state="parked",
               park=reply.get("park"), version=reply.get("version"), digest=reply.get("digest"),
               msg=reply.get("msg") or "", staticpodctl=_clean(reply))
    if reply.get("wait") is not None:
        res["wait"] = reply["wait"]
    daemon = (ctl.last_status or {}).get("daemon") or {}
    if (p["for"] or p["until"]) and not daemon.get("running"):
        module.warn("staticpodd is not running on this node: nothing unparks %s at its deadline (%s) until it "
                    "starts; it then unparks overdue parks at once" % (comp, (reply.get("park") or {}).get("until")))
    _diff(module, res, "live", "parked")
    module.exit_json(**res)


def unpark(module, ctl):
    p = module.params
    row = _row_or_fail(module, ctl)
    comp = row["component"]
    if row.get("state") == "live" and not row.get("parked"):
        module.exit_json(changed=False, component=comp, state="live", park=None, version=None,
                         digest=row.get("digest"), staticpodctl={}, msg="%s is not parked" % comp)
    if module.check_mode and row.get("state") == "live":  # moved back by hand: unpark only closes the record
        module.exit_json(changed=False, component=comp, state="live", park=row.get("parked"), version=None,
                         digest=row.get("digest"), staticpodctl={},
                         msg="%s is live again (moved back by hand); unpark would close its park record" % comp)
    if module.check_mode:
        res = dict(changed=True, component=comp, state="live", park=row.get("parked"), version=None,
                   digest=row.get("digest"), staticpodctl={}, msg="%s: would unpark %s" % (comp, row.get("file_name")))
        _diff(module, res, "parked", "live")
        module.exit_json(**res)
    args = [comp, "--reason", p["reason"] or DEFAULT_REASON] + ctl.wait_args()
    try:
        reply = ctl.run("unpark", args)
    except StaticpodctlError as exc:
        if exc.code == "not-parked":  # unparked meanwhile (the daemon's deadline, another run)
            module.exit_json(changed=False, component=comp, state="live", park=None, version=None,
                             digest=row.get("digest"), staticpodctl=_clean(exc.reply), msg="%s is not parked" % comp)
        extra = {}
        if exc.reply.get("changed"):
            extra = dict(component=comp, state="live", wait=exc.reply.get("wait"), version=exc.reply.get("version"),
                         digest=exc.reply.get("digest"))
        ctl.fail(exc, **extra)
    res = dict(changed=bool(reply.get("changed")), component=reply.get("component") or comp, state="live",
               park=None, version=reply.get("version"), digest=reply.get("digest"), msg=reply.get("msg") or "",
               staticpodctl=_clean(reply))
    if reply.get("wait") is not None:
        res["wait"] = reply["wait"]
    _diff(module, res, "parked", "live")
    module.exit_json(**res)


if __name__ == "__main__":
    main()
