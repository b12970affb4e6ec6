"""What runs in the poller function: claiming due jobs, precision for the coming minute, pollers' leases,
resting and waking, fan-out helpers and provisioned workers ahead of a spike."""
