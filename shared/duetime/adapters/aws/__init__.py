"""Adapters to AWS services other than DynamoDB: SQS, SNS, Lambda, STS, the lean HTTP transport and the
store's clock. boto3 and botocore are imported here and in the other adapters only."""
