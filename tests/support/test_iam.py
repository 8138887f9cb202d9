"""The IAM double (tests/support/iam.py) against AWS's documented evaluation logic: each case cites the sentence of
the AWS documentation it encodes, so the double is checked against AWS's words, not against itself; the whole table
also goes to an independent evaluator, iam-simulate (tests/support/iam_oracle.py), which must agree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.support import iam
from tests.support.aws import single_table, use_fake_aws
from tests.support.iam import DomainAccess, Policies, Request, SdkCalls, decide, decide_kms, moto_over_http
from tests.support.iam_oracle import ask, disagreement, simulation

ACCOUNT, OTHER = "111111111111", "222222222222"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/caller"
SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/caller/session-1"
ROOT = f"arn:aws:iam::{ACCOUNT}:root"
BUCKET = "arn:aws:s3:::bucket/key"
KEY = f"arn:aws:kms:ca-central-1:{ACCOUNT}:key/k"
TARGET_ROLE = f"arn:aws:iam::{ACCOUNT}:role/target"
TABLE = f"arn:aws:dynamodb:ca-central-1:{ACCOUNT}:table/t"
# dynamodb:LeadingKeys is a key of DynamoDB's item calls
QUERY = {"action": "dynamodb:Query", "target": TABLE}

EVALUATION = "IAM User Guide, Policy evaluation for requests within a single account"
CROSS = "IAM User Guide, Cross-account policy evaluation logic"
PRINCIPAL = "IAM User Guide, AWS JSON policy elements: Principal (AWS account principals)"
CONDITIONS = "IAM User Guide, IAM JSON policy elements: Condition operators"
RESOURCE = "IAM User Guide, IAM JSON policy elements: Resource"
ARNS = "IAM User Guide, IAM JSON policy elements: Condition operators (Amazon Resource Name (ARN) condition operators)"
SETS = "IAM User Guide, Single-valued vs. multivalued context keys"
KEYS = "IAM User Guide, AWS global condition context keys (aws:PrincipalArn)"
KMS = "AWS KMS Developer Guide, Key policies in AWS KMS (Default key policy)"
TRUST = (
    "IAM User Guide, Cross account resource access in IAM / AWS JSON policy elements: Principal (role trust)"
)
SERVICE = "IAM User Guide, AWS JSON policy elements: Principal (AWS service principals)"
SCHEDULER = "EventBridge Scheduler User Guide, Confused deputy prevention"
STATES = "Step Functions Developer Guide, Creating an IAM role for your state machine (Prevent cross-service confused deputy)"
LAMBDA = "Lambda Developer Guide, Defining Lambda function permissions with an execution role"
SCHEDULE_GROUP = f"arn:aws:scheduler:ca-central-1:{ACCOUNT}:schedule-group/default"
STATE_MACHINE = f"arn:aws:states:ca-central-1:{ACCOUNT}:stateMachine:ops-reindex"


def service_trust(service: str, **condition: Any) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": service}}
    return doc(statement | ({"Condition": condition} if condition else {}))


def assumed_by(service: str, **context: str) -> dict[str, Any]:
    return {"caller": service, "action": "sts:AssumeRole", "target": TARGET_ROLE, "required": True} | (
        {"context": context} if context else {}
    )


SCHEDULER_SOURCE = {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": SCHEDULE_GROUP}


def allow(action: str | list[str] = "s3:GetObject", resource: str = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: str | list[str] = "s3:GetObject", resource: str = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


def doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def names(*principals: str) -> dict[str, Any]:
    return {"Principal": {"AWS": list(principals)}}


def leading_keys_in(qualifier: str) -> list[dict[str, Any]]:
    """An identity policy allowing dynamodb:Query where `qualifier`:StringEquals holds of the leading keys and ["a"]."""
    condition = {f"{qualifier}:StringEquals": {"dynamodb:LeadingKeys": ["a"]}}
    return [doc(allow("dynamodb:Query", Condition=condition))]


@dataclass(frozen=True)
class Case:
    source: str  # the document and the sentence (quoted, or paraphrased where marked) the case encodes
    expected: str
    identity: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    resource_account: str | None = None
    required: bool = False  # a trust or key policy: the resource policy must allow
    action: str = "s3:GetObject"
    target: str = BUCKET
    caller: str | None = None  # a service principal making the request (else the role's session)


# A key policy or a role's trust policy: the resource policy must allow.
KMS_DECRYPT: dict[str, Any] = {"required": True, "action": "kms:Decrypt", "target": KEY}
ASSUME_ROLE: dict[str, Any] = {"required": True, "action": "sts:AssumeRole", "target": TARGET_ROLE}
SCHEDULER_TRUST = service_trust("scheduler.amazonaws.com", StringEquals={"aws:SourceAccount": ACCOUNT})
STATES_TRUST = service_trust(
    "states.amazonaws.com", ArnLike={"aws:SourceArn": f"arn:aws:states:*:{ACCOUNT}:stateMachine:*"}
)
STATES_SOURCE = {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": STATE_MACHINE}

CASES: dict[str, Case] = {
    "same account: a resource policy naming the role allows with no identity policy": Case(
        f"{EVALUATION}: 'If either the identity-based policy or the resource-based policy within the same account "
        "allows the request and the other doesn't, the request is still allowed.'",
        "allow",
        resource=doc(allow(**names(ROLE))),
    ),
    "same account: a resource policy naming the account only delegates; no identity allow, no access": Case(
        f"{PRINCIPAL}: 'This delegates authority to the account. ... an administrator in that account must then "
        "grant access to an identity (IAM user or role) in that account.'",
        "implicit",
        resource=doc(allow(**names(ROOT))),
    ),
    "same account: the bare account id delegates exactly as the root ARN does": Case(
        f"{PRINCIPAL}: 'The account ARN and the shortened account ID behave the same way. Both delegate "
        "permissions to the account.'",
        "implicit",
        resource=doc(allow(**names(ACCOUNT))),
    ),
    "same account: naming the account and an identity allow together allow": Case(
        f"{PRINCIPAL} (delegation) with {EVALUATION} (union of the two)",
        "allow",
        identity=[doc(allow())],
        resource=doc(allow(**names(ROOT))),
    ),
    "same account: a resource policy naming the assumed-role session allows it directly": Case(
        f"{EVALUATION}: (paraphrased) a resource-based policy may name an assumed-role session, which it then "
        "grants without an identity-based allow",
        "allow",
        resource=doc(allow(**names(SESSION))),
    ),
    "cross account: the resource policy alone is not enough": Case(
        f"{CROSS}: 'You must also attach an identity-based policy to the identity that acts as the principal in "
        "the request.'",
        "implicit",
        resource=doc(allow(**names(ROLE))),
        resource_account=OTHER,
    ),
    "cross account: the identity policy alone is not enough": Case(
        f"{CROSS}: 'To allow cross-account access, you attach a resource-based policy to the resource that you "
        "want to share.'",
        "implicit",
        identity=[doc(allow())],
        resource_account=OTHER,
    ),
    "cross account: both allow (the resource policy naming the caller's account)": Case(
        f"{CROSS}: 'You can specify the entire account or its IAM users, ... IAM roles, or assumed-role sessions.'",
        "allow",
        identity=[doc(allow())],
        resource=doc(allow(**names(ROOT))),
        resource_account=OTHER,
    ),
    "explicit deny in the identity policy wins over a resource allow": Case(
        f"{EVALUATION}: 'An explicit deny in any of the policies overrides the allow.'",
        "deny",
        identity=[doc(deny())],
        resource=doc(allow(**names(ROLE))),
    ),
    "explicit deny in the resource policy (naming the account) wins over an identity allow": Case(
        f"{EVALUATION}: 'An explicit deny in any of the policies overrides the allow.'",
        "deny",
        identity=[doc(allow())],
        resource=doc(deny(**names(ROOT))),
    ),
    "a condition key missing from the request: the condition is false": Case(
        f"{CONDITIONS}: 'If the key that you specify in a policy condition is not present in the request context, "
        "the values do not match and the condition is false.'",
        "implicit",
        identity=[doc(allow(Condition={"StringEquals": {"s3:prefix": "runs/"}}))],
    ),
    "a condition key missing from the request: ...IfExists holds": Case(
        f"{CONDITIONS} (...IfExists): 'If the policy key is not present in the context of an incoming request, "
        "the request is allowed.' (paraphrased: the condition evaluates to true)",
        "allow",
        identity=[doc(allow(Condition={"StringEqualsIfExists": {"s3:prefix": "runs/"}}))],
    ),
    "a negated operator on a missing key holds": Case(
        f"{CONDITIONS}: 'If the policy condition requires that the key is not matched, such as StringNotLike or "
        "ArnNotLike, and the right key is not present, the condition is true.'",
        "allow",
        identity=[doc(allow(Condition={"StringNotEquals": {"s3:prefix": "secret/"}}))],
    ),
    "ForAllValues on a missing key holds": Case(
        f"{SETS}: ForAllValues '... returns true if there are no context keys in the request.'",
        "allow",
        identity=leading_keys_in("ForAllValues"),
        **QUERY,
    ),
    "ForAllValues on an empty set holds": Case(
        f"{SETS}: ForAllValues '... also returns true if ... the context key resolves to an empty data set' "
        "(paraphrased)",
        "allow",
        identity=leading_keys_in("ForAllValues"),
        context={"dynamodb:LeadingKeys": []},
        **QUERY,
    ),
    "ForAllValues: one value outside the set fails": Case(
        f"{SETS}: 'The condition returns true if every context key value in the request matches at least one "
        "context key value in the policy.'",
        "implicit",
        identity=leading_keys_in("ForAllValues"),
        context={"dynamodb:LeadingKeys": ["a", "b"]},
        **QUERY,
    ),
    "ForAnyValue on a missing key fails": Case(
        f"{SETS}: ForAnyValue '... If there are no context keys in the request, the condition returns false.'",
        "implicit",
        identity=leading_keys_in("ForAnyValue"),
        **QUERY,
    ),
    "aws:PrincipalArn through an assumed-role session is the role's ARN": Case(
        f"{KEYS}: (paraphrased) for an IAM role session the key holds the role's ARN, not the session's",
        "allow",
        resource=doc(allow(**names(SESSION), Condition={"ArnEquals": {"aws:PrincipalArn": ROLE}})),
        context={"aws:PrincipalArn": ROLE},
    ),
    "ArnLike: a wildcard does not span the colon-separated parts of an ARN": Case(
        f"{ARNS}: 'Each of the six colon-delimited components of the ARN is checked separately' (ArnEquals, "
        "ArnLike); 'With an ArnLike condition, which matches elements between colons, the match fails.'",
        "implicit",
        identity=[doc(allow(Condition={"ArnLike": {"aws:PrincipalArn": "arn:*:role/caller"}}))],
    ),
    "Resource: a wildcard does not span the colon-separated parts of an ARN": Case(
        f"{RESOURCE}: 'You can use wildcard characters (* and ?) within any ARN segment (the parts separated by "
        "colons).'",
        "implicit",
        identity=[doc(allow("logs:PutLogEvents", "arn:aws:logs:*:log-group:/aws/lambda/f:*"))],
        action="logs:PutLogEvents",
        target=f"arn:aws:logs:ca-central-1:{ACCOUNT}:log-group:/aws/lambda/f:log-stream:s",
    ),
    "ArnEquals: a wildcard matches within one part of an ARN": Case(
        f"{ARNS}: '... each can include multi-character match wildcards (*) or single-character match wildcards "
        "(?). The ArnEquals and ArnLike condition operators behave identically.'",
        "allow",
        identity=[doc(allow(Condition={"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::*:role/call?r"}}))],
    ),
    "a KMS key policy that does not delegate to IAM: an identity allow is not enough": Case(
        f"{KMS}: 'Unless the key policy explicitly allows it, you cannot use IAM policies to allow access to a "
        "KMS key.'",
        "implicit",
        identity=[doc(allow("kms:Decrypt"))],
        resource=doc(allow("kms:Decrypt", **names(TARGET_ROLE))),
        **KMS_DECRYPT,
    ),
    "a KMS key policy naming the account delegates to IAM: the identity allow decides": Case(
        f"{KMS}: (paraphrased) the default key policy's statement naming the account root lets IAM policies "
        "allow access to the key",
        "allow",
        identity=[doc(allow("kms:Decrypt"))],
        resource=doc(allow("kms:*", **names(ROOT))),
        **KMS_DECRYPT,
    ),
    "a trust policy that does not name the caller: an identity allow for sts:AssumeRole is not enough": Case(
        f"{TRUST}: (paraphrased) a role trust policy is the role's resource-based policy, and it must allow the "
        "caller even in the role's own account",
        "implicit",
        identity=[doc(allow("sts:AssumeRole"))],
        resource=service_trust("lambda.amazonaws.com"),
        **ASSUME_ROLE,
    ),
    "a trust policy naming the account delegates: no identity allow, no assuming": Case(
        f"{TRUST} with {PRINCIPAL} (delegation)",
        "implicit",
        resource=doc({"Effect": "Allow", "Action": "sts:AssumeRole", **names(ROOT)}),
        **ASSUME_ROLE,
    ),
    "a service assumes a role whose trust policy names it, with the source account the condition asks": Case(
        f"{SCHEDULER}: 'We recommend using the aws:SourceArn and aws:SourceAccount global condition context keys in "
        "your schedule execution role ...'; 'The value of aws:SourceArn must be your EventBridge Scheduler schedule "
        "group ARN'",
        "allow",
        resource=SCHEDULER_TRUST,
        **assumed_by("scheduler.amazonaws.com", **SCHEDULER_SOURCE),
    ),
    "a service acting for another account's resource is refused by the aws:SourceAccount condition": Case(
        f"{SCHEDULER}: 'Use aws:SourceAccount if you want to allow any resource in that account to be associated "
        "with the cross-service use.'",
        "implicit",
        resource=SCHEDULER_TRUST,
        **assumed_by("scheduler.amazonaws.com", **(SCHEDULER_SOURCE | {"aws:SourceAccount": OTHER})),
    ),
    "a service with no aws:SourceArn in its request fails a trust condition on aws:SourceArn": Case(
        f"{CONDITIONS}: 'If the key that you specify in a policy condition is not present in the request context, "
        "the values do not match and the condition is false.'",
        "implicit",
        resource=STATES_TRUST,
        **assumed_by("states.amazonaws.com"),
    ),
    "Step Functions assumes a state machine's role when aws:SourceArn is one of the account's state machines": Case(
        f"{STATES}: (paraphrased) use aws:SourceArn and aws:SourceAccount in the state machine role's trust "
        "policy to limit which state machines Step Functions may assume it for",
        "allow",
        resource=STATES_TRUST,
        **assumed_by("states.amazonaws.com", **STATES_SOURCE),
    ),
    "Lambda assumes an execution role whose trust policy names the Lambda service principal": Case(
        f"{LAMBDA}: 'In order for Lambda to properly assume your execution role, the role's trust policy must "
        "specify the Lambda service principal (lambda.amazonaws.com) as a trusted service.'",
        "allow",
        resource=service_trust("lambda.amazonaws.com"),
        **assumed_by("lambda.amazonaws.com"),
    ),
    "a service the trust policy does not name cannot assume the role": Case(
        f"{SERVICE}: (paraphrased) a service principal in a role trust policy lets that service assume the role; "
        "a service the policy does not name is not allowed",
        "implicit",
        resource=service_trust("lambda.amazonaws.com"),
        **assumed_by("states.amazonaws.com", **STATES_SOURCE),
    ),
}


def request_of(case: Case) -> Request:
    if case.caller:
        return Request(case.caller, case.action, case.target, case.context or {}, None, ACCOUNT)
    context = {"aws:PrincipalArn": ROLE, **(case.context or {})}
    return Request(ROLE, case.action, case.target, context, SESSION, case.resource_account)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_double_decides_as_the_documentation_says(case: Case) -> None:
    request = request_of(case)
    if case.action.startswith("kms:"):
        decided = decide_kms(case.identity, case.resource or {}, request)
    else:
        decided = decide(case.identity, case.resource, request, resource_policy_required=case.required)
    assert decided == case.expected


def test_iam_simulate_decides_every_case_as_the_documentation_says() -> None:
    """The independent oracle (tests/support/iam_oracle.py) on the whole table in one batch: where it and the
    documentation differ, the case's sentence decides, and the test says so."""
    simulations = [
        simulation(
            case.identity,
            case.resource or ({} if case.required else None),
            request_of(case),
            resource_policy_required=case.required,
        )
        for case in CASES.values()
    ]
    answers = ask(simulations)
    problems = [
        f"{name}: {why} (the documentation: {case.source})"
        for (name, case), sim, answer in zip(CASES.items(), simulations, answers, strict=True)
        if (why := disagreement(case.expected, sim, answer))
    ]
    assert not problems, "\n".join(problems)


def test_every_case_names_its_source() -> None:
    assert len(CASES) >= 20
    assert all("Guide" in case.source for case in CASES.values())


def test_an_unknown_operator_or_a_single_valued_operator_on_a_set_is_refused_not_guessed() -> None:
    request = Request(ROLE, "s3:GetObject", BUCKET, {"dynamodb:LeadingKeys": ["a"]})
    with pytest.raises(AssertionError, match="not evaluated"):
        decide([doc(allow(Condition={"DateGreaterThan": {"aws:CurrentTime": "2020-01-01"}}))], None, request)
    with pytest.raises(AssertionError, match="multivalued"):
        decide([doc(allow(Condition={"StringEquals": {"dynamodb:LeadingKeys": "a"}}))], None, request)


# --- the double on live calls ---------------------------------------------------------------------------------------


def test_a_signed_request_to_the_domain_needs_the_identity_allow_the_access_policy_delegates_to() -> None:
    domain = f"arn:aws:es:ca-central-1:{ACCOUNT}:domain/d"
    only_the_role = {"ArnEquals": {"aws:PrincipalArn": ROLE}}
    policy = doc(allow("es:ESHttpPost", f"{domain}/reader/_search", **names(ROOT), Condition=only_the_role))
    identities: dict[str, list[dict[str, Any]]] = {ROLE: []}
    access = DomainAccess(domain, policy, lambda role: identities.get(role, []))

    refused = access.refusal(ROLE, "POST", "/reader/_search")
    assert refused == {
        "Message": f"User: {ROLE} is not authorized to perform: es:ESHttpPost on resource: {domain}/reader/_search"
    }
    identities[ROLE] = [doc(allow("es:ESHttpPost", f"{domain}/reader/_search"))]
    assert access.refusal(ROLE, "POST", "/reader/_search") is None
    assert access.refusal(ROLE, "POST", "/other/_search") is not None  # the access policy does not name it
    assert [d for *_, d in access.decided] == ["implicit", "allow", "implicit"]


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A DynamoDB client in moto, in ACCOUNT, with the table TABLE."""
    use_fake_aws(monkeypatch, "ca-central-1")
    monkeypatch.setenv("MOTO_ACCOUNT_ID", ACCOUNT)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="ca-central-1")
        assert client.create_table(**single_table("t"))["TableDescription"]["TableArn"] == TABLE
        yield client


def test_dynamodb_calls_on_a_table_with_a_customer_managed_key_need_the_key(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'How Amazon DynamoDB uses AWS KMS' (DynamoDB Developer Guide): DynamoDB uses the table's KMS key for the
    caller, so the caller needs kms:Decrypt on it (via DynamoDB: kms:ViaService)."""
    via = {"StringEquals": {"kms:ViaService": "dynamodb.ca-central-1.amazonaws.com"}}
    policies = Policies(
        identity={ROLE: [doc(allow("dynamodb:GetItem", TABLE))]},
        key_policies={KEY: doc(allow("kms:*", **names(ROOT)))},
        table_keys={TABLE: KEY},
    )
    calls = SdkCalls(policies, account=ACCOUNT, region="ca-central-1")
    key = {"pk": {"S": "geozone::a"}, "sk": {"S": "1"}}
    asked: list[Request] = []
    observers = [*iam.DECISION_OBSERVERS, lambda *decision: asked.append(decision[2])]
    monkeypatch.setattr(iam, "DECISION_OBSERVERS", observers)
    with calls.installed(), calls.acting(ROLE):
        with pytest.raises(ClientError, match="AccessDenied"):
            dynamodb.get_item(TableName="t", Key=key)
        assert [v.why for v in calls.violations] == ["kms:Decrypt: no statement allows it"]
        policies.identity[ROLE].append(doc(allow("kms:Decrypt", KEY, Condition=via)))
        assert "Item" not in dynamodb.get_item(TableName="t", Key=key)
    # KMS's request carries the global keys and its own, never the DynamoDB call's dynamodb:LeadingKeys.
    (kms_context,) = {tuple(sorted(r.context)) for r in asked if r.action == "kms:Decrypt"}
    assert all(key.startswith(("aws:", "kms:")) for key in kms_context), kms_context


def test_leading_keys_are_the_partition_keys_an_item_call_names(dynamodb: Any) -> None:
    only = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["geozone::canary::*"]}}
    actions = ["dynamodb:PutItem", "dynamodb:Query"]
    policies = Policies(identity={ROLE: [doc(allow(actions, TABLE, Condition=only))]})
    calls = SdkCalls(policies, account=ACCOUNT, region="ca-central-1")
    item = {"pk": {"S": "geozone::canary::run-1"}, "sk": {"S": "1"}}
    with calls.installed(), calls.acting(ROLE):
        dynamodb.put_item(TableName="t", Item=item)
        query = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": item["pk"]}}
        assert dynamodb.query(TableName="t", **query)["Count"] == 1
        with pytest.raises(ClientError, match="AccessDenied"):
            dynamodb.put_item(TableName="t", Item=item | {"pk": {"S": "geozone::bcparks_1"}})
    assert [v.call.operation for v in calls.violations] == ["PutItem"]


def test_requests_over_http_are_decided_for_the_role_their_access_key_belongs_to(dynamodb: Any) -> None:
    """`HttpCalls` in front of a moto server: a DynamoDB call (JSON protocol) and an S3 object call (by method and
    path) of a role's key are decided as `SdkCalls` decides them, answered as the service answers a refusal; a key
    no role owns, and a request the middleware cannot read, are refused, never passed unchecked."""
    s3 = boto3.client("s3", region_name="ca-central-1")
    s3.create_bucket(Bucket="bucket", CreateBucketConfiguration={"LocationConstraint": "ca-central-1"})
    policies = Policies(
        identity={ROLE: [doc(allow("dynamodb:PutItem", TABLE), allow("s3:PutObject", BUCKET))]}
    )
    calls = SdkCalls(policies, account=ACCOUNT, region="ca-central-1", keys={"AKIDROLE": ROLE})
    with moto_over_http(calls) as endpoint:

        def client(service: str, key: str) -> Any:
            credentials = {"aws_access_key_id": key, "aws_secret_access_key": "x"}
            return boto3.client(service, region_name="ca-central-1", endpoint_url=endpoint, **credentials)

        item = {"pk": {"S": "geozone::a"}, "sk": {"S": "1"}}
        client("dynamodb", "AKIDROLE").put_item(TableName="t", Item=item)
        client("s3", "AKIDROLE").put_object(Bucket="bucket", Key="key", Body=b"{}")
        checked = [(c.role, c.action) for c in calls.checked]
        assert checked == [(ROLE, "dynamodb:PutItem"), (ROLE, "s3:PutObject")]
        assert not calls.violations
        for refused in (
            lambda: client("dynamodb", "AKIDROLE").delete_item(TableName="t", Key=item),
            lambda: client("s3", "AKIDROLE").get_object(Bucket="bucket", Key="key"),
            lambda: client("dynamodb", "AKIDNOBODY").put_item(TableName="t", Item=item),
            lambda: client("s3", "AKIDROLE").list_objects_v2(Bucket="bucket"),
        ):
            with pytest.raises(ClientError, match="AccessDenied"):
                refused()
        assert [v.why for v in calls.violations] == [
            "dynamodb:DeleteItem: no statement allows it",
            "s3:GetObject: no statement allows it",
            "no role has this access key",
            "the request is not read here",
        ]
