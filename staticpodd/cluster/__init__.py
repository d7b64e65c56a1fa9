"""The cluster view: what is parked or pinned on this node, told to the Kubernetes API.

An operator with fifty control-plane nodes learns from ``kubectl get nodes`` and ``kubectl
describe node`` what someone parked on one of them, not from each node's journal. When
``cluster.publish`` is set, staticpodd keeps annotations on this node's Node object true and
creates an Event on it for each park, unpark, deadline unpark, broken park, restore, quarantine
and pin. The API server is often the very thing parked or upgraded, so publishing never blocks
or fails a verb: entries wait in a persisted, bounded queue and go out in order when it answers.

Modules, bottom up (only :mod:`.client` imports the ``kubernetes`` client, the optional
``cluster`` extra, and only when publishing or reading the cluster):

- :mod:`.view`: pure: the annotations' and Events' shapes, the journal events that become
  Events, reading other nodes' annotations back (``staticpodctl status --cluster``).
- :mod:`.outbox`: the persisted queue (SQLite, ``<state_dir>/cluster-outbox.sqlite``).
- :mod:`.client`: the ``kubernetes`` client behind a few calls (get/patch a Node, create an Event,
  list Nodes, read a Pod), each raising :class:`~staticpodd.cluster.client.ClusterError`.
- :mod:`.publisher`: one flush: the annotations first (the current truth), then the queued
  Events in order, stopping at the first the API server does not take.
- :mod:`.hook`: the journal observer that queues entries, and what a verb says afterwards
  ("published" or "queued").
"""
