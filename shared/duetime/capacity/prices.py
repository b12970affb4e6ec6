"""AWS list prices used to turn measured usage into dollars. One table, with its date; check the pricing
pages before quoting a figure. us-east-1, on-demand, no free tier."""

PRICES_AS_OF = "2026-11-01"
PRICES_USD = {
    "dynamodb_write_request_unit": 0.625 / 1_000_000,  # on-demand, per WRU
    "dynamodb_read_request_unit": 0.125 / 1_000_000,  # on-demand, per RRU
    "dynamodb_storage_gb_month": 0.25,
    "sqs_request": 0.40 / 1_000_000,  # standard queue, per 64 KB request
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_second_arm64": 0.0000133334,
    "eventbridge_scheduled_invocation": 0.0,  # rules on a schedule carry no event charge
    # https://aws.amazon.com/lambda/pricing/ (Provisioned Concurrency, Arm): per GB-second configured,
    # charged from enabling to disabling, rounded up to 5 minutes; duration of invocations is on top.
    "lambda_provisioned_concurrency_gb_second_arm64": 0.0000033334,
    # https://aws.amazon.com/cloudwatch/pricing/: a dashboard a month; a standard-resolution alarm metric a
    # month (a metric-math alarm is billed for each metric it reads); a custom metric a month (first
    # 10,000 metrics; EMF metrics from Lambda included; prorated by the hour it is published in).
    "cloudwatch_dashboard_month": 3.00,
    "cloudwatch_alarm_metric_month": 0.10,
    "cloudwatch_custom_metric_month": 0.30,
    # https://aws.amazon.com/xray/pricing/: traces recorded (Lambda active tracing records one per sampled
    # invocation; the sampler keeps the first request each second, so every poller tick is one).
    "xray_trace_recorded": 5.00 / 1_000_000,
    # https://aws.amazon.com/lambda/pricing/ (Provisioned Mode for ESM): an SQS event poller is one Event
    # Poller Unit, billed per EPU-hour (per second, 1-minute minimum) for the minimum pollers and for those
    # the mapping scales up to.
    "lambda_sqs_event_poller_hour": 0.00925,
}
