"""The mistakes people make editing infra/environments.py end in one line naming the field and what to do.

Each case edits every shipped environment the way a person would (a string for a number, an enum's value, a
misspelt field, a CIDR with host bits set, too small, or overlapping another environment of the account); the last
tests run the commands people run (`python app.py`, `python -m infra.…`) on a scratch copy with the mistake planted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from refdata.registry import REGISTRY, indexable_schemas

from infra.config import (
    ConfigError,
    EnvironmentConfig,
    NetworkSettings,
    RemovalPolicy,
    SourceTable,
    aws_regions,
    environment_map,
    instance_type_problem,
    opensearch_instance_types,
)
from infra.environments import environments

ROOT = Path(__file__).resolve().parents[2]

INDEXED = indexable_schemas()[0].name  # any indexable schema of the registry


def fails_with(message: str):  # type: ignore[no-untyped-def]
    return pytest.raises(ConfigError, match=f"^{re.escape(message)}$")


def test_a_string_for_an_integer_names_the_field_and_the_type(config: EnvironmentConfig) -> None:
    with fails_with(f"{config.name}.network.max_azs: must be an integer, not '2' (str)"):
        replace(config, network=replace(config.network, max_azs="2"))  # type: ignore[arg-type]


def test_a_string_for_the_log_retention_is_refused_as_a_string_not_as_a_period(
    config: EnvironmentConfig,
) -> None:
    with fails_with(f"{config.name}.log_retention_days: must be an integer, not '30' (str)"):
        replace(config, log_retention_days="30")  # type: ignore[arg-type]


def test_a_boolean_is_not_an_integer(config: EnvironmentConfig) -> None:
    with fails_with(f"{config.name}.sync.batch_size: must be an integer, not True (bool)"):
        replace(config, sync=replace(config.sync, batch_size=True))


def test_an_enum_given_as_its_value_is_accepted(config: EnvironmentConfig) -> None:
    policy = "retain" if config.production else config.removal_policy.value
    assert replace(config, removal_policy=policy).removal_policy is RemovalPolicy(policy)  # type: ignore[arg-type]


def test_a_one_element_tuple_without_its_comma_says_so(config: EnvironmentConfig) -> None:
    roles = config.search.read_roles
    if not roles:
        pytest.skip("no read role configured")
    role = replace(roles[0], schemas=roles[0].schemas)
    schema = role.schemas[0]
    broken = replace(config.search, read_roles=(replace(role, schemas=schema),))  # type: ignore[arg-type]
    with fails_with(
        f"{config.name}.search.read_roles[0].schemas: must be a tuple of string, not {schema!r} (str) "
        "(a one-element tuple needs a trailing comma: ('x',))"
    ):
        replace(config, search=broken)


def test_a_list_for_a_tuple_becomes_a_tuple(config: EnvironmentConfig) -> None:
    listed = replace(config, network=replace(config.network, existing_route_table_ids=[]))  # type: ignore[arg-type]
    assert listed.network.existing_route_table_ids == ()


def test_an_unknown_field_names_the_nearest_valid_one() -> None:
    with fails_with("NetworkSettings: unknown field 'max_az' (did you mean 'max_azs'?)"):
        NetworkSettings(max_az=2)  # type: ignore[call-arg]


def test_an_unknown_top_level_field_names_the_nearest_valid_one(config: EnvironmentConfig) -> None:
    with fails_with("EnvironmentConfig: unknown field 'removal_polcy' (did you mean 'removal_policy'?)"):
        replace(config, removal_polcy="retain")


def test_a_missing_field_is_named() -> None:
    with fails_with("SourceTable: missing field 'schemas'"):
        SourceTable(name="Extra")  # type: ignore[call-arg]


def test_a_cidr_with_host_bits_set_names_the_network_it_would_become(config: EnvironmentConfig) -> None:
    network = config.network.ip_network
    shifted = f"{network.network_address + 256}/{network.prefixlen}"
    with fails_with(
        f"{config.name}.network.cidr: {shifted!r} has host bits set: the network it names is "
        f"{str(network)!r}; write that, or the range you meant"
    ):
        replace(config, network=replace(config.network, cidr=shifted))


def test_a_cidr_with_a_bad_octet_is_refused_before_synth(config: EnvironmentConfig) -> None:
    with pytest.raises(
        ConfigError, match=rf"^{config.name}\.network\.cidr: '10\.400\.0\.0/16' is not an IPv4 network"
    ):
        replace(config, network=replace(config.network, cidr="10.400.0.0/16"))


def test_a_cidr_too_small_for_one_subnet_per_zone_names_the_size_needed(config: EnvironmentConfig) -> None:
    if config.network.existing_vpc_id is not None:
        pytest.skip("an existing VPC brings its own subnets")
    for max_azs in range(config.search.availability_zone_count, 4):
        needed = {1: 22, 2: 21, 3: 20}[max_azs]
        too_small = f"{config.network.ip_network.network_address}/{needed + 1}"
        with fails_with(
            f"{config.name}.network.cidr: {too_small!r} is too small: the network builds one /22 subnet per zone "
            f"(max_azs {max_azs}); use a /{needed} or larger"
        ):
            replace(config, network=replace(config.network, cidr=too_small, max_azs=max_azs))
        fits = f"{config.network.ip_network.network_address}/{needed}"
        replace(config, network=replace(config.network, cidr=fits, max_azs=max_azs))


def test_environments_of_one_account_with_overlapping_ranges_are_refused() -> None:
    first, second, *_ = environments().values()
    overlapping = replace(
        second, account=first.account, network=replace(second.network, cidr=first.network.cidr)
    )
    with fails_with(
        f"{second.name}.network.cidr: {first.network.cidr} overlaps {first.name}.network.cidr "
        f"({first.network.cidr}) in account {first.account}: give each environment of an account its own range"
    ):
        environment_map(first, overlapping)


def test_the_same_range_in_another_account_is_fine() -> None:
    first, second, *_ = environments().values()
    elsewhere = replace(second, network=replace(second.network, cidr=first.network.cidr))
    assert elsewhere.account != first.account
    environment_map(first, elsewhere)


def test_two_environments_with_one_name_are_refused() -> None:
    first, *_ = environments().values()
    with fails_with(f"{first.name}.name: is the name of another environment too"):
        environment_map(first, first)


# --- the commands people run ----------------------------------------------------------------------------------


def run(
    directory: Path, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """This Python run in ``directory`` with ``arguments``, its output captured."""
    return subprocess.run(
        [sys.executable, *arguments], cwd=directory, env=env, capture_output=True, text=True, timeout=120
    )


def scratch_copy(directory: Path, pattern: str, replacement: str) -> Path:
    """The app's sources in ``directory`` with the first match of ``pattern`` in infra/environments.py replaced."""
    copy = directory / "repo"
    for name in ("infra", "lambdas", "ops"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("app.py", "cdk.json", "cdk.context.json"):
        shutil.copy(ROOT / name, copy / name)
    environments_py = copy / "infra" / "environments.py"
    text = environments_py.read_text()
    planted = re.sub(pattern, replacement, text, count=1)
    assert planted != text
    environments_py.write_text(planted)
    return copy


@pytest.fixture(scope="module")
def broken_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app's sources with the first environment's network given ``max_azs="2"``."""
    return scratch_copy(tmp_path_factory.mktemp("broken"), r"max_azs=(\d)", r'max_azs="\1"')


def planted_line(copy: Path) -> int:
    """The line where the planted mistake is written (not the ``EnvironmentConfig(`` call Python reports)."""
    lines = (copy / "infra" / "environments.py").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if 'max_azs="' in line)


@pytest.mark.parametrize(
    "command",
    [
        ["app.py"],
        ["-m", "infra.report", "--deploy-target", next(iter(environments()))],
        ["-m", "infra.report", "--acknowledgments"],
        ["-m", "infra.generated", "--check"],
        ["-m", "infra.diagram"],
        ["-m", "ops", "smoke", "--env", next(iter(environments()))],
        ["-m", "ops", "reindex", "--env", next(iter(environments())), "--schema", INDEXED],
    ],
    ids=lambda command: " ".join(command),
)
def test_every_command_prints_a_config_error_as_one_line_and_exits_2(
    broken_copy: Path, command: list[str]
) -> None:
    done = run(broken_copy, *command)
    first = next(iter(environments()))
    expected = (
        f"config error: infra/environments.py:{planted_line(broken_copy)}: "
        f"{first}.network.max_azs: must be an integer, not '2' (str)"
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", expected + "\n")


def test_a_misspelt_instance_type_fails_the_app_in_one_line_at_its_own_line_with_the_type_meant(
    tmp_path: Path,
) -> None:
    """`r7g.lage.search` passed synth: only the `.search` suffix was checked, and cfn-lint caught it 90 s into the
    tests."""
    written = re.search(r'data_node_type="(?P<type>[^"]+)"', (ROOT / "infra" / "environments.py").read_text())
    if written is None:
        pytest.skip("no environment writes its data_node_type")
    family, size, suffix = written["type"].split(".")
    typo = f"{family}.{size[:-2]}{size[-1]}.{suffix}"
    copy = scratch_copy(tmp_path, re.escape(written[0]), f'data_node_type="{typo}"')
    done = run(copy, "app.py")
    lines = (copy / "infra" / "environments.py").read_text().splitlines()
    line = next(number for number, text in enumerate(lines, 1) if f'"{typo}"' in text)
    environment = next(
        name for name, config in environments().items() if config.search.data_node_type == written["type"]
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert re.fullmatch(
        rf"config error: infra/environments\.py:{line}: {environment}\.search\.data_node_type: '{re.escape(typo)}' is "
        rf"not an OpenSearch instance type \(did you mean '{re.escape(written['type'])}'\?\) [^\n]*\n",
        done.stderr,
    ), done.stderr


def test_an_unknown_field_names_the_nearest_field_that_takes_the_value_given() -> None:
    from infra.config import SearchSettings

    # `data_node_type` is the closer name, but only `data_node_count` takes a number.
    with fails_with("SearchSettings: unknown field 'data_nodes' (did you mean 'data_node_count'?)"):
        SearchSettings(domain_name="refdata-dev", data_nodes=2)  # type: ignore[call-arg]
    with fails_with("SearchSettings: unknown field 'data_nodes' (did you mean 'data_node_type'?)"):
        SearchSettings(domain_name="refdata-dev", data_nodes="m7g.large.search")  # type: ignore[call-arg]


def test_a_misspelt_region_is_refused_with_the_nearest_one_botocore_knows(config: EnvironmentConfig) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"^{config.name}\.region: 'ca-centrl-1' is not an AWS region \(did you mean 'ca-central-1'\?\)",
    ):
        replace(config, region="ca-centrl-1")
    # A real region, not a pattern: any other one botocore knows that offers the environment's instance types.
    types = [t for t in (config.search.data_node_type, config.search.master_node_type) if t is not None]
    elsewhere = next(
        region
        for region in sorted(opensearch_instance_types())
        if region != config.region
        and region in aws_regions()
        and all(instance_type_problem(t, region) is None for t in types)
    )
    assert replace(config, region=elsewhere).region == elsewhere


def test_a_read_role_on_a_schema_that_is_never_indexed_says_so(config: EnvironmentConfig) -> None:
    from infra.config import ReadRole

    never = next(s.name for s in REGISTRY.values() if not s.indexable)
    role = ReadRole(name="app_reader", schemas=(INDEXED, never), iam_role_arns=())
    with pytest.raises(
        ConfigError, match=rf"\.schemas\[1\]: '{never}' is not indexable \(it is never in the search"
    ):
        replace(config, search=replace(config.search, read_roles=(role,)))
    misspelt = ReadRole(name="app_reader", schemas=(INDEXED[:-1],), iam_role_arns=())
    with pytest.raises(
        ConfigError,
        match=rf"\.schemas\[0\]: '{INDEXED[:-1]}' is not one of .* \(did you mean '{INDEXED}'\?\)",
    ):
        replace(config, search=replace(config.search, read_roles=(misspelt,)))


def test_ops_help_works_with_a_broken_config_and_names_the_mistake_once(broken_copy: Path) -> None:
    done = run(broken_copy, "-m", "ops", "--help")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.count("must be an integer, not '2' (str)") == 1
    assert "usage: python -m ops" in done.stdout


def test_an_infra_command_prints_no_jsii_banner(tmp_path: Path) -> None:
    """jsii's Node end-of-life banner came out of `python -m infra.report` as eleven lines of Python byte strings."""
    import os

    environment = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE")}
    imports = "import infra.report, aws_cdk"  # what every infra command does first: jsii starts
    done = run(ROOT, "-c", imports, env=environment)
    assert done.returncode == 0 and done.stderr == ""
