"""What duetime is about, as pure code: jobs, runs, schedules, claims, teams' tokens and limits.

Nothing here reads a clock, the environment or the network; every function runs in the poller, the worker,
the API and the tests alike.
"""
