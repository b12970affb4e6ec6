"""A worker in its own process, so a test can SIGKILL it mid-call. Reads one message and processes it.

Environment: DUETIME_JOBS_TABLE, DUETIME_RUNS_TABLE, DUETIME_CONTROL_TABLE, DUETIME_RUN_QUEUE_URL,
DUETIME_LEASE_SECONDS, DUETIME_HEARTBEAT_SECONDS (and the AWS endpoint variables).
"""

import os

import boto3

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.sqs import SqsConsumer, SqsRunQueue
from duetime.adapters.http_target import HttpTargetCaller
from duetime.execution.worker import Worker
from duetime.ports.queue import decode
from duetime.settings import Settings
from duetime.wiring import make_store, make_store_clock, worker_config


def main() -> None:
    settings = Settings.from_env(dict(os.environ))
    session = boto3.session.Session()
    store = make_store(settings, session.client("dynamodb"))
    sqs = session.client("sqs")
    worker = Worker(
        store,
        store,
        SqsRunQueue(sqs, settings.run_queue_url),
        StoredAlerts(store),
        HttpTargetCaller(allow_private=True),
        make_store_clock(store),
        worker_config(settings),
        owner="doomed-worker",
    )
    consumer = SqsConsumer(sqs, settings.run_queue_url)
    while True:
        messages = consumer.receive(1, wait_seconds=1)
        if messages:
            print("processing", flush=True)
            worker.process(decode(messages[0].body))
            return


if __name__ == "__main__":
    main()
