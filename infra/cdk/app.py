#!/usr/bin/env python3
"""The duetime CDK app: one stack, configured by CDK context (infra/cdk/README.md lists the settings).

`make synth` runs it through the CDK CLI (`cdk synth`, with `CDK_ARGS="-c key=value ..."`), which merges
cdk.json's context with the -c pairs, passes them as CDK_CONTEXT_JSON, and passes the account and region of
the caller's credentials, if any, as CDK_DEFAULT_ACCOUNT/CDK_DEFAULT_REGION. `make diff` and `make deploy`
take the assembly it wrote. Run directly (`python app.py`), only CDK_CONTEXT_JSON configures it.

An unknown context key or a bad value stops the synth with a message naming it.
"""

import os
import sys
from pathlib import Path

import aws_cdk as cdk

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared"))

from duetime_cdk.config import ContextError
from duetime_cdk.stack import duetime_app

app = cdk.App(outdir=os.environ.get("CDK_OUTDIR"))
try:
    duetime_app(app, os.environ)
except ContextError as exc:
    sys.exit(f"duetime: {exc}")
app.synth()
