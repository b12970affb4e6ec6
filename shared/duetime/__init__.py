"""duetime: a distributed job scheduler that runs serverless on AWS.

Dependencies point one way: handlers (functions/) -> logic (poller, worker, jobs) -> ports
(interfaces in ``duetime.ports``) implemented by adapters (``duetime.adapters``, the only place boto3 lives).
"""

__version__ = "0.2.0"
