# -*- coding: utf-8 -*-
# Copyright: staticpodd authors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Documentation shared by the staticpodd.node modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Options every module takes: where staticpodctl is and which node directory it acts on.
    DOCUMENTATION = r"""
options:
  staticpodctl_path:
    description:
      - Path of C(staticpodctl) on the managed node.
      - Default is C(staticpodctl) on the node's C(PATH) (the staticpodd package installs C(/usr/bin/staticpodctl)).
      - The module fails with a clear message when it is missing or older than this collection needs.
    type: path
  root:
    description:
      - Take every default path under this directory (staticpodctl C(--root)), e.g. a sandbox node in tests.
      - Default is C(/).
    type: path
  manifest_dir:
    description:
      - The kubelet's C(staticPodPath) (staticpodctl C(--manifest-dir)).
      - Default is read by staticpodctl from the configuration, then C(/var/lib/kubelet/config.yaml),
        else C(/etc/kubernetes/manifests).
    type: path
  config:
    description:
      - The C(staticpodd.yaml) configuration staticpodctl reads (C(--config)).
      - Default is C(<root>/etc/staticpodd/staticpodd.yaml).
    type: path
  lock_timeout:
    description:
      - Seconds to wait for the lock another staticpodctl or the staticpodd daemon holds (C(--lock-timeout)).
      - Default is the configuration's C(lock_timeout), else 30.
    type: float
requirements:
  - staticpodd (its C(staticpodctl)) 0.1.0 or later on the managed node
seealso:
  - name: staticpodctl exit codes and JSON
    description: The README of staticpodd, sections "Exit codes" and "Config management".
    link: https://github.com/staticpodd/staticpodd#config-management-ansible-puppet-salt-chef
"""

    # The proof options (--wait): what the kubelet did, read from the container runtime with crictl.
    WAIT = r"""
options:
  wait:
    description:
      - Confirm what the kubelet did through the container runtime (staticpodctl C(--wait)), as kubeadm
        waits for a static pod after an upgrade.
      - After a park, the pod must be stopped; after an apply or unpark, a ready sandbox with the new
        C(kubernetes.io/config.hash) must run every container and pass the manifest's own probes.
      - The task fails (code C(wait-timeout)) when that does not happen within O(wait_timeout); what was
        swapped stays swapped unless O(ignore:rollback_on_failure) says otherwise (staticpod_manifest).
      - Needs C(crictl) on the node (see O(crictl)); without it nothing is changed and the task fails
        with code C(runtime-unavailable).
    type: bool
    default: false
  wait_timeout:
    description:
      - How long O(wait) waits, as staticpodctl reads it (C(90s), C(5m), C(1h30m), or seconds).
      - Default is the configuration's C(wait.timeout), else 5m.
    type: str
  node_name:
    description:
      - The kubelet's node name, when it is not this host's name (pods run as C(<name>-<node name>)).
    type: str
  crictl:
    description:
      - Path of C(crictl) on the managed node (default C(crictl) on the node's C(PATH)).
    type: path
  runtime_endpoint:
    description:
      - CRI endpoint for crictl, e.g. C(unix:///run/containerd/containerd.sock) (default crictl's own configuration).
    type: str
"""
