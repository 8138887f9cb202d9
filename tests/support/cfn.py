"""The synthesized templates of every environment (synthesized once per test run, without the nag packs), and a
resolver that evaluates their intrinsics against the physical names and ARNs a test world gave their resources."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infra import templates

Template = dict[str, Any]
KINDS = ("Stateful", "Stateless")


@functools.cache
def synthesized() -> dict[str, dict[str, Template]]:
    """{environment: {"Stateful": template, "Stateless": template}} for every environment config builds, read from
    the session's one synth (tests/support/assembly.py), or from one of this process's own outside such a session."""
    from tests.support import assembly

    shared = os.environ.get(assembly.VARIABLE)
    directory = Path(shared) if shared else Path(tempfile.mkdtemp(prefix="refdata-assembly-"))
    facts = assembly.ensure(directory)
    return {
        name: {
            kind: json.loads(
                (directory / "cdk.out" / f"assembly-{name}" / stacks[kind]["templateFile"]).read_text()
            )
            for kind in KINDS
        }
        for name, stacks in ((name, found["stacks"]) for name, found in facts["environments"].items())
    }


Binder = Callable[[str, str | None], Any]  # (logical id, attribute or None for Ref) -> value


class Resolver:
    """Evaluates `Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Select`, `Fn::Split` and `Fn::Sub` over a template.

    Parameters resolve to `parameters` (by name), pseudo-parameters to the world's account and region (as
    `infra.templates.Stack` gives them, the partition and URL suffix following the region), and
    resources through `bind(logical id, attribute)`, which the world implements (a resource it did not create
    binds to a placeholder that no ARN pattern matches by accident)."""

    def __init__(
        self,
        template: Template,
        *,
        account: str,
        region: str,
        parameters: Mapping[str, Any],
        bind: Binder,
    ) -> None:
        self.template = template
        self.account = account
        self.region = region
        self.parameters = parameters
        self.bind = bind

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self(member) for member in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.bind(logical_id, attribute)
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(self(part)) for part in self(parts))
            if key == "Fn::Select":
                index, values = arg
                values = self(values)
                position = int(self(index))
                if isinstance(values, list) and position < len(values):
                    return values[position]
                return f"unbound:{values}[{index}]"  # e.g. a part of an unbound ARN
            if key == "Fn::Split":
                separator, value = arg
                return str(self(value)).split(separator)
            if key == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else (arg[0], self(arg[1]))
                for name, value in names.items():
                    text = text.replace(f"${{{name}}}", str(value))
                while "${" in text:
                    start = text.index("${")
                    end = text.index("}", start)
                    name = text[start + 2 : end]
                    value = self({"Fn::GetAtt": name}) if "." in name else self._ref(name)
                    text = text[:start] + str(value) + text[end + 1 :]
                return text
        return {key: self(value) for key, value in node.items()}

    def _ref(self, name: str) -> Any:
        pseudo = templates.Stack("s", self.template, "s", self.account, self.region).pseudo_parameters()
        pseudo["AWS::StackId"] = (
            f"arn:{pseudo['AWS::Partition']}:cloudformation:{self.region}:{self.account}:stack/s/00000000-test"
        )
        if name in pseudo:
            return pseudo[name]
        if name in self.template.get("Parameters", {}):
            default = self.template["Parameters"][name].get("Default")
            return self.parameters.get(default, self.parameters.get(name, f"unbound:{name}"))
        return self.bind(name, None)

    def resources(self, kind: str) -> dict[str, Template]:
        return {
            logical_id: resource
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == kind
        }
