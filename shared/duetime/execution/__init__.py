"""What runs in the worker function: leases on runs, calling targets, recording results, retries, success
deadlines and a job's notifications."""
