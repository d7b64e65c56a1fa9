"""Bytes -> document as the kubelet decodes them (go-yaml v2, Go's encoding/json), with source
positions: ``decoding`` (:func:`~staticpodd.manifest.decoding.decode`), ``yamldecode``,
``yamlresolve``, ``jsondecode``, ``decoded``, ``positions``; PyYAML's bounded safe loader for
the files read with PyYAML (``yamlsafe``); what a file's name says (``cmpatterns``) and which
host-port claims clash (``hostclaims``). Pure; imports nothing of the validator.
"""
