"""Every role a service assumes to run what the stacks define (a function's execution role, a state machine's role, a
schedule's target role) admits that service with the request context the service sends, and no other of those
services: decided by the IAM double (tests/support/iam.py), so the session's oracle check puts each decision to
iam-simulate too.

The context each service sends when it assumes the role: EventBridge Scheduler, aws:SourceAccount and aws:SourceArn
the schedule group ("The value of aws:SourceArn must be your EventBridge Scheduler schedule group ARN", Scheduler
User Guide, Confused deputy prevention); Step Functions, aws:SourceAccount and aws:SourceArn the state machine (Step
Functions Developer Guide, Prevent cross-service confused deputy). Lambda documents only that the trust policy must
name its service principal, and no source keys for the execution role: none are sent here, so a trust condition on
them would be refused.
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.config import EnvironmentConfig
from tests.lambdas.ops.workflows_harness import deployed_names, template_policies
from tests.support.cfn import Resolver
from tests.support.iam import Request, decide

SERVICES = ("lambda.amazonaws.com", "states.amazonaws.com", "scheduler.amazonaws.com")


def service_roles(config: EnvironmentConfig, stack: Resolver) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(role ARN, the service that assumes it, the context that service sends) for what `stack` runs."""
    account, region = config.account, config.region
    for function in stack.resources("AWS::Lambda::Function").values():
        yield str(stack(function["Properties"]["Role"])), "lambda.amazonaws.com", {}
    for machine in stack.resources("AWS::StepFunctions::StateMachine").values():
        properties = machine["Properties"]
        arn = f"arn:aws:states:{region}:{account}:stateMachine:{stack(properties['StateMachineName'])}"
        source = {"aws:SourceAccount": account, "aws:SourceArn": arn}
        yield str(stack(properties["RoleArn"])), "states.amazonaws.com", source
    for schedule in stack.resources("AWS::Scheduler::Schedule").values():
        properties = schedule["Properties"]
        group = (
            f"arn:aws:scheduler:{region}:{account}:schedule-group/{properties.get('GroupName', 'default')}"
        )
        source = {"aws:SourceAccount": account, "aws:SourceArn": group}
        yield str(stack(properties["Target"]["RoleArn"])), "scheduler.amazonaws.com", source


def test_each_role_a_service_assumes_admits_that_service_and_no_other(config: EnvironmentConfig) -> None:
    stateful, stateless = deployed_names(config)
    trust = template_policies(stateful, stateless).trust
    roles = [found for stack in (stateful, stateless) for found in service_roles(config, stack)]
    assert {service for _, service, _ in roles} == set(SERVICES), (
        "the stacks no longer run one of the services"
    )
    wrong = []
    for role, service, context in roles:
        for caller in SERVICES:
            request = Request(caller, "sts:AssumeRole", role, context, resource_account=config.account)
            decision = decide([], trust[role], request, resource_policy_required=True)
            if (decision == "allow") != (caller == service):
                wrong.append(f"{caller} assuming {role} (run by {service}): {decision}")
    assert not wrong, "\n".join(wrong)


def test_a_scheduler_role_refuses_the_service_acting_for_another_account(config: EnvironmentConfig) -> None:
    """The schedules' roles are conditioned on aws:SourceAccount: Scheduler running another account's schedule may
    not assume them (the confused deputy the condition is there for)."""
    stateful, stateless = deployed_names(config)
    trust = template_policies(stateful, stateless).trust
    other = "999999999999" if config.account != "999999999999" else "888888888888"
    schedules = [
        (role, context)
        for stack in (stateful, stateless)
        for role, service, context in service_roles(config, stack)
        if service == "scheduler.amazonaws.com"
    ]
    assert schedules
    for role, context in schedules:
        foreign = {
            "aws:SourceAccount": other,
            "aws:SourceArn": context["aws:SourceArn"].replace(f":{config.account}:", f":{other}:"),
        }
        request = Request(
            "scheduler.amazonaws.com", "sts:AssumeRole", role, foreign, resource_account=config.account
        )
        assert decide([], trust[role], request, resource_policy_required=True) == "implicit", role
