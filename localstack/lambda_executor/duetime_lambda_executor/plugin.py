"""The plux entry point LocalStack looks up by ``LAMBDA_RUNTIME_EXECUTOR=duetime-process``."""

from __future__ import annotations

from typing import Any

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class ProcessRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "duetime-process"

    def load(self, *args: Any, **kwargs: Any) -> type:
        from .executor import ProcessRuntimeExecutor  # only imported when LocalStack chooses this executor
        from .sqs_event_source import install

        install()  # AWS's SQS polling for the event source mappings, when DUETIME_SQS_LONG_POLLING is set
        return ProcessRuntimeExecutor
