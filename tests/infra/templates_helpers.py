"""Assertions over the synthesized stacks that several infra test modules share (a test module imports no
other): ARNs as the stacks write them, policies as (effect, action, resource) triples, the stateless stack's
hand-over values resolved to the stateful resources they name (``resolve``), the functions, roles, mappings,
streams, dead-letter queues, alarms and dashboard, and the pinned logical ids."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Capture

from infra.config import EnvironmentConfig
from tests.infra.conftest import table_ids
from tests.support.template import Template

FUNCTION = "AWS::Lambda::Function"
MAPPING = "AWS::Lambda::EventSourceMapping"
QUEUE = "AWS::SQS::Queue"
MANAGED_POLICY = "AWS::IAM::ManagedPolicy"
SYNC_HANDLER = "stream_sync.handler.handler"
SYNC_ROLE_DESCRIPTION = "DynamoDB stream to OpenSearch sync"
XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
TLS_ONLY = {"Bool": {"aws:SecureTransport": "false"}}  # where a TLS-only policy denies
STREAM_READ_ACTIONS = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"]
ITEM_WRITES = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
ALARM = "AWS::CloudWatch::Alarm"
DASHBOARD = "AWS::CloudWatch::Dashboard"
GTE = "GreaterThanOrEqualToThreshold"
BOOTSTRAP = "Custom::OpenSearchIndexBootstrap"
BOOTSTRAP_HANDLER = "index_bootstrap.handler.on_event"
WORKER_HANDLER = "ops.worker.handler"
WORKER_ROLE = "Ops workflows worker (reindex, reconcile, redrive, tombstone purge)"
GiB = 2**20  # KiB


def handed_over(stateful: Template) -> dict[str, Any]:
    """Name -> value of each SSM parameter the stateful stack writes for the stateless stack."""
    parameters = stateful.find_resources("AWS::SSM::Parameter").values()
    return {parameter["Properties"]["Name"]: parameter["Properties"]["Value"] for parameter in parameters}


def resolve(stateful: Template, stateless: Template, value: Any) -> Any:
    """``value`` with every value handed over by the stateful stack replaced by the stateful expression for it.

    The stateless stack reads deploy-time values as SSM-typed template parameters (``infra.handoff``); each
    parameter's default names an ``AWS::SSM::Parameter`` of the stateful stack, whose ``Value`` is substituted.
    Roles have fixed names, so the stateless stack names them by literal ARN or name: those become the stateful
    role's ``Fn::GetAtt``/``Ref``.
    """
    written = handed_over(stateful)
    literals: dict[str, Any] = {
        name: written[parameter["Default"]]
        for name, parameter in stateless.to_json().get("Parameters", {}).items()
        if parameter["Type"].startswith("AWS::SSM::Parameter::Value<") and parameter["Default"] in written
    }
    references = {}
    for logical_id, role in stateful.find_resources("AWS::IAM::Role").items():
        name = role["Properties"].get("RoleName")
        if name:
            references[name] = {"Ref": logical_id}
            references[f":role/{name}"] = {"Fn::GetAtt": [logical_id, "Arn"]}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Ref"} and node["Ref"] in literals:
                return literals[node["Ref"]]
            return {key: walk(item) for key, item in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, str) and node in references:
            return references[node]
        if isinstance(node, str) and node.startswith("arn:") and ":role/" in node:
            return references.get(node[node.index(":role/") :], node)
        return node

    return walk(value)


def one(template: Template, resource_type: str, properties: dict[str, Any] | None = None) -> tuple[str, Any]:
    found = template.find_resources(resource_type, {"Properties": properties} if properties else None)
    assert len(found) == 1, f"expected one {resource_type} like {properties}, found {sorted(found)}"
    return next(iter(found.items()))


def get_att(template: Template, resource_type: str, attribute: str, **properties: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [one(template, resource_type, properties or None)[0], attribute]}


def aws_arn(service: str, *resource: Any) -> dict[str, Any]:
    """``arn:<partition>:<service>:<region>:<account><resource>``, as the stacks write a regional ARN."""
    partition, region, account = ({"Ref": f"AWS::{name}"} for name in ("Partition", "Region", "AccountId"))
    return {"Fn::Join": ["", ["arn:", partition, f":{service}:", region, ":", account, *resource]]}


def s3_arn(bucket_id: str, suffix: str = "") -> dict[str, Any]:
    """The ARN of the bucket ``bucket_id`` (a logical id), or of its objects under ``suffix``."""
    parts = ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Ref": bucket_id}, *([suffix] if suffix else [])]
    return {"Fn::Join": ["", parts]}


def regional_endpoint(service: str) -> dict[str, Any]:
    """``<service>.<region>.amazonaws.com``, as the stacks write a regional service principal or endpoint."""
    return {"Fn::Join": ["", [f"{service}.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}


def kms_via(service: str) -> dict[str, Any]:
    """The condition that admits the data key's use only through ``service`` (`kms:ViaService`)."""
    return {"StringEquals": {"kms:ViaService": regional_endpoint(service)}}


def data_key_arn(stateful: Template) -> dict[str, Any]:
    return get_att(stateful, "AWS::KMS::Key", "Arn")


def role_arn(stateful: Template, description: str) -> dict[str, Any]:
    return get_att(stateful, "AWS::IAM::Role", "Arn", Description=description)


def domain_endpoint(stateful: Template) -> dict[str, Any]:
    return get_att(stateful, "AWS::OpenSearchService::Domain", "DomainEndpoint")


def subnet_refs(stateful: Template) -> list[dict[str, str]]:
    return [{"Ref": logical_id} for logical_id in stateful.find_resources("AWS::EC2::Subnet")]


def permissions(policy: dict[str, Any]) -> set[tuple[str, str, str]]:
    """A policy document as (effect, action, resource) triples, independent of how statements are merged; a
    statement's condition is part of its resource (`<resource> when <condition>`), so it is never ignored."""
    triples = set()
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        for action in actions:
            for resource in resources:
                triples.add((statement["Effect"], action, _scoped(resource, statement.get("Condition"))))
    return triples


def allow(actions: list[str], resource: Any, when: dict[str, Any] | None = None) -> set[tuple[str, str, str]]:
    return {("Allow", action, _scoped(resource, when)) for action in actions}


def allow_each(actions: list[str], resources: list[Any]) -> set[tuple[str, str, str]]:
    return {triple for resource in resources for triple in allow(actions, resource)}


def _scoped(resource: Any, condition: dict[str, Any] | None) -> str:
    text = json.dumps(resource, sort_keys=True)
    return text if condition is None else f"{text} when {json.dumps(condition, sort_keys=True)}"


def assert_admits_only_the_functions_on_https(stateful: Template, stateless: Template, group_id: str) -> None:
    """The stateful security group ``group_id`` admits the stateless functions' groups on 443, and nothing else."""
    group = {"Fn::GetAtt": [group_id, "GroupId"]}
    ingress = resolve(stateful, stateless, stateless.find_resources("AWS::EC2::SecurityGroupIngress"))
    rules = [rule["Properties"] for rule in ingress.values() if rule["Properties"]["GroupId"] == group]
    functions = [
        {"Fn::GetAtt": [id_, "GroupId"]} for id_ in stateless.find_resources("AWS::EC2::SecurityGroup")
    ]
    assert len(rules) == 3  # the sync, the index bootstrap and the ops worker
    for rule in rules:
        assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 443, 443)
        assert rule["SourceSecurityGroupId"] in functions


def policy_attached_to(template: Template, stateful: Template, role: dict[str, Any]) -> dict[str, Any]:
    """The one managed policy in ``template`` whose roles resolve to ``role`` (``Ref`` form)."""
    found = [
        policy["Properties"]
        for policy in template.find_resources(MANAGED_POLICY).values()
        if resolve(stateful, template, policy["Properties"].get("Roles", [])) == [role]
    ]
    assert len(found) == 1, found
    return found[0]


def geometry_bucket(stateful: Template) -> str:
    return one(stateful, "AWS::S3::Bucket", {"LoggingConfiguration": {"LogFilePrefix": "geometry/"}})[0]


def sync_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    return one(stateless, FUNCTION, {"Handler": SYNC_HANDLER})


def dead_letter_queue_id(stateless: Template) -> str:
    destinations = {
        json.dumps(mapping["Properties"]["DestinationConfig"])
        for mapping in stateless.find_resources(MAPPING).values()
    }
    (destination,) = destinations  # every table's mapping gives up into the one queue
    return str(json.loads(destination)["OnFailure"]["Destination"]["Fn::GetAtt"][0])


def stream_arns(stateful: Template, config: EnvironmentConfig) -> dict[str, dict[str, Any]]:
    """Construct id -> the stream ARN of each source table."""
    return {
        construct_id: {"Fn::GetAtt": [logical_id, "StreamArn"]}
        for construct_id, logical_id in table_ids(stateful, config).items()
    }


def schema_tables(stateful: Template, stateless: Template, value: Any) -> dict[str, str]:
    """An environment variable carrying ``SCHEMA_TABLES`` as {schema: logical id of the table named}."""
    resolved = resolve(stateful, stateless, value)
    separator, parts = resolved["Fn::Join"]
    text = separator.join(part if isinstance(part, str) else _table_of_stream_name(part) for part in parts)
    return dict(json.loads(text))


def _table_of_stream_name(part: dict[str, Any]) -> str:
    """``{"Fn::Select": [1, {"Fn::Split": ["/", <stream ARN>]}]}``, the table name cut from its stream's ARN."""
    index, split = part["Fn::Select"]
    separator, arn = split["Fn::Split"]
    assert (index, separator) == (1, "/")
    return str(arn["Fn::GetAtt"][0])


def expected_schema_tables(stateful: Template, config: EnvironmentConfig) -> dict[str, str]:
    ids = table_ids(stateful, config)
    return {schema: ids[plan.construct_id] for plan in config.source_tables for schema in plan.schemas}


def mappings(stateful: Template, stateless: Template, config: EnvironmentConfig) -> dict[str, dict[str, Any]]:
    """Construct id of each source table -> the properties of the one mapping that reads its stream."""
    by_stream = {json.dumps(arn): construct_id for construct_id, arn in stream_arns(stateful, config).items()}
    found: dict[str, dict[str, Any]] = {}
    for mapping in stateless.find_resources(MAPPING).values():
        construct_id = by_stream[
            json.dumps(resolve(stateful, stateless, mapping["Properties"]["EventSourceArn"]))
        ]
        assert construct_id not in found, f"two mappings read the stream of {construct_id}"
        found[construct_id] = mapping["Properties"]
    return found


def admitted_prefixes(mapping: dict[str, Any]) -> list[str]:
    (item,) = mapping["FilterCriteria"]["Filters"]
    pattern = json.loads(item["Pattern"])
    assert set(pattern) == {"dynamodb"} and set(pattern["dynamodb"]) == {"Keys"}
    assert set(pattern["dynamodb"]["Keys"]) == {"pk"}
    rules = pattern["dynamodb"]["Keys"]["pk"]["S"]
    assert all(set(rule) == {"prefix"} for rule in rules), rules
    return [rule["prefix"] for rule in rules]


def alarm_name(config: EnvironmentConfig, kind: str, *subject: str) -> str:
    """An alarm's name: a per-table alarm's subject is its table's label, "" (none) for the main table."""
    return "-".join(filter(None, (f"refdata-{config.name}-{kind}", *subject)))


def sync_namespace(stateless: Template) -> str:
    _, function = sync_function(stateless)
    return str(function["Properties"]["Environment"]["Variables"]["METRICS_NAMESPACE"])


def alarms_by_name(template: Template, resource_type: str = ALARM) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        resource["Properties"]["AlarmName"]: (logical_id, resource["Properties"])
        for logical_id, resource in template.find_resources(resource_type).items()
    }


def mapping_refs(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> dict[str, dict[str, str]]:
    """Each table's label -> the Ref (its UUID) of the event source mapping that reads its stream."""
    labels = {plan.construct_id: plan.label for plan in config.source_tables}
    by_stream = {json.dumps(arn): construct_id for construct_id, arn in stream_arns(stateful, config).items()}
    return {
        labels[
            by_stream[json.dumps(resolve(stateful, stateless, mapping["Properties"]["EventSourceArn"]))]
        ]: {"Ref": logical_id}
        for logical_id, mapping in stateless.find_resources("AWS::Lambda::EventSourceMapping").items()
    }


_dashboards: dict[int, dict[str, Any]] = {}


def dashboard(stateful: Template, stateless: Template) -> dict[str, Any]:
    """The dashboard body as CloudWatch receives it, each deploy-time value resolved to the stateful resource."""
    if id(stateless) not in _dashboards:
        (resource,) = stateless.find_resources(DASHBOARD).values()
        separator, parts = resource["Properties"]["DashboardBody"]["Fn::Join"]
        tokens = {f"@token{n}@": part for n, part in enumerate(resolve(stateful, stateless, parts))}
        text = separator.join(
            part if isinstance(part, str) else f"@token{n}@" for n, part in enumerate(parts)
        )

        def substitute(node: Any) -> Any:
            if isinstance(node, dict):
                return {key: substitute(value) for key, value in node.items()}
            if isinstance(node, list):
                return [substitute(value) for value in node]
            return tokens.get(node, node) if isinstance(node, str) else node

        _dashboards[id(stateless)] = substitute(json.loads(text))
    return _dashboards[id(stateless)]


def handler_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    return one(stateless, FUNCTION, {"Handler": BOOTSTRAP_HANDLER})


def framework_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    """The function CloudFormation calls: the one the custom resource's service token names."""
    token = Capture()
    stateless.has_resource_properties(BOOTSTRAP, {"ServiceToken": {"Fn::GetAtt": [token, "Arn"]}})
    return token.as_string(), stateless.find_resources(FUNCTION)[token.as_string()]


def framework_dead_letter_queue_id(stateless: Template) -> str:
    _, framework = framework_function(stateless)
    return framework["Properties"]["DeadLetterConfig"]["TargetArn"]["Fn::GetAtt"][0]


def worker_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    return one(stateless, FUNCTION, {"Handler": WORKER_HANDLER})


def worker_role(stateful: Template) -> dict[str, str]:
    return {"Ref": one(stateful, "AWS::IAM::Role", {"Description": WORKER_ROLE})[0]}


def ops_bucket(stateful: Template) -> str:
    (bucket_id,) = stateful.find_resources(
        "AWS::S3::Bucket", {"Properties": {"LoggingConfiguration": {"LogFilePrefix": "ops/"}}}
    )
    return bucket_id


def objects(stateful: Template, prefix: str) -> dict[str, Any]:
    return s3_arn(ops_bucket(stateful), f"/{prefix}")


def handed_table_arns(
    stateful: Template, config: EnvironmentConfig, suffix: str = ""
) -> list[dict[str, Any]]:
    """Each source table's ARN as the stateless stack builds it: from the table name in its handed-over stream
    ARN."""
    prefix = f"arn:aws:dynamodb:{config.region}:{config.account}:table/"
    names = [{"Fn::Select": [1, {"Fn::Split": ["/", arn]}]} for arn in stream_arns(stateful, config).values()]
    return [{"Fn::Join": ["", [prefix, name, *([suffix] if suffix else [])]]} for name in names]


def table_arns(stateful: Template, config: EnvironmentConfig) -> dict[str, Any]:
    """Construct id of each source table -> its ARN as the stateless stack builds it."""
    pairs = zip(
        (plan.construct_id for plan in config.source_tables), handed_table_arns(stateful, config), strict=True
    )
    return dict(pairs)


def quoted(expression: Any) -> str:
    """A CloudFormation expression as ``joined`` keeps it."""
    return json.dumps(expression).replace('"', "'")


def admitted(stateful: Template, probe_arn: str) -> set[tuple[str, str, str]]:
    """What the domain's access policy admits the principal ``probe_arn`` (matched by `aws:PrincipalArn`) to."""
    (domain,) = stateful.find_resources("AWS::OpenSearchService::Domain").values()
    statements = [
        {key: value for key, value in statement.items() if key not in ("Principal", "Condition")}
        for statement in domain["Properties"]["AccessPolicies"]["Statement"]
        if f'{probe_arn}"' in json.dumps(statement.get("Condition", {}))
    ]
    return permissions({"Statement": statements})
