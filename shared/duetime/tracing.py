"""What the functions' tracers may see (SECURITY.md: nothing of a body, nor of a target)."""

# What every function's tracer patches: AWS calls, nothing else. X-Ray's patches of http.client, requests and
# httpx would record each call to a team's target (its URL, whose path can be the secret: a Slack webhook's)
# and send an X-Amzn-Trace-Id header with it, to a third party.
TRACED_MODULES = ("botocore",)
