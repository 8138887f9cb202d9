"""Assertions over a synthesized CloudFormation template, evaluated in Python.

``aws_cdk.assertions.Template`` runs in Node through jsii: every ``find_resources`` or ``to_json`` sends the whole
template across the process boundary and back, a few milliseconds to tens of them per call, and the infra tests make
thousands of calls (about half of the suite's CPU went there). This class keeps the same methods and the same matching
rules (``Match.objectLike`` at the top, objects matched partially at any depth, arrays element by element with equal
length, everything else by value), evaluated over the template's JSON in this process. A pattern that holds a
CDK ``Matcher`` (``Match.absent()``, ``Match.array_with(...)``, ...) goes to CDK's own ``Template``, built once per
template on first need. tests/support/test_template.py checks that both agree.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Stack
from aws_cdk import assertions as cdk


def holds_matcher(pattern: Any) -> bool:
    if isinstance(pattern, cdk.Matcher):
        return True
    if isinstance(pattern, dict):
        return any(holds_matcher(value) for value in pattern.values())
    if isinstance(pattern, list | tuple):
        return any(holds_matcher(value) for value in pattern)
    return False


def mismatch(pattern: Any, actual: Any, path: str = "") -> str | None:
    """Where ``actual`` departs from ``pattern`` under CDK's literal matching with partial objects, or None."""
    if isinstance(pattern, dict):
        if not isinstance(actual, dict):
            return f"{path or '/'}: expected an object, found {json.dumps(actual)[:200]}"
        for key, value in pattern.items():
            if key not in actual:
                return f"{path}/{key}: missing"
            found = mismatch(value, actual[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(pattern, list | tuple):
        if not isinstance(actual, list):
            return f"{path or '/'}: expected an array, found {json.dumps(actual)[:200]}"
        if len(pattern) != len(actual):
            return f"{path or '/'}: expected {len(pattern)} elements, found {len(actual)}"
        for index, (value, element) in enumerate(zip(pattern, actual, strict=True)):
            found = mismatch(value, element, f"{path}/{index}")
            if found:
                return found
        return None
    if isinstance(pattern, bool) != isinstance(actual, bool) or pattern != actual:
        return f"{path or '/'}: expected {json.dumps(pattern)}, found {json.dumps(actual)[:200]}"
    return None


class Template:
    """A synthesized template with the assertion methods of ``aws_cdk.assertions.Template`` that the tests use."""

    def __init__(self, template: dict[str, Any]) -> None:
        self._text = json.dumps(template)
        self._template: dict[str, Any] = json.loads(self._text)
        self._cdk: cdk.Template | None = None

    @classmethod
    def from_json(cls, template: dict[str, Any]) -> Template:
        return cls(template)

    @classmethod
    def from_stack(cls, stack: Stack) -> Template:
        return cls(cdk.Template.from_stack(stack).to_json())

    @property
    def cdk(self) -> cdk.Template:
        """CDK's own ``Template`` of the same JSON, for patterns with matchers."""
        if self._cdk is None:
            self._cdk = cdk.Template.from_json(json.loads(self._text))
        return self._cdk

    def to_json(self) -> dict[str, Any]:
        return json.loads(self._text)  # a fresh copy, as CDK's is: a caller may edit it

    def _of_type(self, section: str, type_: str | None) -> dict[str, Any]:
        entries = self._template.get(section, {})
        if type_ is None:
            return dict(entries)
        return {key: value for key, value in entries.items() if value.get("Type") == type_}

    def find_resources(self, type_: str, props: Any = None) -> dict[str, dict[str, Any]]:
        if holds_matcher(props):
            return dict(self.cdk.find_resources(type_, props))
        found = {
            logical_id: resource
            for logical_id, resource in self._of_type("Resources", type_).items()
            if props is None or mismatch(props, resource) is None
        }
        return json.loads(json.dumps(found))

    def resource_count_is(self, type_: str, count: int) -> None:
        found = len(self._of_type("Resources", type_))
        assert found == count, f"expected {count} resources of type {type_}, found {found}"

    def _has(self, type_: str, pattern: Any, of_properties: bool) -> None:
        candidates = self._of_type("Resources", type_)
        differences = []
        for logical_id, resource in candidates.items():
            actual = resource.get("Properties", {}) if of_properties else resource
            found = mismatch(pattern, actual)
            if found is None:
                return
            differences.append(f"  {logical_id}: {found}")
        what = "properties" if of_properties else "resource"
        raise AssertionError(
            f"no {type_} matches the {what} pattern {json.dumps(pattern)[:600]}; "
            f"{len(candidates)} of that type:\n" + "\n".join(differences[:20])
        )

    def has_resource_properties(self, type_: str, props: Any) -> None:
        if holds_matcher(props):
            self.cdk.has_resource_properties(type_, props)
        else:
            self._has(type_, props, of_properties=True)

    def has_resource(self, type_: str, props: Any) -> None:
        if holds_matcher(props):
            self.cdk.has_resource(type_, props)
        else:
            self._has(type_, props, of_properties=False)

    def has_output(self, logical_id: str, props: Any) -> None:
        if holds_matcher(props):
            self.cdk.has_output(logical_id, props)
            return
        outputs = self._template.get("Outputs", {})
        named = outputs if logical_id == "*" else {k: v for k, v in outputs.items() if k == logical_id}
        differences = [f"  {key}: {mismatch(props, value)}" for key, value in named.items()]
        if not any(mismatch(props, value) is None for value in named.values()):
            raise AssertionError(
                f"no output {logical_id} matches {json.dumps(props)[:600]}:\n" + "\n".join(differences[:20])
            )
