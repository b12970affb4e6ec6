"""AWS list prices used to turn measured usage into dollars. One table, with its date and its page; check the
pricing pages before quoting a figure. us-east-1, no free tier unless a line says so (EventBridge
Scheduler's 14 M free invocations a month are counted, as its users get them)."""

PRICES_AS_OF = "2026-11-01"
PRICES_USD = {
    # https://aws.amazon.com/dynamodb/pricing/on-demand/ (Standard table class)
    "dynamodb_write_request_unit": 0.625 / 1_000_000,  # on-demand, per WRU
    "dynamodb_read_request_unit": 0.125 / 1_000_000,  # on-demand, per RRU
    "dynamodb_storage_gb_month": 0.25,
    # https://aws.amazon.com/dynamodb/pricing/provisioned/: a write / read capacity unit provisioned for an
    # hour (a table's and each GSI's own), and continuous backups (point-in-time recovery) per GB-month of
    # the table's size (its items and its indexes' storage)
    "dynamodb_wcu_hour": 0.00065,
    "dynamodb_rcu_hour": 0.00013,
    "dynamodb_pitr_gb_month": 0.20,
    "sqs_request": 0.40 / 1_000_000,  # standard queue, per 64 KB request
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_second_arm64": 0.0000133334,
    "lambda_gb_second_x86_64": 0.0000166667,
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
    # https://aws.amazon.com/cloudwatch/pricing/ (Logs, Standard class): ingestion per GB (the EMF metric
    # documents included) and archived storage per GB-month (compressed)
    "cloudwatch_logs_ingested_gb": 0.50,
    "cloudwatch_logs_stored_gb_month": 0.03,
    # https://aws.amazon.com/xray/pricing/: traces recorded (Lambda active tracing records one per sampled
    # invocation; the sampler keeps the first request each second, so every poller tick is one).
    "xray_trace_recorded": 5.00 / 1_000_000,
    # https://aws.amazon.com/lambda/pricing/ (Provisioned Mode for ESM): an SQS event poller is one Event
    # Poller Unit, billed per EPU-hour (per second, 1-minute minimum) for the minimum pollers and for those
    # the mapping scales up to.
    "lambda_sqs_event_poller_hour": 0.00925,
    # https://aws.amazon.com/eventbridge/pricing/ (Scheduler): invocations a month past the free 14 M; an
    # EventBridge custom event put on a bus (per 64 KB chunk); an API destination's invocation (the HTTP
    # path: Scheduler -> bus -> rule -> API destination)
    "eventbridge_scheduler_invocation": 1.00 / 1_000_000,
    "eventbridge_scheduler_free_invocations_month": 14_000_000,
    "eventbridge_custom_event": 1.00 / 1_000_000,
    "eventbridge_api_destination_invocation": 0.20 / 1_000_000,
}

# DynamoDB reserved capacity (https://aws.amazon.com/dynamodb/pricing/provisioned/, "Reserved capacity":
# provisioned WCU and RCU of the Standard table class, bought by the 100 for one or three years, a payment
# up front and a lower hourly rate): what it saves on provisioned capacity kept all term, as AWS states it
# ("up to 77%"; about 54% for one year). An option beside the bill, never in it: it is a commitment.
RESERVED_CAPACITY_SAVING = {"one_year": 0.54, "three_years": 0.77}
