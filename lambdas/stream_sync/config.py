"""The stream sync's settings, read only from environment variables that the stack sets (see docs/sync.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from stream_sync.tables import SchemaTables

_T = TypeVar("_T")

DEFAULT_BULK_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_DLQ_MAX_MESSAGE_BYTES = 256 * 1024
MIB = 1024 * 1024
# The share of the function's memory an invocation may hold as encoded bulk lines (docs/sync.md, "Memory and
# time"): the rest is the runtime, the event, one geometry being parsed (about 9 times its size) and a request.
WORK_BUDGET_SHARE = 8
DEFAULT_MEMORY_MB = 1024


RECORD_AGE_MARGIN_SECONDS = 300


def budget_for_memory(memory_mb: int) -> int:
    """The bytes of encoded lines an invocation holds at most, for a function of `memory_mb`."""
    return memory_mb * MIB // WORK_BUDGET_SHARE


def worst_batch_invocations(batch_size: int, *, bulk_max_bytes: int, work_budget_bytes: int) -> int:
    """Invocations the worst batch takes, each completing at least one slice of the work budget: `batch_size`
    records each naming a geometry object of the bulk cap (a larger one is refused unread; a smaller one packs
    more into a slice)."""
    per_invocation = max(1, work_budget_bytes // bulk_max_bytes)
    return -(-batch_size // per_invocation)


class ConfigError(ValueError):
    """An environment variable is missing or invalid; the message names it."""


def required_env(environ: Mapping[str, str], name: str) -> str:
    """The variable's value; a ConfigError naming it when it is unset or blank."""
    value = environ.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is required")
    return value


def parsed_env(
    environ: Mapping[str, str], name: str, parse: Callable[[str], _T], default: _T | None = None
) -> _T:
    """The variable parsed, or `default` when it is unset (required when there is no default); a ConfigError
    naming it when it does not parse."""
    raw = environ.get(name, "").strip()
    if not raw:
        if default is None:
            raise ConfigError(f"{name} is required")
        return default
    try:
        return parse(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a valid {parse.__name__}") from None


def schema_tables_env(environ: Mapping[str, str], *, required: bool = False) -> SchemaTables:
    """``SCHEMA_TABLES`` (which table holds which schema); empty when it is unset and not `required`."""
    raw = required_env(environ, "SCHEMA_TABLES") if required else environ.get("SCHEMA_TABLES", "").strip()
    try:
        return SchemaTables.parse(raw) if raw else SchemaTables()
    except ValueError as error:
        raise ConfigError(f"SCHEMA_TABLES {error}") from None


@dataclass(frozen=True)
class Settings:
    opensearch_endpoint: str
    region: str
    dlq_url: str
    geometry_bucket: str | None = None
    bulk_max_bytes: int = DEFAULT_BULK_MAX_BYTES
    request_timeout_seconds: float = 30.0
    max_record_age_seconds: int = -1
    record_age_margin_seconds: int = RECORD_AGE_MARGIN_SECONDS
    max_attempts: int = 5
    retry_base_seconds: float = 0.2
    retry_max_seconds: float = 10.0
    deadline_margin_seconds: float = 3.0
    dlq_max_message_bytes: int = DEFAULT_DLQ_MAX_MESSAGE_BYTES
    metrics_namespace: str = "RefData/StreamSync"
    log_level: str = "INFO"
    schema_tables: SchemaTables = field(default_factory=SchemaTables)  # empty: no wrong-table check
    work_budget_bytes: int = budget_for_memory(DEFAULT_MEMORY_MB)
    environment: str | None = None  # the platform environment: a dimension of every metric (the handler's)

    def __post_init__(self) -> None:
        checks: list[tuple[bool, str]] = [
            (self.bulk_max_bytes >= 1024, "BULK_MAX_BYTES must be at least 1024"),
            (self.request_timeout_seconds > 0, "REQUEST_TIMEOUT_SECONDS must be positive"),
            (
                self.max_record_age_seconds == -1 or self.max_record_age_seconds >= 60,
                "MAX_RECORD_AGE_SECONDS must be -1 (no limit) or at least 60",
            ),
            (self.record_age_margin_seconds >= 0, "RECORD_AGE_MARGIN_SECONDS must not be negative"),
            (self.max_attempts >= 1, "BULK_MAX_ATTEMPTS must be at least 1"),
            (self.retry_base_seconds >= 0, "RETRY_BASE_SECONDS must not be negative"),
            (
                self.retry_max_seconds >= self.retry_base_seconds,
                "RETRY_MAX_SECONDS must be >= RETRY_BASE_SECONDS",
            ),
            (self.deadline_margin_seconds >= 0, "DEADLINE_MARGIN_SECONDS must not be negative"),
            (self.dlq_max_message_bytes >= 1024, "DLQ_MAX_MESSAGE_BYTES must be at least 1024"),
            (self.work_budget_bytes >= 1024, "WORK_BUDGET_BYTES must be at least 1024"),
            (
                self.log_level in ("DEBUG", "INFO", "WARNING", "ERROR"),
                "LOG_LEVEL must be DEBUG/INFO/WARNING/ERROR",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @property
    def dead_letter_age_seconds(self) -> float | None:
        """Records older than this that still fail transiently go to the DLQ with their payload."""
        if self.max_record_age_seconds < 0:
            return None
        return float(max(self.max_record_age_seconds - self.record_age_margin_seconds, 0))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        def required(name: str) -> str:
            return required_env(environ, name)

        def optional(name: str, parse: Callable[[str], _T], default: _T) -> _T:
            return parsed_env(environ, name, parse, default)

        region = environ.get("AWS_REGION", "").strip() or environ.get("AWS_DEFAULT_REGION", "").strip()
        if not region:
            raise ConfigError("AWS_REGION is required (the Lambda runtime sets it)")
        # Lambda sets the function's memory; elsewhere (the redrive CLI, tests) the default function's.
        memory_mb = optional("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", int, DEFAULT_MEMORY_MB)
        return cls(
            opensearch_endpoint=required("OPENSEARCH_ENDPOINT"),
            region=region,
            dlq_url=required("DLQ_URL"),
            geometry_bucket=environ.get("GEOMETRY_BUCKET", "").strip() or None,
            bulk_max_bytes=optional("BULK_MAX_BYTES", int, DEFAULT_BULK_MAX_BYTES),
            request_timeout_seconds=optional("REQUEST_TIMEOUT_SECONDS", float, 30.0),
            max_record_age_seconds=optional("MAX_RECORD_AGE_SECONDS", int, -1),
            record_age_margin_seconds=optional("RECORD_AGE_MARGIN_SECONDS", int, RECORD_AGE_MARGIN_SECONDS),
            max_attempts=optional("BULK_MAX_ATTEMPTS", int, 5),
            retry_base_seconds=optional("RETRY_BASE_SECONDS", float, 0.2),
            retry_max_seconds=optional("RETRY_MAX_SECONDS", float, 10.0),
            deadline_margin_seconds=optional("DEADLINE_MARGIN_SECONDS", float, 3.0),
            dlq_max_message_bytes=optional("DLQ_MAX_MESSAGE_BYTES", int, DEFAULT_DLQ_MAX_MESSAGE_BYTES),
            metrics_namespace=environ.get("METRICS_NAMESPACE", "").strip() or "RefData/StreamSync",
            log_level=(environ.get("LOG_LEVEL", "").strip() or "INFO").upper(),
            schema_tables=schema_tables_env(environ),
            work_budget_bytes=optional("WORK_BUDGET_BYTES", int, budget_for_memory(memory_mb)),
            environment=environ.get("ENVIRONMENT_NAME", "").strip() or None,
        )
