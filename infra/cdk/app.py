#!/usr/bin/env python3
"""The duetime CDK app. `make synth` writes cdk.out/; `make deploy` deploys it (see infra/cdk/README.md).

Context (cdk.json or -c key=value):
  deletion_protection   true (default) | false: tables and their data survive a stack deletion
  partition_groups      "0-15,16-31,32-47,48-63": one poller Lambda and one EventBridge rule per group
  worker_max_concurrency 100: the SQS event source's maximum concurrency
  peak_workers          90: provisioned worker concurrency held over the daily peak
  peak_scale_up         "cron(55 23 * * ? *)": when to raise it (UTC), a few minutes before midnight
  peak_scale_down       "cron(15 0 * * ? *)": when to lower it again
  alert_email           optional: subscribe this address to the alerts topic
  lambda_asset          build/lambda: the code asset (relative to the repository root); must be built (.built)
  lambda_architecture   arm64 | x86_64: by default what the asset's wheels are built for; if set, must match
  localstack            false (default) | true: leave out what LocalStack community cannot create or run
                        (the TeamAuthorizer, the dashboard, scheduled scaling); the api function checks tokens
  (and scheduled_scaling, allow_private_targets, worker_batch_size, api_rate_limit, api_burst_limit:
  infra/cdk/README.md)
"""

import os
import sys
from pathlib import Path

import aws_cdk as cdk

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared"))

from duetime_cdk.config import StackConfig
from duetime_cdk.stack import DuetimeStack, check_with_cdk_nag

app = cdk.App(outdir=os.environ.get("CDK_OUTDIR"))
config = StackConfig.from_context(app.node)
stack = DuetimeStack(
    app,
    app.node.try_get_context("stack_name") or "Duetime",
    config=config,
    env=cdk.Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
    ),
)
check_with_cdk_nag(app)
app.synth()
