"""The REST API: API Gateway in front of the api function, teams authenticated by bearer token."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from cdk_nag import NagSuppressions
from constructs import Construct

from duetime.adapters.dynamodb.tables import TEAM_JOBS_INDEX
from duetime_cdk.config import StackConfig
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.pollers import Pollers
from duetime_cdk.queue import RunQueue
from duetime_cdk.storage import Storage

# cdk-nag findings the API answers, and why.
MANAGED_LOGGING_POLICY = [
    {
        "id": "AwsSolutions-IAM4",
        "reason": "API Gateway's account-level logging role uses the AWS managed "
        "AmazonAPIGatewayPushToCloudWatchLogs policy, which exists for exactly this.",
    }
]
NO_WAF_REASON = (
    "WAF is the operator's choice (cost, rule sets); throttling and {guard} are in "
    "place. Attach a web ACL to the stage where policy requires one."
)
PUBLIC_ROUTES = [
    {
        "id": "AwsSolutions-APIG4",
        "reason": "The health check, the OpenAPI document and the console's static files are public "
        "by design (the console asks for the token and sends it only to the /v1 API).",
    },
    {"id": "AwsSolutions-COG4", "reason": "Public routes: no authorizer of any kind."},
]
TOKENS_CHECKED_BY_THE_AUTHORIZER = [
    {
        "id": "AwsSolutions-COG4",
        "reason": "Teams authenticate with bearer tokens checked by the "
        "TeamAuthorizer Lambda (a TOKEN authorizer), not Cognito.",
    }
]
TOKENS_CHECKED_BY_THE_API_FUNCTION = [  # localstack=true
    {
        "id": "AwsSolutions-APIG4",
        "reason": "No Lambda authorizer (localstack=true: LocalStack community runs none); the api "
        "function checks every bearer token against the team catalog and answers 401 without one.",
    },
    {
        "id": "AwsSolutions-COG4",
        "reason": "Teams authenticate with bearer tokens, checked by the api function itself here, "
        "not Cognito.",
    },
]


# What API Gateway answers by itself (before or instead of the api function), in the API's own error shape
# (``ErrorOut``: {"error": {"code", "message"}}) instead of its {"message": ...}: response type -> the
# status (None: API Gateway's own), the code, and headers. Every path reaches the api function (``_routes``:
# a catch-all), so MISSING_AUTHENTICATION_TOKEN (out of the box a 403 "Missing Authentication Token") is
# left only for a method API Gateway serves on no resource (TRACE, CONNECT, a made-up one): a 405, whose
# Allow names every method the API serves somewhere (API Gateway cannot tell the path's own; the function
# answers a served method the path does not take with the path's exact Allow). Every other 4xx and 5xx
# falls to DEFAULT_4XX / DEFAULT_5XX.
SERVED_METHODS = "DELETE, GET, PATCH, POST, PUT"
GATEWAY_ERRORS: dict[str, tuple[str | None, str, dict[str, str]]] = {
    "UNAUTHORIZED": ("401", "unauthorized", {}),  # the TeamAuthorizer's refusal
    "ACCESS_DENIED": ("403", "forbidden", {}),  # its Deny: a disabled team
    "MISSING_AUTHENTICATION_TOKEN": ("405", "method_not_allowed", {"Allow": SERVED_METHODS}),
    "THROTTLED": ("429", "rate_limited", {"Retry-After": "1"}),  # the stage's throttle
    "REQUEST_TOO_LARGE": ("413", "payload_too_large", {}),
    "UNSUPPORTED_MEDIA_TYPE": ("415", "unsupported_media_type", {}),
    "BAD_REQUEST_BODY": ("400", "bad_request", {}),
    "BAD_REQUEST_PARAMETERS": ("400", "bad_request", {}),
    "DEFAULT_4XX": (None, "bad_request", {}),
    "DEFAULT_5XX": (None, "internal", {}),
}
# API Gateway's own words for what went wrong, as a JSON string ($context.error.messageString is quoted)
GATEWAY_ERROR_TEMPLATE = '{"error": {"code": "%s", "message": $context.error.messageString}}'


def gateway_error_shapes(api: apigateway.RestApi) -> None:
    """API Gateway's own answers (``GATEWAY_ERRORS``) in the API's error shape."""
    for response_type, (status, code, headers) in GATEWAY_ERRORS.items():
        api.add_gateway_response(
            response_type.lower().replace("_", "-"),
            type=getattr(
                apigateway.ResponseType, response_type.replace("_4XX", "_4_XX").replace("_5XX", "_5_XX")
            ),
            status_code=status,
            response_headers={name: f"'{value}'" for name, value in headers.items()},
            templates={"application/json": GATEWAY_ERROR_TEMPLATE % code},
        )


class Api(Construct):
    """API Gateway (REST) -> the api function. ``/v1/{proxy+}`` is behind the ``TeamAuthorizer`` (a TOKEN
    authorizer, results cached ``authorizer_cache_seconds``, 5 minutes by default) unless the config leaves
    it out (``localstack``); the api function checks every request's token itself too, so a revoked token is
    refused at once whatever the authorizer cached. ``/healthz``, ``/v1/openapi.json`` and the console's
    files (``/console/...``) are public. Stage throttling, JSON access logs, X-Ray."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        code: LambdaCode,
        storage: Storage,
        queue: RunQueue,
        pollers: Pollers,
        worker_role: iam.Role,
        config: StackConfig,
    ) -> None:
        """``pollers``: the api function wakes a quiet group's poller when a job is written due soon
        (``duetime.scheduling.wake``): it counts the wake on the group's lease (UpdateItem on the control
        table) and may invoke the poller. ``worker_role``: a role being registered is checked as the worker
        calls it (``duetime.adapters.aws.role_trust_probe``): the api function may take the worker's role,
        which trusts it for that, and its session may only ask STS (a session policy)."""
        super().__init__(scope, id)
        api_function = DuetimeFunction(
            self,
            "Handler",
            code=code,
            handler="functions/api/handler.handler",
            service="api",
            timeout=cdk.Duration.seconds(29),
            reserved_concurrency=config.api_reserved_concurrency or None,
            environment={**pollers.wake_environment(), "DUETIME_WORKER_ROLE_ARN": worker_role.role_arn},
            statements=api_statements(storage, queue, pollers, worker_role),
        )
        assert worker_role.assume_role_policy is not None  # a Role's trust policy, which CDK always makes
        worker_role.assume_role_policy.add_statements(
            iam.PolicyStatement(actions=["sts:AssumeRole"], principals=[api_function.role])
        )
        handler = api_function.function
        self.functions: list[lambda_.Function] = [handler]
        authorizer: apigateway.TokenAuthorizer | None = None
        if config.team_authorizer:
            authorizer_function, authorizer = self._team_authorizer(code, storage, config)
            self.functions.insert(0, authorizer_function)  # first, as ever: the throttles sum keeps its order
        self.rest_api = self._rest_api(handler, authorizer, config)

    def _team_authorizer(
        self, code: LambdaCode, storage: Storage, config: StackConfig
    ) -> tuple[lambda_.Function, apigateway.TokenAuthorizer]:
        """The TOKEN authorizer in front of /v1, and its function, which reads the team catalog."""
        authorizer_function = DuetimeFunction(
            self,
            "Authorizer",
            code=code,
            handler="functions/authorizer/handler.handler",
            service="authorizer",
            timeout=cdk.Duration.seconds(10),
            statements=[allow(["dynamodb:GetItem", "dynamodb:BatchGetItem"], [storage.table_arn("control")])],
        ).function
        authorizer = apigateway.TokenAuthorizer(
            self,
            "TeamAuthorizer",
            handler=authorizer_function,
            results_cache_ttl=cdk.Duration.seconds(config.authorizer_cache_seconds),
        )
        return authorizer_function, authorizer

    def _rest_api(
        self, handler: lambda_.IFunction, authorizer: apigateway.IAuthorizer | None, config: StackConfig
    ) -> apigateway.RestApi:
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        api = apigateway.RestApi(
            self,
            "Default",  # the construct's default child: CDK leaves it out of logical ids (ApiUrl, stage)
            # Not named after the stack, though API Gateway's metrics carry the name (ApiName), so two stacks
            # in a region share the 5xx metric: LocalStack replaces a renamed RestApi and the update fails
            # ("Stage already exists"), so an installation could not be upgraded in place (the upgrade drill).
            rest_api_name="duetime",
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.DESTROY,
            deploy_options=apigateway.StageOptions(
                stage_name="v1-stage",
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                tracing_enabled=True,
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
        )
        gateway_error_shapes(api)
        public, private = _routes(api, apigateway.LambdaIntegration(handler), authorizer)
        _suppress_with_reasons(api, public, private, team_authorizer=authorizer is not None)
        return api


def api_statements(
    storage: Storage, queue: RunQueue, pollers: Pollers, worker_role: iam.Role
) -> list[iam.PolicyStatement]:
    """What the api function may do: the teams' jobs and runs, the control table, queue triggered runs,
    wake a poller, and ask STS as the worker."""
    jobs, runs, control = (storage.table_arn(t) for t in ("jobs", "runs", "control"))
    return [
        allow(
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"],
            [jobs],
        ),
        allow(["dynamodb:Query"], [storage.index_arn("jobs", TEAM_JOBS_INDEX)]),
        allow(  # Query: a job's runs are one partition of the runs table; PartiQLInsert: a backfill's
            # runs, 25 INSERTs a BatchExecuteStatement (IAM authorizes each statement); BatchGetItem:
            # the success-deadline flags of the jobs an answer shows (deadline_watches.py)
            [
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:Query",
                "dynamodb:PartiQLInsert",
                "dynamodb:BatchGetItem",
            ],
            [runs],
        ),
        allow(
            [
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:BatchGetItem",
                "dynamodb:DeleteItem",
                "dynamodb:Query",
            ],
            [control],
        ),  # teams, token hashes, idempotency keys, marks, the pollers' wake counts; jobs' label and
        # name-word index items (put and deleted with the job) and change history (job_index.py); teams'
        # calendars and their history (calendars.py)
        queue.allow_send(),
        pollers.allow_wake(),
        allow(["sts:AssumeRole"], [worker_role.role_arn]),  # to ask STS as the worker (Api's docstring)
    ]


def _routes(
    api: apigateway.RestApi,
    integration: apigateway.LambdaIntegration,
    authorizer: apigateway.IAuthorizer | None,
) -> tuple[list[apigateway.Method], apigateway.Method]:
    """The public methods (the health check, the OpenAPI document, the console's files) and the private
    one, ``/v1/{proxy+}``, behind ``authorizer`` if there is one."""
    validator = api.add_request_validator(
        "Validator", validate_request_parameters=True, validate_request_body=True
    )
    # The two public paths take ANY method, like the proxy: the API function answers what it does not
    # serve with 405 and an Allow header (API Gateway alone would answer 403 "Missing Authentication").
    v1 = api.root.add_resource("v1")
    public = [
        api.root.add_resource("healthz").add_method("ANY", integration, request_validator=validator),
        v1.add_resource("openapi.json").add_method("ANY", integration, request_validator=validator),
    ]
    # The web console's static files (duetime.api.console_files): public, as any page's files are; the page
    # asks for the team's token and sends it only to /v1, same origin.
    console = api.root.add_resource("console")
    public += [
        console.add_method("ANY", integration, request_validator=validator),
        console.add_proxy(any_method=False).add_method("ANY", integration, request_validator=validator),
    ]
    # Every other path too (``/``, ``/anything``): the api function answers it (401 without a token, else 404
    # or 405 with the path's Allow) in the API's error shape, so API Gateway's own "Missing Authentication
    # Token" is left for methods it serves on no path (``GATEWAY_ERRORS``).
    public += [
        api.root.add_method("ANY", integration, request_validator=validator),
        api.root.add_proxy(any_method=False).add_method("ANY", integration, request_validator=validator),
    ]
    # No validator on the proxy: it declares no models or parameters, so one would check nothing (and
    # CDK never applied the one given in its default method options).
    private = v1.add_proxy(any_method=False).add_method(
        "ANY",
        integration,
        authorizer=authorizer,
        authorization_type=apigateway.AuthorizationType.CUSTOM if authorizer else None,
    )
    return public, private


def _suppress_with_reasons(
    api: apigateway.RestApi,
    public: list[apigateway.Method],
    private: apigateway.Method,
    *,
    team_authorizer: bool,
) -> None:
    """Each suppression is as narrow as it can be and says why."""
    NagSuppressions.add_resource_suppressions(api.node.find_child("CloudWatchRole"), MANAGED_LOGGING_POLICY)
    guard = "the team authorizer" if team_authorizer else "the api function's token check"
    NagSuppressions.add_resource_suppressions(
        api.deployment_stage, [{"id": "AwsSolutions-APIG3", "reason": NO_WAF_REASON.format(guard=guard)}]
    )
    NagSuppressions.add_resource_suppressions(public, PUBLIC_ROUTES)
    NagSuppressions.add_resource_suppressions(
        private, TOKENS_CHECKED_BY_THE_AUTHORIZER if team_authorizer else TOKENS_CHECKED_BY_THE_API_FUNCTION
    )
