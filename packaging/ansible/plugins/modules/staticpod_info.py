#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: staticpodd authors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: staticpod_info
short_description: Read a node's static pod components, parks, drift, daemon health and the directory's findings
version_added: 1.0.0
description:
  - Reads C(staticpodctl status) and C(staticpodctl doctor) on the managed node and returns what they saw, without
    changing anything. It returns every component with its state, version and digest, the parks (who, why, until when),
    drift, the staticpodd daemon's health, and the findings of the whole directory as the kubelet reads it
    (strays, duplicate pods, invalid files).
  - Register the result; other hosts read it as C(hostvars[host].<registered name>), as the rolling drill in this
    collection's README does (C(_info) modules return data, not C(ansible_facts)).
author:
  - staticpodd authors (@staticpodd)
extends_documentation_fragment:
  - staticpodd.node.staticpodctl
attributes:
  check_mode:
    description: Reads only; runs the same in check mode.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
options:
  doctor:
    description:
      - Also run C(staticpodctl doctor) (the directory's findings, problems, the version store's integrity).
      - V(false) reads only C(staticpodctl status), which is cheaper (no validation of the directory).
    type: bool
    default: true
notes:
  - The task fails only when staticpodctl cannot answer (e.g. the manifest directory is missing); problems on the node
    are data (RV(problems), RV(healthy)), so a play can decide on them.
"""

EXAMPLES = r"""
- name: read every control-plane node
  staticpodd.node.staticpod_info:
  register: staticpod

- name: refuse when kube-scheduler is parked anywhere in the group
  ansible.builtin.assert:
    that: >-
      groups['control_plane'] | map('extract', hostvars, ['staticpod', 'parked_components'])
      | select('contains', 'kube-scheduler') | list | length == 0
  run_once: true
"""

RETURN = r"""
components:
  description:
    - Every component, as C(staticpodctl status --json) lists it.
    - C(state) is V(live), V(parked), V(missing) (parked, but its parked copy is gone) or V(removed) (recorded, no
      longer in the directory); C(parked) is the park record or null.
  returned: always
  type: list
  elements: dict
states:
  description: Component name -> its state.
  returned: always
  type: dict
  sample: {"kube-apiserver": "live", "kube-scheduler": "parked"}
parks:
  description: The parks now (C(component), C(since), C(until), C(actor), C(reason), C(digest)).
  returned: always
  type: list
  elements: dict
parked_components:
  description: Names of the parked components.
  returned: always
  type: list
  elements: str
  sample: [kube-scheduler]
drift:
  description: Components whose live bytes differ from their newest recorded version (someone else wrote them).
  returned: always
  type: list
  elements: str
strays:
  description: Files the kubelet runs that are not manifests anyone meant (C(*.bak), C(*~), ...).
  returned: always
  type: list
  elements: str
daemon:
  description: The staticpodd daemon's health (C(running), C(healthy), C(stuck), C(pid), C(detail), C(problems)).
  returned: always
  type: dict
findings:
  description: The validator's findings on the whole directory (C(path), C(line), C(column), C(code), C(severity), C(message)).
  returned: when O(doctor=true)
  type: list
  elements: dict
problems:
  description: What C(staticpodctl doctor) found wrong (C(code), C(message), C(component)).
  returned: when O(doctor=true)
  type: list
  elements: dict
healthy:
  description: C(staticpodctl doctor) found nothing wrong (with O(doctor=false), no interrupted operation and no broken park).
  returned: always
  type: bool
store:
  description: The version store's integrity check (C(ok) or what SQLite said).
  returned: when O(doctor=true)
  type: str
interrupted:
  description: Interrupted operations waiting for C(staticpodctl recover).
  returned: always
  type: int
manifest_dir:
  description: The kubelet's directory staticpodctl looked at.
  returned: always
  type: str
staticpodctl_version:
  description: The node's staticpodctl version.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.staticpodd.node.plugins.module_utils.staticpodctl import (
    COMMON_ARGS,
    Staticpodctl,
    StaticpodctlError,
)


def main():
    argument_spec = dict(doctor=dict(type="bool", default=True))
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    ctl = Staticpodctl(module)
    st = ctl.status()
    rows = st.get("components") or []
    parks = [dict(r["parked"], component=r["component"]) for r in rows if r.get("parked") and r.get("state") != "live"]
    res = dict(
        changed=False,
        components=rows,
        states=dict((r["component"], r.get("state")) for r in rows),
        parks=parks,
        parked_components=[r["component"] for r in parks],
        drift=[r["component"] for r in rows if r.get("drift") and r.get("version") is not None
               and r.get("state") in ("live", "parked")],
        strays=[r["file_name"] for r in rows if r.get("stray") and r.get("state") == "live"],
        daemon=st.get("daemon") or {},
        interrupted=st.get("interrupted") or 0,
        manifest_dir=st.get("manifest_dir"),
        untrackable=st.get("untrackable") or [],
        staticpodctl_version=ctl.version,
    )
    res["healthy"] = not res["interrupted"] and not any(r.get("park_broken") or r.get("state") == "missing" for r in rows)
    if module.params["doctor"]:
        try:
            doc = ctl.run("doctor", [], ok_statuses=(0, 1))
        except StaticpodctlError as exc:
            if "error" in exc.reply:  # doctor could not look (e.g. no directory)
                ctl.fail(exc)
            doc = exc.reply  # ok: false = problems found: data, not a failure of this task
        res.update(
            findings=doc.get("findings") or [],
            problems=doc.get("problems") or [],
            store=doc.get("store"),
            journal=doc.get("journal") or {},
            healthy=bool(doc.get("ok")),
        )
    module.exit_json(**res)


if __name__ == "__main__":
    main()
