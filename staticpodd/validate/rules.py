"""The ordered list of file-level rules (layers 3-6); each is ``rule(ctx: Context) -> None``.

Identity (layer 2) runs before these in ``staticpodd.validate``; directory rules (layer 7)
live in ``staticpodd.validate.directory``.
"""

from __future__ import annotations

from staticpodd.validate import mistakes, nodefit, podrules, schema

FILE_RULES: list = [
    schema.schema_rule,
    podrules.rule_metadata,
    podrules.rule_static_pod_fields,
    podrules.rule_api_references,
    podrules.rule_pod_spec,
    podrules.rule_containers,
    podrules.rule_volumes,
    mistakes.rule_priority,
    mistakes.rule_argv,
    mistakes.rule_host_paths,
    mistakes.rule_images,
    mistakes.rule_pinned_uid,
    nodefit.rule_node_fit,
]
