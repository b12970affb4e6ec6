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
}
