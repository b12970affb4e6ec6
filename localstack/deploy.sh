#!/usr/bin/env bash
# Deploy the duetime CDK stack into a Docker-backed LocalStack with cdklocal, then smoke-test it: create
# a team, create a job through the deployed API, and see its run succeed.
# Needs: a Docker engine, Node/npm, and `make venv` done. Run from anywhere: localstack/deploy.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1

docker compose -f localstack/docker-compose.yml up -d
for _ in $(seq 120); do
  curl -s http://127.0.0.1:4566/_localstack/health >/dev/null && break
  sleep 1
done

make lambda-assets
(
  cd infra/cdk
  npm install --no-save --no-audit --no-fund --silent
  npx cdklocal bootstrap
  # No scheduled scaling (Application Auto Scaling for Lambda is not in LocalStack's free edition); the
  # smoke job calls the deployed API itself, which LocalStack serves on a loopback name.
  npx cdklocal deploy --require-approval never \
    -c deletion_protection=false -c scheduled_scaling=false -c allow_private_targets=true \
    --outputs-file "$ROOT/cdk.out/localstack-outputs.json"
)
AWS_ENDPOINT_URL=http://127.0.0.1:4566 .venv/bin/python localstack/smoke_test.py cdk.out/localstack-outputs.json
