"""Typed, validated settings for one deployment environment.

Every difference between environments lives here as data; constructs read these records and never branch on
an environment's name. A record refuses a field it does not have when it is built (infra/validation.py); an
``EnvironmentConfig`` then checks every field's type against its annotation and every rule below, and each error
names the offending field as ``<environment>.<field>`` so a bad edit fails synth with one line that says what to
fix. ``environment_map`` checks the environments against each other (names, overlapping ranges in one account).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import math
import re
from collections.abc import Iterable
from dataclasses import field, fields, is_dataclass
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import Any

from refdata.registry import COUNTER, REGISTRY
from search.readers import check_role_name

from infra.validation import ConfigError, check_types, dataclass, nearest

ACCOUNT_ID = re.compile(r"^\d{12}$")
ENVIRONMENT_NAME = re.compile(r"^[a-z][a-z0-9]{1,15}$")
ATTRIBUTE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,254}$")
DOMAIN_NAME = re.compile(r"^[a-z][a-z0-9-]{2,27}$")
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
# A role without a path: fine-grained access control knows a signed request's role from its STS session, which
# carries the role's name but not its path, while the access policy's `aws:PrincipalArn` carries the path.
PATHLESS_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):role/[\w+=,.@-]{1,64}$")
ROLE_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):role/(?P<name>[\w+=,.@/*-]{1,512})$")
ROLE_NAME_PATTERN = re.compile(r"^[\w+=,.@/*-]{1,512}$")
ROLE_NAME = re.compile(r"^[\w+=,.@/-]{1,512}$")
# Members of the IAM Identity Center (SSO) permission set "AdministratorAccess" in the environment's account.
# `*` in an ARN pattern spans "/": with or without the region segment that newer IAM Identity Center instances add
# (aws-reserved/sso.amazonaws.com/<region>/AWSReservedSSO_...; older ones have none).
SSO_ADMINISTRATORS = "aws-reserved/sso.amazonaws.com/*AWSReservedSSO_AdministratorAccess_*"
STREAMS_ENDPOINT = re.compile(r"^vpce-[0-9a-z-]+\.streams\.dynamodb\.[a-z0-9-]+\.vpce\.amazonaws\.com$")
SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
# The network builds one isolated subnet of this size per zone (infra/constructs/network.py).
ISOLATED_SUBNET_MASK = 22
TABLE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{0,31}$")
# The construct id of the main table (``EnvironmentConfig.table``); an additional table's is ``Table<name>``.
MAIN_TABLE = "Table"

# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class RemovalPolicy(StrEnum):
    DESTROY = "destroy"
    RETAIN = "retain"


class CapacityMode(StrEnum):
    ON_DEMAND = "on-demand"
    PROVISIONED = "provisioned"


class Projection(StrEnum):
    KEYS_ONLY = "keys-only"
    INCLUDE = "include"
    ALL = "all"


def _require(condition: bool, path: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{path}: {message}")


def _validate_nested(record: Any, path: str) -> None:
    """Calls ``validate(path)`` on every nested settings record, so errors carry the full dotted path."""
    for f in fields(record):
        value = getattr(record, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for index, item in enumerate(items):
            if is_dataclass(item) and hasattr(item, "validate"):
                suffix = f"[{index}]" if isinstance(value, tuple) else ""
                item.validate(f"{path}.{f.name}{suffix}")


@dataclass(frozen=True, kw_only=True)
class ProvisionedCapacity:
    """Auto-scaled provisioned throughput for the table and each GSI."""

    min_read: int = 5
    max_read: int = 100
    min_write: int = 5
    max_write: int = 100
    target_utilization_percent: int = 70

    def validate(self, path: str) -> None:
        for name in ("min_read", "min_write"):
            _require(getattr(self, name) >= 1, f"{path}.{name}", "must be at least 1")
        _require(self.max_read >= self.min_read, f"{path}.max_read", "must be >= min_read")
        _require(self.max_write >= self.min_write, f"{path}.max_write", "must be >= min_write")
        _require(
            20 <= self.target_utilization_percent <= 90,
            f"{path}.target_utilization_percent",
            "must be between 20 and 90",
        )


@functools.cache
def aws_regions() -> frozenset[str]:
    """Every region of every partition in the endpoint data botocore ships (no hand-kept list)."""
    from botocore.loaders import create_loader

    endpoints = create_loader().load_data("endpoints")
    return frozenset(region for partition in endpoints["partitions"] for region in partition["regions"])


# cfn-lint's per-region lists of OpenSearch instance types (its rule E3653), inside its distribution.
OPENSEARCH_INSTANCE_TYPES = (
    "cfnlint/data/schemas/extensions/aws_opensearchservice_domain/clusterconfig_instancetype_enum.json"
)


@functools.cache
def opensearch_instance_types() -> dict[str, frozenset[str]]:
    """Region -> the OpenSearch instance types offered there: the list cfn-lint ships for its rule E3653 (taken
    from AWS's price list), read from the installed package (no hand-kept list; a newer type needs a newer cfn-lint
    in requirements.txt). botocore's service model has an enum too, but it stops at the 6th generation."""
    # Read from the distribution's files: importing cfnlint would load all of it (seconds), for one JSON file.
    listed = metadata.distribution("cfn-lint").locate_file(OPENSEARCH_INSTANCE_TYPES)
    data = json.loads(Path(str(listed)).read_text())
    return {region: frozenset(entry["enum"]) for region, entry in data.items() if isinstance(entry, dict)}


@functools.cache
def opensearch_warm_instance_types() -> frozenset[str]:
    """The instance types only UltraWarm nodes take (botocore's OpenSearch service model): no data or master node."""
    from botocore.loaders import create_loader

    model = create_loader().load_service_model("opensearch", "service-2")
    return frozenset(model["shapes"]["OpenSearchWarmPartitionInstanceType"]["enum"])


def instance_type_problem(instance_type: str, region: str) -> str | None:
    """Why ``instance_type`` cannot be a data or master node of a domain in ``region``, or None."""
    offered = opensearch_instance_types()
    anywhere = frozenset().union(*offered.values())
    here = offered.get(region, anywhere) - opensearch_warm_instance_types()
    if instance_type in here:
        return None
    if instance_type in opensearch_warm_instance_types():
        return f"{instance_type!r} is an UltraWarm type: warm nodes only, never a data or master node"
    source = "(cfn-lint's list, from AWS's price list: a newer type needs a newer cfn-lint)"
    if instance_type in anywhere:
        return f"{instance_type!r} is not offered in {region}{nearest(instance_type, here)} {source}"
    return f"{instance_type!r} is not an OpenSearch instance type{nearest(instance_type, here)} {source}"


@dataclass(frozen=True, kw_only=True)
class GsiSettings:
    """A global secondary index beyond the built-in sparse ``globalId`` index."""

    name: str
    partition_key: str
    sort_key: str | None = None
    projection: Projection = Projection.KEYS_ONLY
    non_key_attributes: tuple[str, ...] = ()

    def validate(self, path: str) -> None:
        _require(
            bool(re.fullmatch(r"[A-Za-z0-9_.-]{3,255}", self.name)),
            f"{path}.name",
            f"{self.name!r} is not a valid index name (3-255 of A-Z a-z 0-9 _ . -)",
        )
        _require(self.name != "globalId", f"{path}.name", "'globalId' is the built-in index")
        for attr in ("partition_key", "sort_key"):
            value = getattr(self, attr)
            if value is not None:
                _require(
                    bool(ATTRIBUTE_NAME.fullmatch(value)),
                    f"{path}.{attr}",
                    f"{value!r} is not a valid attribute name",
                )
        _require(
            (self.projection is Projection.INCLUDE) == bool(self.non_key_attributes),
            f"{path}.non_key_attributes",
            "must be given exactly when projection is 'include'",
        )


# The seeds' inverted-index pattern (seed 001/002): swap the keys so every item of an entity can be queried
# across partitions. Off by default; add it to an environment's ``extra_gsis`` to turn it on.
INVERTED_INDEX = GsiSettings(name="inverted", partition_key="sk", sort_key="pk")


@dataclass(frozen=True, kw_only=True)
class TableSettings:
    capacity_mode: CapacityMode = CapacityMode.ON_DEMAND
    provisioned: ProvisionedCapacity | None = None
    contributor_insights: bool = False
    ttl_attribute: str = "expiresAt"
    extra_gsis: tuple[GsiSettings, ...] = ()
    backup_enabled: bool = False
    backup_retention_days: int = 35

    def validate(self, path: str) -> None:
        _require(
            (self.capacity_mode is CapacityMode.PROVISIONED) == (self.provisioned is not None),
            f"{path}.provisioned",
            "must be set exactly when capacity_mode is 'provisioned'",
        )
        _require(
            bool(ATTRIBUTE_NAME.fullmatch(self.ttl_attribute)),
            f"{path}.ttl_attribute",
            f"{self.ttl_attribute!r} is not a valid attribute name",
        )
        names = [gsi.name for gsi in self.extra_gsis]
        _require(len(names) == len(set(names)), f"{path}.extra_gsis", f"duplicate index names in {names}")
        _require(len(names) <= 19, f"{path}.extra_gsis", "DynamoDB allows 20 GSIs per table, one is globalId")
        _require(
            1 <= self.backup_retention_days <= 36500,
            f"{path}.backup_retention_days",
            "must be between 1 and 36500",
        )
        _validate_nested(self, path)


def data_schemas() -> tuple[str, ...]:
    """Every schema a source table holds: all but the counter, which lives beside the data it numbers (in every
    table that holds a counted schema), so it is never claimed."""
    return tuple(name for name in REGISTRY if name != COUNTER)


@dataclass(frozen=True, kw_only=True)
class SourceTable:
    """A source table beside the main one (``EnvironmentConfig.additional_tables``): the same hardening, its own
    stream and event source mapping (admitting its own indexable schemas) and its own alarms, synced into the same
    domain. It holds exactly the schemas it claims; the main table holds every schema no additional table claims.

    ``name`` is PascalCase and part of the table's construct id (``Table<name>``), hence of its logical id: it is
    the table's identity and never changes once deployed.
    """

    name: str
    schemas: tuple[str, ...]
    settings: TableSettings = field(default_factory=TableSettings)

    @property
    def construct_id(self) -> str:
        return f"{MAIN_TABLE}{self.name}"

    def validate(self, path: str) -> None:
        _require(
            bool(TABLE_NAME.fullmatch(self.name)),
            f"{path}.name",
            f"{self.name!r} must be PascalCase: 1-32 of A-Z a-z 0-9, starting with a capital letter",
        )
        _require(bool(self.schemas), f"{path}.schemas", "must name at least one schema")
        known = data_schemas()
        for index, schema in enumerate(self.schemas):
            _require(
                schema in known,
                f"{path}.schemas[{index}]",
                f"{schema!r} is not one of {sorted(known)}"
                + (" (the counter lives in every table beside what it numbers)" if schema == COUNTER else ""),
            )
        _require(
            any(REGISTRY[schema].indexable for schema in self.schemas),
            f"{path}.schemas",
            "must hold at least one indexable schema: a source table exists to feed the search domain",
        )
        self.settings.validate(f"{path}.settings")


@dataclass(frozen=True)
class TablePlan:
    """One source table as the stacks build it: its construct id, settings, the schemas it holds, and where its
    settings live in config (for error messages)."""

    construct_id: str
    settings: TableSettings
    schemas: tuple[str, ...]
    path: str

    @property
    def label(self) -> str:
        """How alarms and the dashboard name it: empty for the main table (today's names), else its name."""
        return self.construct_id.removeprefix(MAIN_TABLE)

    @property
    def indexable_schemas(self) -> tuple[str, ...]:
        return tuple(name for name in self.schemas if REGISTRY[name].indexable)


@dataclass(frozen=True, kw_only=True)
class NetworkSettings:
    """A VPC made by the stack (isolated subnets, no NAT) unless ``existing_vpc_id`` names one.

    An existing VPC is described in full here (ids, zones, route tables) so synth never looks anything up.
    """

    cidr: str = "10.40.0.0/16"
    max_azs: int = 3
    existing_vpc_id: str | None = None
    existing_availability_zones: tuple[str, ...] = ()
    existing_isolated_subnet_ids: tuple[str, ...] = ()
    existing_route_table_ids: tuple[str, ...] = ()
    # The DNS name of the existing VPC's DynamoDB Streams interface endpoint (it has no private DNS name), for the
    # ops redrive of the event source mapping's on-failure records.
    existing_dynamodb_streams_endpoint: str | None = None
    # The security group of the existing VPC's interface endpoints (SQS, Lambda, STS, DynamoDB Streams): each
    # function admits itself into it on 443 (required with existing_vpc_id; no group is made for that VPC).
    existing_endpoint_security_group_id: str | None = None
    flow_log_retention_days: int = 90

    @property
    def ip_network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.cidr)

    def validate(self, path: str) -> None:
        try:
            network = ipaddress.IPv4Network(self.cidr, strict=False)
        except ValueError as invalid:
            raise ConfigError(
                f"{path}.cidr: {self.cidr!r} is not an IPv4 network like '10.40.0.0/16' ({invalid})"
            ) from None
        _require(
            str(network) == self.cidr,
            f"{path}.cidr",
            f"{self.cidr!r} has host bits set: the network it names is {str(network)!r}; write that, or the range "
            "you meant",
        )
        _require(16 <= network.prefixlen <= 28, f"{path}.cidr", f"{self.cidr!r}: a VPC is a /16 to a /28")
        _require(1 <= self.max_azs <= 3, f"{path}.max_azs", "must be 1, 2 or 3")
        if self.existing_vpc_id is None:
            room = (
                2 ** (ISOLATED_SUBNET_MASK - network.prefixlen)
                if network.prefixlen <= ISOLATED_SUBNET_MASK
                else 0
            )
            needed = ISOLATED_SUBNET_MASK - (self.max_azs - 1).bit_length()
            _require(
                room >= self.max_azs,
                f"{path}.cidr",
                f"{self.cidr!r} is too small: the network builds one /{ISOLATED_SUBNET_MASK} subnet per zone "
                f"(max_azs {self.max_azs}); use a /{needed} or larger",
            )
        _require(
            self.flow_log_retention_days in LOG_RETENTION_DAYS,
            f"{path}.flow_log_retention_days",
            f"must be one of {LOG_RETENTION_DAYS}",
        )
        if self.existing_vpc_id is not None:
            _require(
                bool(re.fullmatch(r"vpc-[0-9a-f]{8,17}", self.existing_vpc_id)),
                f"{path}.existing_vpc_id",
                f"{self.existing_vpc_id!r} is not a VPC id",
            )
            count = len(self.existing_isolated_subnet_ids)
            _require(count >= 1, f"{path}.existing_isolated_subnet_ids", "required with existing_vpc_id")
            _require(
                len(self.existing_availability_zones) == count,
                f"{path}.existing_availability_zones",
                "needs one zone per subnet",
            )
            _require(
                len(self.existing_route_table_ids) == count,
                f"{path}.existing_route_table_ids",
                "needs one route table per subnet",
            )
            _require(
                self.existing_endpoint_security_group_id is not None,
                f"{path}.existing_endpoint_security_group_id",
                "required with existing_vpc_id: the security group of the VPC's interface endpoints (SQS, Lambda, "
                "STS, DynamoDB Streams), which each function admits itself into on 443",
            )
        if self.existing_endpoint_security_group_id is not None:
            _require(
                self.existing_vpc_id is not None,
                f"{path}.existing_endpoint_security_group_id",
                "is only for an existing VPC (a VPC made here gets its own endpoints and their group)",
            )
            _require(
                bool(SECURITY_GROUP_ID.fullmatch(self.existing_endpoint_security_group_id)),
                f"{path}.existing_endpoint_security_group_id",
                f"{self.existing_endpoint_security_group_id!r} is not a security group id like 'sg-0123456789abcdef0'",
            )
        if self.existing_dynamodb_streams_endpoint is not None:
            _require(
                self.existing_vpc_id is not None,
                f"{path}.existing_dynamodb_streams_endpoint",
                "is only for an existing VPC (a VPC made here gets its own endpoint)",
            )
            _require(
                bool(STREAMS_ENDPOINT.fullmatch(self.existing_dynamodb_streams_endpoint)),
                f"{path}.existing_dynamodb_streams_endpoint",
                f"{self.existing_dynamodb_streams_endpoint!r} is not an endpoint DNS name like "
                "'vpce-0123abcd-5e6f.streams.dynamodb.ca-central-1.vpce.amazonaws.com'",
            )


@dataclass(frozen=True, kw_only=True)
class CognitoLogin:
    """OpenSearch Dashboards sign-in through an existing Amazon Cognito user pool and identity pool.

    Signed-in users act as the identity pool's authenticated role, which the domain's access policy admits;
    map that role to an FGAC role (as the admin) to decide what they may see.
    """

    user_pool_id: str
    identity_pool_id: str
    authenticated_role_arn: str

    def validate(self, path: str) -> None:
        _require(
            bool(re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-\d_[0-9A-Za-z]+", self.user_pool_id)),
            f"{path}.user_pool_id",
            f"{self.user_pool_id!r} is not a Cognito user pool id like 'ca-central-1_AbC123'",
        )
        _require(
            bool(re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-\d:[0-9a-f-]{36}", self.identity_pool_id)),
            f"{path}.identity_pool_id",
            f"{self.identity_pool_id!r} is not a Cognito identity pool id like 'ca-central-1:<uuid>'",
        )
        _require(
            bool(ROLE_ARN.fullmatch(self.authenticated_role_arn)),
            f"{path}.authenticated_role_arn",
            f"{self.authenticated_role_arn!r} is not an IAM role ARN",
        )


@dataclass(frozen=True, kw_only=True)
class SamlLogin:
    """OpenSearch Dashboards sign-in through a SAML 2.0 identity provider (IAM Identity Center, Okta, ...).

    Members of ``master_backend_role`` (a group the IdP puts in the ``roles_key`` attribute) get all access;
    other groups are mapped to FGAC roles by the admin.
    """

    idp_entity_id: str
    idp_metadata_xml: str
    master_backend_role: str
    roles_key: str = "Role"
    session_timeout_minutes: int = 60

    def validate(self, path: str) -> None:
        _require(bool(self.idp_entity_id.strip()), f"{path}.idp_entity_id", "must not be empty")
        _require(
            "EntityDescriptor" in self.idp_metadata_xml and self.idp_entity_id in self.idp_metadata_xml,
            f"{path}.idp_metadata_xml",
            "must be the IdP's SAML metadata document (an EntityDescriptor naming idp_entity_id)",
        )
        _require(bool(self.master_backend_role.strip()), f"{path}.master_backend_role", "must not be empty")
        _require(bool(self.roles_key.strip()), f"{path}.roles_key", "must not be empty")
        _require(
            60 <= self.session_timeout_minutes <= 1440,
            f"{path}.session_timeout_minutes",
            "must be 60-1440 (OpenSearch Service's range)",
        )


@dataclass(frozen=True, kw_only=True)
class ReadRole:
    """A read-only fine-grained-access-control role for application teams and public sites (search.readers).

    The index bootstrap creates it on every deploy (and deletes it once removed from config). It may search,
    count and get documents of ``schemas`` through their read aliases only; document-level security hides
    tombstones and hidden items, field-level security the schemas' internal attributes (refdata.registry).
    Requests signed by the IAM roles in ``iam_role_arns`` act as it, and the domain's access policy admits those
    roles to the aliases' `_search`, `_count` and `_doc` paths; ``backend_roles`` maps further backend roles
    as given (e.g. a SAML group signing in to Dashboards).
    """

    name: str
    schemas: tuple[str, ...]
    iam_role_arns: tuple[str, ...] = ()
    backend_roles: tuple[str, ...] = ()

    def validate(self, path: str) -> None:
        try:
            check_role_name(self.name, f"{path}.name")
        except ValueError as invalid:
            raise ConfigError(str(invalid)) from None
        _require(bool(self.schemas), f"{path}.schemas", "must name at least one indexable schema")
        _require(
            len(set(self.schemas)) == len(self.schemas),
            f"{path}.schemas",
            f"repeats a schema: {self.schemas}",
        )
        indexable = sorted(name for name, schema in REGISTRY.items() if schema.indexable)
        for index, schema in enumerate(self.schemas):
            if schema in REGISTRY and schema not in indexable:
                why = (
                    f"{schema!r} is not indexable (it is never in the search domain); indexable: {indexable}"
                )
            else:
                why = f"{schema!r} is not one of {indexable}{nearest(schema, indexable)}"
            _require(schema in indexable, f"{path}.schemas[{index}]", why)
        _require(
            bool(self.iam_role_arns or self.backend_roles),
            f"{path}.iam_role_arns",
            "a read role needs at least one IAM role ARN or backend role to act as it",
        )
        for index, arn in enumerate(self.iam_role_arns):
            _require(
                bool(PATHLESS_ROLE_ARN.fullmatch(arn)),
                f"{path}.iam_role_arns[{index}]",
                f"{arn!r} must be an IAM role ARN without a path (arn:aws:iam::<account>:role/<name>): "
                "fine-grained access control sees a signed request's role without its path",
            )
        for index, role in enumerate(self.backend_roles):
            _require(bool(role.strip()), f"{path}.backend_roles[{index}]", "must not be empty")

    @property
    def mapped_backend_roles(self) -> tuple[str, ...]:
        """Everything the role mapping lists: the IAM role ARNs, then the other backend roles."""
        return self.iam_role_arns + self.backend_roles


@dataclass(frozen=True, kw_only=True)
class ReaderNetwork:
    """Who may reach the domain's HTTPS port besides the platform's functions: readers' security groups (in the
    domain's VPC, or a peered one in the same region) and CIDRs (a VPN, Direct Connect or peered range), for
    applications and Dashboards users. The network only lets them knock: the access policy and fine-grained access
    control still decide (a reader's IAM role also needs its own identity policy, docs/operations.md)."""

    security_group_ids: tuple[str, ...] = ()
    cidrs: tuple[str, ...] = ()

    def validate(self, path: str) -> None:
        for index, group in enumerate(self.security_group_ids):
            _require(
                bool(SECURITY_GROUP_ID.fullmatch(group)),
                f"{path}.security_group_ids[{index}]",
                f"{group!r} is not a security group id like 'sg-0123456789abcdef0'",
            )
        for index, cidr in enumerate(self.cidrs):
            try:
                network = ipaddress.IPv4Network(cidr, strict=True)
            except ValueError as invalid:
                raise ConfigError(
                    f"{path}.cidrs[{index}]: {cidr!r} is not an IPv4 CIDR ({invalid})"
                ) from None
            _require(
                network.prefixlen >= 8,
                f"{path}.cidrs[{index}]",
                f"{cidr!r} admits more than a /8: name the readers' range",
            )


def http_payload_limit_bytes(instance_type: str) -> int:
    """Amazon OpenSearch Service's documented maximum HTTP request payload per instance size."""
    size = instance_type.split(".")[1] if instance_type.count(".") == 2 else ""
    return (10 if size in {"nano", "micro", "small", "medium", "large"} else 100) * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """OpenSearch domain sizing. ``bulk_max_bytes`` must stay under the instance type's HTTP payload limit."""

    domain_name: str
    engine_version: str = "OpenSearch_3.3"
    data_node_type: str = "t3.small.search"
    data_node_count: int = 1
    master_node_type: str | None = None
    master_node_count: int = 0
    availability_zone_count: int = 1
    replicas: int = 0
    volume_size_gib: int = 10
    volume_iops: int = 3000
    volume_throughput_mibps: int = 125
    bulk_max_bytes: int = 9 * 1024 * 1024
    master_role_arn: str | None = None
    admin_principals: tuple[str, ...] = (SSO_ADMINISTRATORS,)
    dashboards_login: CognitoLogin | SamlLogin | None = None
    snapshot_hour_utc: int = 8
    read_roles: tuple[ReadRole, ...] = ()
    # The network path of readers and Dashboards users into the domain's security group (none by default).
    reader_network: ReaderNetwork = field(default_factory=ReaderNetwork)

    def probe_role_name(self, reader: str) -> str:
        """The IAM role the smoke run signs as to see what read role ``reader`` sees (mapped to it alone; only the
        ops worker may assume it): ``<domain name>-probe-<reader>``, cut to IAM's 64 characters with a hash."""
        name = f"{self.domain_name}-probe-{reader}"
        if len(name) <= 64:
            return name
        digest = hashlib.sha256(reader.encode()).hexdigest()[:8]
        return f"{name[:55]}-{digest}"

    def validate(self, path: str) -> None:
        _require(
            bool(DOMAIN_NAME.fullmatch(self.domain_name)),
            f"{path}.domain_name",
            f"{self.domain_name!r} must be 3-28 of a-z 0-9 -, starting with a letter",
        )
        _require(
            bool(re.fullmatch(r"OpenSearch_\d+\.\d+", self.engine_version)),
            f"{path}.engine_version",
            f"{self.engine_version!r} is not an OpenSearch engine version like 'OpenSearch_3.3'",
        )
        _require(
            self.availability_zone_count in (1, 2, 3), f"{path}.availability_zone_count", "must be 1, 2 or 3"
        )
        _require(
            self.data_node_count >= self.availability_zone_count
            and self.data_node_count % self.availability_zone_count == 0,
            f"{path}.data_node_count",
            "must be a multiple of availability_zone_count",
        )
        _require(
            (self.master_node_type is None) == (self.master_node_count == 0),
            f"{path}.master_node_count",
            "master_node_type and master_node_count go together",
        )
        _require(self.master_node_count in (0, 3, 5), f"{path}.master_node_count", "must be 0, 3 or 5")
        _require(
            0 <= self.replicas < self.data_node_count,
            f"{path}.replicas",
            f"must be 0 to data_node_count - 1 ({self.data_node_count - 1}): a replica never shares a node "
            "with its primary, so more would leave the domain yellow",
        )
        _require(
            self.availability_zone_count == 1 or self.replicas >= 1,
            f"{path}.replicas",
            "a multi-zone domain needs at least one replica, or losing a zone loses shards",
        )
        _require(10 <= self.volume_size_gib <= 16384, f"{path}.volume_size_gib", "must be 10-16384")
        limit = http_payload_limit_bytes(self.data_node_type)
        _require(
            1024 * 1024 <= self.bulk_max_bytes < limit,
            f"{path}.bulk_max_bytes",
            f"must be at least 1 MiB and below {self.data_node_type}'s {limit // 2**20} MiB request limit",
        )
        if self.master_role_arn is not None:
            _require(
                bool(ROLE_ARN.fullmatch(self.master_role_arn)),
                f"{path}.master_role_arn",
                f"{self.master_role_arn!r} is not an IAM role ARN",
            )
        _require(0 <= self.snapshot_hour_utc <= 23, f"{path}.snapshot_hour_utc", "must be 0-23")
        _validate_nested(self, path)
        names = [role.name for role in self.read_roles]
        _require(len(names) == len(set(names)), f"{path}.read_roles", f"repeats a role name: {names}")
        for index, principal in enumerate(self.admin_principals):
            match = ROLE_ARN_PATTERN.fullmatch(principal) or ROLE_NAME_PATTERN.fullmatch(principal)
            name = (match.groupdict().get("name") or principal) if match else ""
            _require(
                match is not None and name.rsplit("/", 1)[-1].strip("*") != "",
                f"{path}.admin_principals[{index}]",
                f"{principal!r} must be an IAM role ARN (pattern) or a role path/name (pattern) in this "
                "environment's account, and must name more than '*'",
            )


@dataclass(frozen=True, kw_only=True)
class SyncSettings:
    """The stream-sync function and its event source mapping."""

    memory_mb: int = 1024
    timeout_seconds: int = 120
    reserved_concurrency: int = 10
    batch_size: int = 1000
    batching_window_seconds: int = 1
    parallelization_factor: int = 1
    max_record_age_seconds: int = 21600
    request_timeout_seconds: int = 30

    def validate(self, path: str) -> None:
        _require(128 <= self.memory_mb <= 10240, f"{path}.memory_mb", "must be 128-10240")
        _require(10 <= self.timeout_seconds <= 900, f"{path}.timeout_seconds", "must be 10-900")
        _require(1 <= self.reserved_concurrency <= 1000, f"{path}.reserved_concurrency", "must be 1-1000")
        _require(1 <= self.batch_size <= 10000, f"{path}.batch_size", "must be 1-10000")
        _require(0 <= self.batching_window_seconds <= 300, f"{path}.batching_window_seconds", "must be 0-300")
        _require(1 <= self.parallelization_factor <= 10, f"{path}.parallelization_factor", "must be 1-10")
        _require(
            60 <= self.max_record_age_seconds <= 604800, f"{path}.max_record_age_seconds", "must be 60-604800"
        )
        _require(
            1 <= self.request_timeout_seconds < self.timeout_seconds,
            f"{path}.request_timeout_seconds",
            "must be at least 1 and below timeout_seconds",
        )


# One consistent read unit reads 4 KiB (docs/operations.md, "Scan or export").
READ_UNIT_BYTES = 4096
# An inline Map state runs at most 40 iterations at once.
MAX_INLINE_MAP_CONCURRENCY = 40
SCHEDULE_EXPRESSION = re.compile(r"^(cron\([^()]+\)|rate\(\d+ (minute|minutes|hour|hours|day|days)\))$")


# Each step of a smoke canary waits this long inside one worker invocation; its three waits and the 240 s the run
# keeps for its cleanup fit the worker's 15 minutes (lambdas/ops/smoke.py). For a new event source mapping the first
# wait goes on in the smoke workflow, a check every 30 s, until the start-up budget (``ops.smoke_startup_minutes``)
# is spent: more than one step's wait (else it allows nothing), at most an hour. AWS says a new mapping "may take
# several minutes to start polling"; HeartbeatMissing waits the budget out before it pages (a pipeline that stops
# silently pages that much later in every environment), and an hour of checks is about 1,100 events of its part's
# 25,000-event history (infra/constructs/ops_workflows.py, STARTUP_CHECK_SECONDS).
SMOKE_WAIT_SECONDS = 120
MIN_SMOKE_STARTUP_MINUTES = SMOKE_WAIT_SECONDS // 60 + 1
MAX_SMOKE_STARTUP_MINUTES = 60


@dataclass(
    frozen=True,
    kw_only=True,
    renamed={
        "smoke_startup_seconds": "'smoke_startup_minutes': the smoke run's start-up budget is in whole minutes "
        f"({MIN_SMOKE_STARTUP_MINUTES}-{MAX_SMOKE_STARTUP_MINUTES}; the former default, 400 s, is 7)"
    },
)
class OpsSettings:
    """The ops workflows (reindex, reconcile, redrive, tombstone purge; docs/operations.md).

    ``max_concurrency`` workers run at once per run (and, with ``reserve_concurrency``, the worker's reserved
    concurrency bounds them across runs), so the domain is never written by more than that many batches at a time.
    A parallel scan reads ``scan_segments`` segments and may consume ``scan_read_units_per_second`` of the table's
    read capacity in total; a table larger than that rate sustains for ``scan_max_hours`` is read from a DynamoDB
    export instead (``export_above_bytes``).
    """

    max_concurrency: int = 4
    # Runs that may go at full speed at once: an operator's long reindex, the nightly purge and the post-deploy
    # smoke run can all overlap, so the worker's reserved concurrency is ``max_concurrency`` for each of three, and
    # no run starves another of workers.
    concurrent_runs: int = 3
    scan_segments: int = 8
    scan_read_units_per_second: int = 400
    scan_max_hours: int = 2
    worker_memory_mb: int = 1024
    # The post-deploy smoke run's start-up budget, in minutes: its first wait goes on in the smoke workflow until this
    # long after a table's event source mapping was last modified, since a new mapping "may take several minutes to
    # start polling" (Lambda Developer Guide). HeartbeatMissing waits it out too
    # (HeartbeatSettings.missing_alarm_periods).
    smoke_startup_minutes: int = 7
    # EventBridge Scheduler expression (UTC) of the tombstone purge.
    purge_schedule: str = "cron(17 3 * * ? *)"

    @property
    def export_above_bytes(self) -> int:
        """The crossover: the bytes a scan reads at its read budget within ``scan_max_hours``."""
        return self.scan_read_units_per_second * READ_UNIT_BYTES * self.scan_max_hours * 3600

    @property
    def worker_concurrency(self) -> int:
        """The worker's reserved concurrency: ``max_concurrency`` workers for each of ``concurrent_runs`` runs."""
        return self.max_concurrency * self.concurrent_runs

    @property
    def read_units_per_segment(self) -> float:
        """Each running segment's share of the read budget (at most ``max_concurrency`` run at once)."""
        return self.scan_read_units_per_second / min(self.max_concurrency, self.scan_segments)

    def validate(self, path: str) -> None:
        _require(
            1 <= self.max_concurrency <= MAX_INLINE_MAP_CONCURRENCY,
            f"{path}.max_concurrency",
            f"must be 1-{MAX_INLINE_MAP_CONCURRENCY} (an inline Map state runs at most that many iterations at once)",
        )
        _require(
            3 <= self.concurrent_runs <= 10,
            f"{path}.concurrent_runs",
            "must be 3-10 (an operator's run, the nightly purge and the post-deploy smoke run can overlap; with "
            "fewer, one of them waits for workers)",
        )
        _require(1 <= self.scan_segments <= 1000, f"{path}.scan_segments", "must be 1-1000")
        _require(
            10 <= self.scan_read_units_per_second <= 40000,
            f"{path}.scan_read_units_per_second",
            "must be 10-40000 (a table's default read throughput quota is 40,000 units per second)",
        )
        _require(1 <= self.scan_max_hours <= 24, f"{path}.scan_max_hours", "must be 1-24")
        _require(512 <= self.worker_memory_mb <= 10240, f"{path}.worker_memory_mb", "must be 512-10240")
        _require(
            MIN_SMOKE_STARTUP_MINUTES <= self.smoke_startup_minutes <= MAX_SMOKE_STARTUP_MINUTES,
            f"{path}.smoke_startup_minutes",
            f"must be {MIN_SMOKE_STARTUP_MINUTES}-{MAX_SMOKE_STARTUP_MINUTES} (minutes): longer than one smoke wait "
            f"({SMOKE_WAIT_SECONDS} s), and at most an hour, since HeartbeatMissing waits it out before it pages",
        )
        _require(
            bool(SCHEDULE_EXPRESSION.fullmatch(self.purge_schedule)),
            f"{path}.purge_schedule",
            f"{self.purge_schedule!r} is not an EventBridge Scheduler cron(...) or rate(...) expression",
        )


@dataclass(frozen=True, kw_only=True)
class HeartbeatSettings:
    """The heartbeat (infra/constructs/heartbeat.py; docs/sync.md, *Heartbeat*): every ``interval_minutes`` an
    EventBridge Scheduler schedule rewrites one heartbeat item per source table, and the sync emits the time from
    that write to the index accepting it; a second schedule counts each heartbeat due. Two alarms per table watch
    them (infra/constructs/monitoring.py), neither breaching on missing data: ``HeartbeatLag`` fires when the
    heartbeats that arrive reach the index ``lag_alarm_seconds`` or more after their write, in each of
    ``alarm_periods`` consecutive intervals; ``HeartbeatMissing`` fires when heartbeats are due and none is indexed
    in each of ``missing_alarm_periods(60 × ops.smoke_startup_minutes)`` consecutive intervals: longer than a new event
    source mapping may take to start polling plus two intervals, so a deploy that creates or recreates a mapping
    does not page while the smoke run still waits for it.
    """

    interval_minutes: int = 1
    lag_alarm_seconds: int = 300
    alarm_periods: int = 3

    def validate(self, path: str) -> None:
        _require(1 <= self.interval_minutes <= 60, f"{path}.interval_minutes", "must be 1-60")
        _require(
            self.lag_alarm_seconds >= 60,
            f"{path}.lag_alarm_seconds",
            "must be at least 60 (one alarm period)",
        )
        _require(
            2 <= self.alarm_periods <= 10,
            f"{path}.alarm_periods",
            "must be 2-10: one interval without a heartbeat is scheduler jitter, not an outage",
        )
        _require(
            self.alarm_periods * self.interval_minutes <= 1440,
            f"{path}.alarm_periods",
            "alarm_periods × interval_minutes must be at most a day (CloudWatch evaluates at most a day)",
        )

    def missing_alarm_periods(self, startup_seconds: int) -> int:
        """``HeartbeatMissing``'s evaluation periods N, at least ``alarm_periods``. It pages only once N periods in a
        row held a heartbeat due and none indexed, which takes more than N - 1 intervals from the first heartbeat
        due; that first count comes after the mapping exists, and the first heartbeat is indexed within the
        mapping's start-up (``startup_seconds``, the smoke run's budget ``ops.smoke_startup_minutes`` in seconds), one
        interval for the next heartbeat and one more for its indexing and the periods' alignment: N - 1 intervals
        must cover ``startup_seconds`` plus two intervals."""
        interval = 60 * self.interval_minutes
        return max(self.alarm_periods, math.ceil(startup_seconds / interval) + 3)


# The search roles infra/constructs/search_access.py names `<domain name>-<purpose>`.
PLATFORM_ROLES = ("search-admin", "stream-sync", "index-bootstrap", "ops-worker")


@dataclass(frozen=True, kw_only=True)
class MonitoringSettings:
    """Alarm thresholds (infra/constructs/monitoring.py; what each alarm means: docs/runbook.md).

    The domain's defaults are AWS's "Recommended CloudWatch alarms for Amazon OpenSearch Service"; the alarms
    that watch a yes/no metric (cluster red, KMS key errors, a failed snapshot, ...) fire at 1 and have no
    setting. Counts are per 5 minutes unless a field says otherwise.
    """

    # Minimum free storage of the fullest data node, as a share of its configured volume (AWS: 25 %).
    free_storage_percent: int = 25
    cpu_percent: int = 80
    jvm_memory_pressure_percent: int = 95
    old_gen_jvm_memory_pressure_percent: int = 80
    master_cpu_percent: int = 50
    master_jvm_memory_pressure_percent: int = 95
    master_old_gen_jvm_memory_pressure_percent: int = 80
    # 5xx answers as a share of the domain's requests, per minute (AWS: 10 %).
    server_error_percent: int = 10
    # New write-thread-pool rejections per minute (AWS: an increase of 1).
    write_rejections: int = 1
    # Read or write throttle events of the table or of one of its indexes.
    throttle_events: int = 1
    table_system_errors: int = 1
    # Oldest stream record an invocation receives, and the sync's own end-to-end lag (per minute, maximum).
    iterator_age_seconds: int = 300
    replication_lag_seconds: int = 300
    # The sync's longest invocation as a share of its timeout.
    duration_timeout_percent: int = 90
    dead_lettered_documents: int = 1
    # Records whose transient retries ran out in the invocation and were handed back to Lambda, in each of
    # three consecutive 5-minute periods: the shard has been held for 15 minutes.
    records_held_for_retry: int = 1

    def validate(self, path: str) -> None:
        percents = [name for name in _MONITORING_FIELDS if name.endswith("_percent")]
        for name in percents:
            _require(1 <= getattr(self, name) <= 100, f"{path}.{name}", "must be 1-100")
        for name in (name for name in _MONITORING_FIELDS if name not in percents):
            _require(getattr(self, name) >= 1, f"{path}.{name}", "must be at least 1")
        for name in ("iterator_age_seconds", "replication_lag_seconds"):
            _require(getattr(self, name) >= 60, f"{path}.{name}", "must be at least 60 (one alarm period)")


_MONITORING_FIELDS = tuple(f.name for f in fields(MonitoringSettings))


@dataclass(frozen=True, kw_only=True)
class EnvironmentConfig:
    name: str
    account: str
    region: str
    removal_policy: RemovalPolicy
    log_retention_days: int
    table: TableSettings
    search: SearchSettings
    # Source tables beside the main one (``table``), each holding the schemas it claims (README, "Add a source table").
    additional_tables: tuple[SourceTable, ...] = ()
    network: NetworkSettings = field(default_factory=NetworkSettings)
    sync: SyncSettings = field(default_factory=SyncSettings)
    ops: OpsSettings = field(default_factory=OpsSettings)
    monitoring: MonitoringSettings = field(default_factory=MonitoringSettings)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    production: bool = False
    # Reserve concurrency for every function (the sync's from sync.reserved_concurrency, one each for the index
    # bootstrap and its provider, the ops worker's from ops.worker_concurrency). Lambda keeps 100 of an account's
    # quota unreserved, so a new account (quota often 10) cannot reserve anything: turn it off there.
    reserve_concurrency: bool = True
    # The role the deploy workflow assumes through GitHub's OIDC provider (docs/deploy.md, "Deploy from GitHub Actions"):
    # a role path/name in this environment's account, or a full role ARN (a role in a tooling account).
    deploy_role: str = "refdata-github-deploy"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        named = isinstance(self.name, str) and bool(ENVIRONMENT_NAME.fullmatch(self.name))
        path = self.name if named else "environment"
        _require(named, f"{path}.name", f"{self.name!r} must be 2-16 of a-z 0-9, starting with a letter")
        check_types(self, path)
        _require(
            bool(ACCOUNT_ID.fullmatch(self.account)),
            f"{path}.account",
            f"{self.account!r} is not a 12-digit AWS account id",
        )
        _require(
            self.region in aws_regions(),
            f"{path}.region",
            f"{self.region!r} is not an AWS region{nearest(self.region, aws_regions())} (the regions botocore "
            "knows; a newer one needs a newer boto3 in requirements.txt)",
        )
        for name in ("data_node_type", "master_node_type"):
            instance_type = getattr(self.search, name)
            problem = None if instance_type is None else instance_type_problem(instance_type, self.region)
            _require(problem is None, f"{path}.search.{name}", problem or "")
        _require(
            self.log_retention_days in LOG_RETENTION_DAYS,
            f"{path}.log_retention_days",
            f"{self.log_retention_days} is not a retention CloudWatch Logs offers: one of {LOG_RETENTION_DAYS}",
        )
        _require(
            bool(ROLE_ARN.fullmatch(self.deploy_role) or ROLE_NAME.fullmatch(self.deploy_role)),
            f"{path}.deploy_role",
            f"{self.deploy_role!r} must be an IAM role ARN or a role path/name (no wildcards)",
        )
        _validate_nested(self, path)
        self._validate_claims(path)
        if self.production:
            _require(
                self.removal_policy is RemovalPolicy.RETAIN,
                f"{path}.removal_policy",
                "a production environment must retain its data ('retain')",
            )
            for plan in self.source_tables:
                _require(
                    plan.settings.backup_enabled,
                    f"{plan.path}.backup_enabled",
                    "a production environment must back up its tables",
                )
            _require(
                self.search.availability_zone_count == 3,
                f"{path}.search.availability_zone_count",
                "a production domain spans three zones",
            )
            _require(
                self.search.master_node_count >= 3,
                f"{path}.search.master_node_count",
                "a production domain has dedicated masters",
            )
        _require(
            self.search.availability_zone_count <= self.network.max_azs,
            f"{path}.search.availability_zone_count",
            "cannot exceed network.max_azs",
        )
        for plan in self.source_tables:
            provisioned = plan.settings.provisioned
            if provisioned is not None:
                field_path = plan.path.removeprefix(f"{path}.")
                _require(
                    self.ops.scan_read_units_per_second <= provisioned.max_read // 2,
                    f"{path}.ops.scan_read_units_per_second",
                    f"must be at most half of {field_path}.provisioned.max_read ({provisioned.max_read // 2}): a "
                    "repair scan must leave the table's own readers their capacity",
                )
        for lag in ("iterator_age_seconds", "replication_lag_seconds"):
            _require(
                getattr(self.monitoring, lag) < self.sync.max_record_age_seconds,
                f"{path}.monitoring.{lag}",
                "must be below sync.max_record_age_seconds, or records are given up before the alarm fires",
            )
        _require(
            self.heartbeat.lag_alarm_seconds < self.sync.max_record_age_seconds,
            f"{path}.heartbeat.lag_alarm_seconds",
            "must be below sync.max_record_age_seconds, or records are given up before the alarm fires",
        )
        platform = {self.role_arn(self.platform_role_name(purpose)) for purpose in PLATFORM_ROLES}
        platform |= {self.search.master_role_arn} if self.search.master_role_arn else set()
        for index, role in enumerate(self.search.read_roles):
            for position, arn in enumerate(role.iam_role_arns):
                _require(
                    arn not in platform,
                    f"{path}.search.read_roles[{index}].iam_role_arns[{position}]",
                    f"{arn!r} is one of the platform's own search roles",
                )

    def _validate_claims(self, path: str) -> None:
        """Every schema belongs to exactly one table: two tables holding one schema could write one document id."""
        names: dict[str, int] = {}
        holder: dict[str, str] = {}
        for index, table in enumerate(self.additional_tables):
            here = f"{path}.additional_tables[{index}]"
            _require(
                table.name not in names,
                f"{here}.name",
                f"{table.name!r} is already the name of additional_tables[{names.get(table.name)}]",
            )
            names[table.name] = index
            for position, schema in enumerate(table.schemas):
                _require(
                    schema not in holder,
                    f"{here}.schemas[{position}]",
                    f"{schema!r} is already held by {holder.get(schema)}",
                )
                holder[schema] = f"additional_tables[{index}] ({table.name})"
        _require(
            any(REGISTRY[name].indexable for name in data_schemas() if name not in holder),
            f"{path}.additional_tables",
            "leave the main table (table) at least one indexable schema: it feeds the search domain too",
        )

    @property
    def source_tables(self) -> tuple[TablePlan, ...]:
        """Every source table, the main one first: each with the schemas it holds (the main table: every schema no
        additional table claims)."""
        claimed = {schema for table in self.additional_tables for schema in table.schemas}
        main = TablePlan(
            MAIN_TABLE,
            self.table,
            tuple(name for name in data_schemas() if name not in claimed),
            f"{self.name}.table",
        )
        return (
            main,
            *(
                TablePlan(
                    table.construct_id,
                    table.settings,
                    tuple(name for name in data_schemas() if name in table.schemas),
                    f"{self.name}.additional_tables[{index}].settings",
                )
                for index, table in enumerate(self.additional_tables)
            ),
        )

    @property
    def retains_data(self) -> bool:
        return self.removal_policy is RemovalPolicy.RETAIN

    def concurrency_reservations(self) -> dict[str, int]:
        """Reserved concurrency per function; empty when the environment reserves none."""
        if not self.reserve_concurrency:
            return {}
        return {
            "stream sync": self.sync.reserved_concurrency,
            "index bootstrap": 1,
            "bootstrap provider": 1,
            "ops worker": self.ops.worker_concurrency,
        }

    def required_concurrency_quota(self) -> int:
        """The account's Lambda concurrency quota this environment needs: its reservations plus the 100 that
        Lambda keeps unreserved (a new account's quota of 10 suffices when nothing is reserved)."""
        reserved = sum(self.concurrency_reservations().values())
        return 100 + reserved if reserved else 10

    @property
    def partition(self) -> str:
        if self.region.startswith("cn-"):
            return "aws-cn"
        return "aws-us-gov" if "-gov-" in self.region else "aws"

    def platform_role_name(self, purpose: str) -> str:
        """The fixed name of one of the platform's own search roles (a purpose of ``PLATFORM_ROLES``)."""
        if purpose not in PLATFORM_ROLES:
            raise ValueError(f"{purpose!r} is not one of the platform roles {PLATFORM_ROLES}")
        return f"{self.search.domain_name}-{purpose}"

    @property
    def smoke_runner_role_name(self) -> str:
        """The role the deploy workflow's smoke run assumes (infra/constructs/smoke.py)."""
        return f"{self.search.domain_name}-smoke-runner"

    def role_arn(self, name: str) -> str:
        """The ARN of the IAM role ``name`` (path included, no leading slash) in this environment's account."""
        return f"arn:{self.partition}:iam::{self.account}:role/{name}"

    @property
    def deploy_role_arn(self) -> str:
        """The ARN of ``deploy_role`` (a path/name resolves in this environment's account)."""
        return self.deploy_role if self.deploy_role.startswith("arn:") else self.role_arn(self.deploy_role)

    def admin_principal_arns(self) -> list[str]:
        """``search.admin_principals`` as role ARN patterns (paths and names resolve in this account)."""
        return [p if p.startswith("arn:") else self.role_arn(p) for p in self.search.admin_principals]


def environment_map(*configs: EnvironmentConfig) -> dict[str, EnvironmentConfig]:
    """The environments by name, checked against each other: names are unique, and the VPCs the stacks build in
    one account never overlap (peering, or a shared transit gateway, needs distinct ranges)."""
    found: dict[str, EnvironmentConfig] = {}
    for config in configs:
        _require(config.name not in found, f"{config.name}.name", "is the name of another environment too")
        found[config.name] = config
    built = [config for config in configs if config.network.existing_vpc_id is None]
    for index, config in enumerate(built):
        for other in built[:index]:
            _require(
                config.account != other.account
                or not config.network.ip_network.overlaps(other.network.ip_network),
                f"{config.name}.network.cidr",
                f"{config.network.cidr} overlaps {other.name}.network.cidr ({other.network.cidr}) in account "
                f"{config.account}: give each environment of an account its own range",
            )
    return found


def unknown_environment(name: str, known: Iterable[str], where: str | None = None) -> ConfigError:
    """The error for a name that is no environment's (given as ``where``, e.g. ``account.<name>``), with the
    nearest one."""
    return ConfigError(f"{where or name}: unknown environment{nearest(name, known)}; known: {sorted(known)}")
