"""Destructive-change guard: compares the synthesized templates with the last release's and fails when a deployment
would replace or delete a stateful resource, or add or remove more than one GSI of a table at once.

    python -m infra.guard [cdk.out] [--baseline DIR | --baseline-ref REV] [--overrides FILE]
    python -m infra.guard --write-baseline [cdk.out]        (``make baseline``: after a release)

What replaces a resource is read from the CloudFormation resource schemas that cfn-lint ships: a change to a
create-only property replaces it, a change to a conditionally create-only property may (CloudFormation replaces
it when it cannot update in place; a table's key schema, a domain's encryption key). A resource whose logical id
disappears is deleted (a renamed construct id is a delete plus a create), and a replaced resource changes every
create-only property that references it, which replaces that resource in turn.

Property values are expressions. Literals and what resolves before deployment (pseudo-parameters, ``Fn::Join``,
``Fn::Sub``, ``Fn::Select``, ``Fn::Split``, ``Fn::FindInMap``, conditions, parameter defaults) are compared as
values; a reference to a replaced resource is a definite change; any other intrinsic that differs is reported as a
possible change, because its value is only known at deploy time.

An intended change goes through with a reviewed entry in ``release/guard-overrides.toml`` naming the resource, the
change and the reason; ``make baseline`` empties that file, since its entries applied to the previous release.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any, Literal

from infra.templates import (
    DOMAIN_NETWORK_TYPES,
    PSEUDO_PARAMETERS,
    STATEFUL_TYPES,
    SUB_VARIABLE,
    TABLE_TYPES,
    Stack,
    command_assembly,
    domain_security_groups,
)

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "release" / "baseline"
OVERRIDES = ROOT / "release" / "guard-overrides.toml"
# How the advice runs the ops CLI: from the repository root, with the project's interpreter (`ops.advice` says the same).
OPS = ".venv/bin/python -m ops"
BASELINE_MANIFEST = "stacks.json"
OVERRIDES_HEADER = """\
# Reviewed exceptions to the destructive-change guard (`make guard`, docs/guard.md).
# One [[override]] per change the guard reports that is intended:
#
#   [[override]]
#   resource = "dev/Stateful/Table7ABB320E"   # <environment>/<stack>/<logical id>; "*" for every environment
#   change = "replace"                        # replace | delete | gsi | migration | move
#   reason = "why losing this resource's data is acceptable, and who agreed"
#
# `make baseline` (after a release) empties this file: its entries applied to the previous release.
"""

Change = Literal["replace", "delete", "gsi", "migration", "move"]
CHANGES: tuple[Change, ...] = ("replace", "delete", "gsi", "migration", "move")
Certainty = Literal["definite", "possible"]
# Properties of a GSI that CloudFormation updates in place; any other change deletes and re-creates the index.
GSI_IN_PLACE = frozenset(
    {"ProvisionedThroughput", "ContributorInsightsSpecification", "OnDemandThroughput", "WarmThroughput"}
)
RETAINING = ("Retain", "RetainExceptOnCreate", "Snapshot")


class GuardError(Exception):
    """The guard cannot run: no baseline, or an invalid overrides file."""


# --- resource schemas -------------------------------------------------------------------------------------------


@cache
def create_only(resource_type: str, region: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(create-only, conditionally create-only) property paths of a type, from cfn-lint's provider schemas."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER, ResourceNotFoundError

    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    except ResourceNotFoundError:
        return (), ()
    return (
        tuple(schema.get("createOnlyProperties", ())),
        tuple(schema.get("conditionalCreateOnlyProperties", ())),
    )


# --- values -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unresolved:
    """A value only known at deploy time; ``replaced`` when it names a resource this deployment replaces."""

    expression: str
    replaced: bool = False


class Absent:
    """A property the template does not set."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT = Absent()


def canonical(value: Any) -> str:
    def encode(item: Any) -> Any:
        if isinstance(item, Unresolved):
            return {"?": item.expression, "new": item.replaced}
        return repr(item)

    return json.dumps(value, sort_keys=True, default=encode)


def holds(value: Any, predicate: Any) -> bool:
    if predicate(value):
        return True
    if isinstance(value, dict):
        return any(holds(item, predicate) for item in value.values())
    if isinstance(value, list):
        return any(holds(item, predicate) for item in value)
    return False


def is_unresolved(value: Any) -> bool:
    return isinstance(value, Unresolved)


def is_replaced(value: Any) -> bool:
    return isinstance(value, Unresolved) and value.replaced


@dataclass
class Evaluator:
    """Evaluates one template's expressions as far as they resolve before deployment."""

    stack: Stack
    replaced: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.pseudo = self.stack.pseudo_parameters()
        self.parameters: Mapping[str, Any] = self.stack.template.get("Parameters", {})
        self.conditions: Mapping[str, Any] = self.stack.template.get("Conditions", {})
        self.mappings: Mapping[str, Any] = self.stack.template.get("Mappings", {})

    def __call__(self, node: Any) -> Any:
        if isinstance(node, dict):
            if len(node) == 1:
                ((key, argument),) = node.items()
                if key == "Ref" or key.startswith("Fn::"):
                    return self.intrinsic(key, argument)
            return {key: self(item) for key, item in node.items()}
        if isinstance(node, list):
            return [self(item) for item in node]
        if isinstance(node, bool):
            return str(node).lower()
        if isinstance(node, (int, float)):
            return str(node)
        return node

    def opaque(self, key: str, argument: Any) -> Unresolved:
        evaluated = self(argument)
        return Unresolved(f"{key} {canonical(evaluated)}", replaced=holds(evaluated, is_replaced))

    def ref(self, name: str, attribute: str | None = None) -> Any:
        if name in PSEUDO_PARAMETERS and attribute is None:
            return self.pseudo.get(name, Unresolved(f"Ref {name}"))
        if name in self.parameters and attribute is None:
            parameter = self.parameters[name]
            if str(parameter.get("Type", "")).startswith("AWS::SSM::Parameter::Value<"):
                return Unresolved(f"SSM parameter {parameter.get('Default')}")
            if "Default" in parameter:
                return self(parameter["Default"])
            return Unresolved(f"parameter {name}")
        label = f"Ref {name}" if attribute is None else f"GetAtt {name}.{attribute}"
        return Unresolved(label, replaced=name in self.replaced)

    def condition(self, node: Any) -> bool | None:
        """A condition's truth, or None when it depends on something unresolved."""
        if isinstance(node, dict) and len(node) == 1:
            ((key, argument),) = node.items()
            if key == "Condition" and argument in self.conditions:
                return self.condition(self.conditions[argument])
            if key == "Fn::Equals" and isinstance(argument, list) and len(argument) == 2:
                left, right = self(argument[0]), self(argument[1])
                if holds([left, right], is_unresolved):
                    return None
                return bool(canonical(left) == canonical(right))
            parts = [self.condition(item) for item in argument] if isinstance(argument, list) else [None]
            if key == "Fn::Not" and len(parts) == 1:
                return None if parts[0] is None else not parts[0]
            if key == "Fn::And":
                return False if False in parts else None if None in parts else True
            if key == "Fn::Or":
                return True if True in parts else None if None in parts else False
        return None

    def intrinsic(self, key: str, argument: Any) -> Any:
        if key == "Ref" and isinstance(argument, str):
            return self.ref(argument)
        if key == "Fn::GetAtt":
            if isinstance(argument, str):
                name, _, attribute = argument.partition(".")
                return self.ref(name, attribute)
            if isinstance(argument, list) and len(argument) == 2:
                return self.ref(str(argument[0]), canonical(self(argument[1])).strip('"'))
        if key == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
            parts = self(argument[1])
            if isinstance(parts, list) and all(isinstance(part, str) for part in parts):
                return str(argument[0]).join(parts)
        if key == "Fn::Sub":
            template, variables = (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])
            values = {name: self(value) for name, value in variables.items()}
            pieces = []
            for index, piece in enumerate(SUB_VARIABLE.split(template)):
                if index % 2 == 0:
                    pieces.append(piece)
                elif piece.startswith("!"):
                    pieces.append("${" + piece[1:] + "}")
                else:
                    name, _, attribute = piece.partition(".")
                    pieces.append(values[piece] if piece in values else self.ref(name, attribute or None))
            if all(isinstance(piece, str) for piece in pieces):
                return "".join(pieces)
            return Unresolved(f"Fn::Sub {canonical(pieces)}", replaced=holds(pieces, is_replaced))
        if key == "Fn::Select" and isinstance(argument, list) and len(argument) == 2:
            index, items = self(argument[0]), self(argument[1])
            if (
                isinstance(index, str)
                and index.isdigit()
                and isinstance(items, list)
                and int(index) < len(items)
            ):
                return items[int(index)]
        if key == "Fn::Split" and isinstance(argument, list) and len(argument) == 2:
            delimiter, string = self(argument[0]), self(argument[1])
            if isinstance(delimiter, str) and isinstance(string, str):
                return string.split(delimiter)
        if key == "Fn::FindInMap" and isinstance(argument, list) and len(argument) >= 3:
            names = [self(item) for item in argument[:3]]
            if all(isinstance(name, str) for name in names):
                value = self.mappings.get(names[0], {}).get(names[1], {}).get(names[2])
                if value is not None:
                    return self(value)
        if key == "Fn::If" and isinstance(argument, list) and len(argument) == 3:
            truth = self.condition({"Condition": argument[0]})
            if truth is not None:
                return self(argument[1] if truth else argument[2])
        if key == "Fn::Base64":
            inner = self(argument)
            if isinstance(inner, str):
                return f"base64({inner})"
        return self.opaque(key, argument)


def difference(before: Any, after: Any) -> Certainty | None:
    """How sure it is that two evaluated values differ at deploy time (None: they do not)."""
    if canonical(before) == canonical(after):
        return None
    if holds(after, is_replaced) or not holds([before, after], is_unresolved):
        return "definite"
    return "possible"


def at_path(properties: Any, pointer: str) -> Any:
    """The value at a schema pointer (``/properties/A/B``); a value the path cannot enter (a list, an unresolved
    expression) stands for everything under it, and an absent property is ``ABSENT``."""
    value = properties
    for part in pointer.split("/")[2:]:
        if part == "*" or not isinstance(value, dict):
            return value
        if part not in value:
            return ABSENT
        value = value[part]
    return value


def show(value: Any) -> str:
    text = "(absent)" if value is ABSENT else canonical(value)
    return text if len(text) <= 160 else text[:157] + "..."


# --- findings ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    stack: str
    logical_id: str
    resource_type: str
    change: Change
    certainty: Certainty
    why: str
    details: tuple[str, ...]

    @property
    def resource(self) -> str:
        return f"{self.stack}/{self.logical_id}"


def protected(stack: Stack) -> dict[str, str]:
    """The resources of ``stack`` whose loss loses state, with what they are: stateful types, what a VPC domain
    stands on (VPC, subnets, route tables and their associations) and the domain's security groups."""
    found = {
        logical_id: "stateful resource"
        for logical_id, resource in stack.resources.items()
        if resource.get("Type") in STATEFUL_TYPES
    }
    for logical_id, resource in stack.resources.items():
        if resource.get("Type") in DOMAIN_NETWORK_TYPES:
            found[logical_id] = "network the search domain stands on"
    for logical_id in domain_security_groups(stack.resources):
        found[logical_id] = "security group of the search domain"
    return found


def replacements(before: Stack, after: Stack) -> dict[str, tuple[Certainty, tuple[str, ...]]]:
    """Every resource of ``after`` that this deployment replaces, with how sure and why (to a fixed point: a
    replaced resource changes the create-only properties that reference it)."""
    old, new = Evaluator(before), Evaluator(after)
    found: dict[str, tuple[Certainty, tuple[str, ...]]] = {}
    common = [i for i in after.resources if i in before.resources]
    for logical_id in common:
        old_type, new_type = before.resources[logical_id].get("Type"), after.resources[logical_id].get("Type")
        if old_type != new_type:
            found[logical_id] = ("definite", (f"its type changes from {old_type} to {new_type}",))
    added = {i for i in after.resources if i not in before.resources}
    changed = True
    while changed:
        changed = False
        # A reference to a replaced or newly added resource names a new physical resource.
        new.replaced = added | {i for i, (certainty, _) in found.items() if certainty == "definite"}
        for logical_id in common:
            if logical_id in found and found[logical_id][0] == "definite":
                continue
            resource_type = str(after.resources[logical_id].get("Type"))
            always, conditional = create_only(resource_type, after.region)
            was = old(before.resources[logical_id].get("Properties", {}))
            now = new(after.resources[logical_id].get("Properties", {}))
            reasons: list[str] = []
            certainty: Certainty | None = None
            for pointer in (*always, *conditional):
                how = difference(at_path(was, pointer), at_path(now, pointer))
                if how is None:
                    continue
                kind = (
                    "create-only"
                    if pointer in always
                    else "conditionally create-only: replaced when it cannot be updated in place"
                )
                sure = "" if how == "definite" else "; possibly: the value is only known at deploy time"
                reasons.append(
                    f"{pointer.removeprefix('/properties/')} changes ({kind}{sure}): "
                    f"{show(at_path(was, pointer))} -> {show(at_path(now, pointer))}"
                )
                if how == "definite":
                    certainty = "definite"
                elif certainty is None:
                    certainty = "possible"
            if certainty is not None and found.get(logical_id, (None,))[0] != certainty:
                found[logical_id] = (certainty, tuple(reasons))
                changed = True
    return found


def _fate(resource: Mapping[str, Any], policy: str, replaced: bool) -> str:
    """What the resource's deletion or replacement policy does with the old one (and its data, if it holds any)."""
    value = resource.get(policy, "Delete")
    holds_data = resource.get("Type") in STATEFUL_TYPES
    old = "stays, orphaned" if value in RETAINING else "is deleted"
    then = (
        f"a new{', empty' if holds_data else ''} one takes its place"
        if replaced
        else "the stack no longer manages it"
    )
    return f"{policy} {value}: the old one {old}{' with its data' if holds_data else ''}; {then}"


def gsi_operations(
    before: Mapping[str, Any], after: Mapping[str, Any], old: Evaluator, new: Evaluator
) -> list[str]:
    """The index creations and deletions a table update performs (a rebuilt index counts twice)."""

    def indexes(resource: Mapping[str, Any], evaluator: Evaluator) -> dict[str, Any]:
        listed = evaluator(resource.get("Properties", {}).get("GlobalSecondaryIndexes", []))
        return (
            {canonical(i.get("IndexName")): i for i in listed if isinstance(i, dict)}
            if isinstance(listed, list)
            else {}
        )

    was, now = indexes(before, old), indexes(after, new)
    operations = [f"creates index {name}" for name in now if name not in was]
    operations += [f"deletes index {name}" for name in was if name not in now]
    for name in sorted(was.keys() & now.keys()):
        structural = (was[name].keys() | now[name].keys()) - GSI_IN_PLACE
        changed = sorted(k for k in structural if canonical(was[name].get(k)) != canonical(now[name].get(k)))
        if changed:
            because = f"({', '.join(changed)} cannot change in place)"
            operations += [f"deletes index {name} {because}", f"re-creates index {name} {because}"]
    return operations


def compare_stack(before: Stack, after: Stack | None) -> list[Finding]:
    """What deploying ``after`` over ``before`` would destroy (``after`` None: the stack leaves the app)."""
    guarded = protected(before)
    findings = []
    resources_after = after.resources if after is not None else {}
    replaced = replacements(before, after) if after is not None else {}
    if after is not None:
        guarded.update({i: what for i, what in protected(after).items() if i in before.resources})
    for logical_id, what in sorted(guarded.items()):
        resource = before.resources[logical_id]
        resource_type = str(resource.get("Type"))
        if logical_id not in resources_after:
            newcomers = sorted(
                i
                for i, r in resources_after.items()
                if r.get("Type") == resource_type and i not in before.resources
            )
            hint = (
                (
                    f"new {resource_type} {', '.join(newcomers)} appears: a renamed construct id is a delete plus a create",
                )
                if newcomers
                else ()
            )
            reason = (
                "its stack leaves the app" if after is None else "its logical id is gone from the template"
            )
            findings.append(
                Finding(
                    before.name,
                    logical_id,
                    resource_type,
                    "delete",
                    "definite",
                    f"{what} DELETED: {reason}",
                    (_fate(resource, "DeletionPolicy", replaced=False), *hint),
                )
            )
        elif logical_id in replaced:
            certainty, reasons = replaced[logical_id]
            assert after is not None
            findings.append(
                Finding(
                    before.name,
                    logical_id,
                    resource_type,
                    "replace",
                    certainty,
                    f"{what} {'REPLACED' if certainty == 'definite' else 'possibly REPLACED'}",
                    (
                        *reasons,
                        _fate(after.resources[logical_id], "UpdateReplacePolicy", replaced=True),
                    ),
                )
            )
    if after is not None:
        evaluators = Evaluator(before), Evaluator(after)
        for logical_id, resource in sorted(after.resources.items()):
            old = before.resources.get(logical_id)
            if resource.get("Type") not in TABLE_TYPES or old is None or logical_id in replaced:
                continue
            operations = gsi_operations(old, resource, *evaluators)
            if len(operations) > 1:
                findings.append(
                    Finding(
                        before.name,
                        logical_id,
                        str(resource.get("Type")),
                        "gsi",
                        "definite",
                        f"{len(operations)} global secondary index operations in one update",
                        (
                            *operations,
                            "CloudFormation creates or deletes one GSI per table update: deploy them one at a time",
                        ),
                    )
                )
    return findings


def stream_schemas(stack: Stack) -> dict[str, str]:
    """Schema -> the table stream whose event source mapping admits it (its stream parameter's last name part,
    ``table-stream-arn``, ``table-bookings-stream-arn``), read from the mappings' pk-prefix filters."""
    parameters = stack.template.get("Parameters", {})
    found = {}
    for resource in stack.resources.values():
        if resource.get("Type") != "AWS::Lambda::EventSourceMapping":
            continue
        properties = resource.get("Properties", {})
        arn = properties.get("EventSourceArn")
        reference = arn.get("Ref") if isinstance(arn, dict) else None
        source = str(parameters.get(reference, {}).get("Default", canonical(arn))).rsplit("/", 1)[-1]
        for criterion in properties.get("FilterCriteria", {}).get("Filters", []):
            keys = json.loads(criterion.get("Pattern", "{}")).get("dynamodb", {}).get("Keys", {})
            for entry in keys.get("pk", {}).get("S", []):
                if isinstance(entry, dict) and isinstance(entry.get("prefix"), str):
                    found[entry["prefix"].removesuffix("::")] = source
    return found


def reindex(environment: str, schema: str) -> str:
    """The ops command that refills ``schema``'s index in ``environment`` from its table, as it runs from the
    repository root (tests/infra/test_guard.py parses every command the guard prints with the CLI's own parser)."""
    return f"{OPS} reindex --env {environment} --schema {schema}"


def migrations(before: Stack, after: Stack) -> list[Finding]:
    """A schema whose stream moves from one table to another: its items stay in the old table unless copied, and
    its documents carry the old stream's sequence numbers, which the new stream's do not compare with."""
    old, new = stream_schemas(before), stream_schemas(after)
    return [
        Finding(
            before.name,
            schema,
            "schema",
            "migration",
            "definite",
            f"schema {schema!r} MOVES from {old[schema]} to {new[schema]}: a data migration",
            (
                "items left in the old table are no longer indexed; each later change to one is dead-lettered",
                "copy its items to the new table and delete them from the old one, give the schema a new index "
                f"version, then `{reindex(before.environment, schema)}` from the repository root "
                '(README, "Move a schema that holds items to its own table")',
            ),
        )
        for schema in sorted(old.keys() & new.keys())
        if old[schema] != new[schema]
    ]


def location(stacks: Mapping[str, Stack], environment: str) -> set[tuple[str, str]]:
    """The (account, region) pairs an environment's stacks are deployed to."""
    return {
        (stack.account, stack.region)
        for name, stack in stacks.items()
        if name.split("/", 1)[0] == environment
    }


def moved(before: Mapping[str, Stack], after: Mapping[str, Stack]) -> list[Finding]:
    """One finding per environment whose account or region changed: not a change to its stacks but a second
    deployment of it somewhere else, with the old one and its retained data left where they are."""
    findings = []
    for environment in sorted(
        {name.split("/", 1)[0] for name in before} & {name.split("/", 1)[0] for name in after}
    ):
        old, new = location(before, environment), location(after, environment)
        if old == new:
            continue
        was = ", ".join(f"account {a} in {r}" for a, r in sorted(old))
        now = ", ".join(f"account {a} in {r}" for a, r in sorted(new))
        findings.append(
            Finding(
                f"{environment}/Environment",
                "location",
                "account and region",
                "move",
                "definite",
                f"{environment} moves from {was} to {now}: that is a new deployment of the environment, not a change "
                "to the deployed one. Its stacks there start empty; the old stacks and their retained data (tables, "
                "buckets, keys, the search domain) stay where they are, untouched and still billed.",
                (
                    "deploy the new location, then move the data: export each table (point-in-time export) and "
                    "import it there, or reload it; copy the geometry bucket; reindex the domain from the new tables, "
                    "each indexable schema: "
                    + "; ".join(
                        f"`{reindex(environment, schema)}`"
                        for schema in sorted(
                            {
                                s
                                for name, stack in after.items()
                                if name.split("/", 1)[0] == environment
                                for s in stream_schemas(stack)
                            }
                        )
                    ),
                    "point readers and writers at the new tables and endpoint, and run the smoke run there",
                    "retire the old location: lift termination protection, delete its stacks, then delete its "
                    "retained resources by hand once the data is verified in the new one",
                ),
            )
        )
    return findings


def compare(before: Mapping[str, Stack], after: Mapping[str, Stack]) -> list[Finding]:
    """What deploying ``after`` over ``before`` would destroy or move. An environment that moves account or region
    is reported once, as a move: every replacement in it would only be a consequence of that."""
    moves = moved(before, after)
    gone = {finding.stack.split("/", 1)[0] for finding in moves}
    kept = {name: stack for name, stack in before.items() if name.split("/", 1)[0] not in gone}
    findings = [
        finding for name, stack in sorted(kept.items()) for finding in compare_stack(stack, after.get(name))
    ]
    return (
        moves
        + findings
        + [
            finding
            for name, stack in sorted(kept.items())
            if name in after
            for finding in migrations(stack, after[name])
        ]
    )


# --- overrides --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Override:
    resource: str
    change: Change
    reason: str

    def covers(self, finding: Finding) -> bool:
        return self.change == finding.change and fnmatchcase(finding.resource, self.resource)


def load_overrides(path: Path) -> list[Override]:
    if not path.exists():
        return []
    try:
        entries = tomllib.loads(path.read_text()).get("override", [])
    except tomllib.TOMLDecodeError as error:
        raise GuardError(f"{path}: {error}") from error
    overrides = []
    for index, entry in enumerate(entries):
        where = f"{path.name}: override[{index}]"
        unknown = sorted(set(entry) - {"resource", "change", "reason"})
        if unknown:
            raise GuardError(f"{where}: unknown keys {unknown}")
        resource, change, reason = entry.get("resource", ""), entry.get("change", ""), entry.get("reason", "")
        if not isinstance(resource, str) or resource.count("/") != 2 or "*" in resource.split("/", 1)[1]:
            raise GuardError(
                f"{where}.resource: {resource!r} must be <environment or *>/<stack>/<logical id>"
            )
        if change not in CHANGES:
            raise GuardError(f"{where}.change: {change!r} must be one of {list(CHANGES)}")
        if not isinstance(reason, str) or len(reason.split()) < 3:
            raise GuardError(f"{where}.reason: say why the change is intended (a sentence, not {reason!r})")
        overrides.append(Override(resource, change, reason))
    return overrides


# --- baseline ---------------------------------------------------------------------------------------------------


def write_baseline(stacks: Mapping[str, Stack], directory: Path, overrides: Path) -> None:
    """Replaces the baseline with ``stacks`` and empties the overrides (they applied to the previous release)."""
    if directory.exists():
        shutil.rmtree(directory)
    manifest = {}
    for name, stack in sorted(stacks.items()):
        path = directory / f"{name}.template.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stack.template, indent=1, sort_keys=True) + "\n")
        manifest[name] = {"stackName": stack.stack_name, "account": stack.account, "region": stack.region}
    (directory / BASELINE_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    overrides.write_text(OVERRIDES_HEADER)


def _stacks(manifest: Mapping[str, Any], read: Any) -> dict[str, Stack]:
    return {
        name: Stack(
            name=name,
            template=json.loads(read(f"{name}.template.json")),
            stack_name=entry["stackName"],
            account=entry["account"],
            region=entry["region"],
        )
        for name, entry in manifest.items()
    }


def load_baseline(directory: Path) -> dict[str, Stack]:
    if not (directory / BASELINE_MANIFEST).exists():
        raise GuardError(f"no baseline in {directory}: run `make baseline` on the last release and commit it")
    manifest = json.loads((directory / BASELINE_MANIFEST).read_text())
    return _stacks(manifest, lambda relative: (directory / relative).read_text())


def load_baseline_at(revision: str, directory: Path) -> dict[str, Stack] | None:
    """The baseline as committed at ``revision`` (a pull request's base), read with git; None when the revision
    has none yet."""
    relative = directory.resolve().relative_to(ROOT).as_posix()

    def read(name: str) -> str:
        return subprocess.run(
            ["git", "show", f"{revision}:{relative}/{name}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    commit = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    if commit.returncode != 0:
        raise GuardError(f"{revision!r} is not a commit of this clone (fetch it first)")
    try:
        manifest = json.loads(read(BASELINE_MANIFEST))
    except subprocess.CalledProcessError:
        return None
    return _stacks(manifest, read)


# --- report -----------------------------------------------------------------------------------------------------


def report(findings: Iterable[Finding], overrides: list[Override], source: str) -> tuple[str, bool]:
    """The readable report and whether the deployment may go ahead."""
    findings = list(findings)
    blocking = [f for f in findings if not any(o.covers(f) for o in overrides)]
    allowed = [f for f in findings if f not in blocking]
    unused = [o for o in overrides if not any(o.covers(f) for f in findings)]
    lines = [f"Destructive-change guard: synthesized templates against {source}"]
    if not findings:
        lines.append(
            "No stateful resource is replaced or deleted; no table changes more than one GSI; no schema moves table."
        )
    for title, group in (("BLOCKED", blocking), ("allowed by a reviewed override", allowed)):
        if not group:
            continue
        lines += ["", f"{title} ({len(group)}):"]
        for finding in group:
            lines.append(f"  {finding.resource} ({finding.resource_type}): {finding.why}")
            lines += [f"      - {detail}" for detail in finding.details]
            for override in overrides:
                if override.covers(finding):
                    lines.append(f"      override ({override.resource}): {override.reason}")
    if unused:
        lines += ["", "Overrides that match no change (stale or mistyped; remove them):"]
        lines += [f"  {o.resource} ({o.change}): {o.reason}" for o in unused]
    if blocking:
        lines += [
            "",
            "If a change above is intended, add a reviewed entry to release/guard-overrides.toml:",
            *(
                f'  [[override]]\n  resource = "{f.resource}"\n  change = "{f.change}"\n  reason = "..."'
                for f in blocking[:1]
            ),
        ]
    passed = not blocking and not unused
    if passed:
        verdict = (
            f"Verdict: passed ({len(allowed)} change(s) allowed by reviewed overrides)"
            if allowed
            else "Verdict: passed"
        )
    else:
        verdict = f"Verdict: BLOCKED ({len(blocking)} change(s) without a reviewed override, {len(unused)} stale override(s))"
    return "\n".join([*lines, "", verdict]), passed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infra.guard", description=__doc__.split("\n\n")[0])
    parser.add_argument("cloud_assembly", nargs="?", type=Path, default=ROOT / "cdk.out")
    parser.add_argument(
        "--baseline", type=Path, default=BASELINE, help="directory of the last release's templates"
    )
    parser.add_argument("--baseline-ref", help="read the baseline as committed at this git revision")
    parser.add_argument("--overrides", type=Path, default=OVERRIDES)
    parser.add_argument(
        "--write-baseline", action="store_true", help="make the synthesized templates the baseline"
    )
    parser.add_argument(
        "--summary", type=Path, help="also append the report to this Markdown file (a job summary)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stacks = command_assembly(args.cloud_assembly)
    try:
        if args.write_baseline:
            write_baseline(stacks, args.baseline, args.overrides)
            print(f"baseline: {len(stacks)} stacks written to {args.baseline}; {args.overrides.name} emptied")
            return 0
        at_revision = load_baseline_at(args.baseline_ref, args.baseline) if args.baseline_ref else None
        if at_revision is not None:
            baseline, source = at_revision, f"the baseline as committed at {args.baseline_ref}"
        else:
            baseline, source = (
                load_baseline(args.baseline),
                f"the baseline in {os.path.relpath(args.baseline, ROOT)}",
            )
            if args.baseline_ref:
                source += f" ({args.baseline_ref} has none yet: this change introduces it)"
        text, passed = report(compare(baseline, stacks), load_overrides(args.overrides), source)
    except GuardError as error:
        print(f"guard: {error}", file=sys.stderr)
        return 2
    print(text)
    if args.summary:
        with args.summary.open("a") as summary:
            summary.write(
                f"## Destructive-change guard: {'passed' if passed else 'FAILED'}\n\n```\n{text}\n```\n"
            )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
