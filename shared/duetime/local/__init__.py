"""duetime on one machine: ``duetime local`` (the functions in one process against DynamoDB Local and
LocalStack), API Gateway's and Lambda's parts of it, the demo target and the stack deployed into LocalStack.
Never imported by a function on AWS."""
