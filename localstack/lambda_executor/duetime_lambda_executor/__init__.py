"""Run LocalStack's Lambda functions as local processes, without Docker.

LocalStack picks the executor with ``LAMBDA_RUNTIME_EXECUTOR=duetime-process`` (see ``plugin.py``).
"""
