"""Stopping and starting a part of the engine (the pollers, the workers, the reconciler) the way AWS stops a
function: its reserved concurrency set to 0. Lambda then throttles every invocation of it: EventBridge's
ticks and the API's wake-ups of a poller (asynchronous: Lambda keeps a throttled event for its maximum event
age, 60 s for a poller tick, then drops it), and the SQS event source mapping's batches for a worker (the
messages stay in the queue; the mapping backs off until the function takes invocations again).
``PutFunctionConcurrency`` (Lambda API reference: "set it to 0 to throttle all invocations") is the switch;
starting puts back what the stack's template says (its ``ReservedConcurrentExecutions``, or none).

Where: the deployed stack's functions (``--stack``, found in its CloudFormation resources by handler), or
``duetime local``'s, whose gateway answers these three Lambda operations for the functions it runs
(``duetime.local.lambda_control``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

# A part of the engine -> the folder of its handler (``functions/<folder>/handler.handler``), which is the
# local function's name too.
ENGINE_PARTS = {"pollers": "poller", "workers": "worker", "reconciler": "reconciler"}


class EngineSwitchFailed(RuntimeError):
    """Lambda refused or could not be reached (the message says which function and why)."""


@contextmanager
def _calling_lambda(name: str) -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise EngineSwitchFailed(f"function {name}: {exc}") from exc


@dataclass(frozen=True)
class FunctionState:
    name: str
    reserved: int | None  # the reserved concurrency now (None: none, the account's pool)
    stopped: bool  # reserved == 0: every invocation is throttled


@dataclass(frozen=True)
class EngineFunctions:
    """The functions of one part of the engine, and the reserved concurrency each has in the template
    (what ``start`` puts back; None: none)."""

    lambda_client: Any
    template_reserved: dict[str, int | None]

    def states(self) -> list[FunctionState]:
        found = []
        for name in sorted(self.template_reserved):
            with _calling_lambda(name):
                answer = self.lambda_client.get_function_concurrency(FunctionName=name)
            reserved = answer.get("ReservedConcurrentExecutions")
            found.append(FunctionState(name, reserved, reserved == 0))
        return found

    def stop(self) -> list[FunctionState]:
        for name in self.template_reserved:
            with _calling_lambda(name):
                self.lambda_client.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=0)
        return self.states()

    def start(self) -> list[FunctionState]:
        for name, reserved in self.template_reserved.items():
            with _calling_lambda(name):
                if reserved is None:
                    self.lambda_client.delete_function_concurrency(FunctionName=name)
                else:
                    self.lambda_client.put_function_concurrency(
                        FunctionName=name, ReservedConcurrentExecutions=reserved
                    )
        return self.states()


def local_engine_functions(lambda_client: Any, part: str) -> EngineFunctions:
    """``duetime local``'s function of ``part`` (its gateway's Lambda endpoint is ``lambda_client``'s)."""
    return EngineFunctions(lambda_client, {ENGINE_PARTS[part]: None})


def stack_engine_functions(lambda_client: Any, cloudformation: Any, stack: str, part: str) -> EngineFunctions:
    """The deployed ``stack``'s functions of ``part``: its ``AWS::Lambda::Function`` resources whose handler
    is the part's, each with the reserved concurrency its template gives."""
    handler = f"functions/{ENGINE_PARTS[part]}/handler.handler"
    template = cloudformation.get_template(StackName=stack, TemplateStage="Processed")["TemplateBody"]
    resources = template.get("Resources", {}) if isinstance(template, dict) else {}
    reserved: dict[str, int | None] = {}
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack):
        for resource in page["StackResourceSummaries"]:
            if resource["ResourceType"] != "AWS::Lambda::Function" or not resource.get("PhysicalResourceId"):
                continue
            properties = resources.get(resource["LogicalResourceId"], {}).get("Properties", {})
            if properties.get("Handler") != handler:
                continue
            value = properties.get("ReservedConcurrentExecutions")
            reserved[resource["PhysicalResourceId"]] = int(value) if value is not None else None
    if not reserved:
        raise LookupError(f"stack {stack} has no function with handler {handler}")
    return EngineFunctions(lambda_client, reserved)
