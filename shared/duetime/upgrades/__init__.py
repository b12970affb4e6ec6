"""Upgrades and rollbacks (docs/guide/upgrading.md): the format this process writes, finalizing an upgrade,
and the check a deploy makes before it replaces the functions."""
