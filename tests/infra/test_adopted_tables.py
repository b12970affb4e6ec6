"""The stack adopts existing tables by name (``-c jobs_table=... -c runs_table=... -c control_table=...``):
tables restored from point-in-time recovery (docs/guide/operations.md, "Restore"). It then creates none of
its own for those roles, names the adopted ones to every function, and grants the same access to them and to
the indexes the code queries as to its own tables."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_stack import DEPLOY_GATE, POLLER, ContextError, StackConfig, resources, role_statements, synth

ADOPTED = {"jobs_table": "restored-jobs", "runs_table": "restored-runs", "control_table": "restored-control"}
WORKER = "functions/worker/handler.handler"


@pytest.fixture(scope="module")
def adopted() -> Any:
    return synth(deletion_protection="false", **ADOPTED)[1]


def dynamodb_resources(template: Any, handler: str) -> list[str]:
    """The resources of ``handler``'s DynamoDB statements, each as the template's JSON of it."""
    return [
        json.dumps(target)
        for actions, targets in role_statements(template, handler)
        if any(action.startswith("dynamodb:") for action in actions)
        for target in targets
    ]


def test_adopted_tables_are_not_created_and_every_function_is_given_their_names(adopted: Any) -> None:
    assert resources(adopted, "AWS::DynamoDB::GlobalTable") == {}
    functions = resources(adopted, "AWS::Lambda::Function").values()
    named = [f["Properties"].get("Environment", {}).get("Variables", {}) for f in functions]
    named = [v for v in named if "DUETIME_JOBS_TABLE" in v]
    assert named and all(
        (v["DUETIME_JOBS_TABLE"], v["DUETIME_RUNS_TABLE"], v["DUETIME_CONTROL_TABLE"])
        == ("restored-jobs", "restored-runs", "restored-control")
        for v in named
    )
    outputs = adopted.to_json()["Outputs"]
    assert (outputs["JobsTable"]["Value"], outputs["ControlTable"]["Value"]) == (
        "restored-jobs",
        "restored-control",
    )


def test_grants_name_the_adopted_tables_and_the_indexes_the_code_queries(adopted: Any) -> None:
    poller = dynamodb_resources(adopted, POLLER)
    assert any(":table/restored-jobs/index/due" in r for r in poller)
    assert any(":table/restored-runs/index/reap" in r for r in poller)
    assert any(r.endswith(':table/restored-control"]]}') for r in poller)
    for handler in (POLLER, WORKER, DEPLOY_GATE):
        granted = dynamodb_resources(adopted, handler)
        assert granted and all(":table/restored-" in r for r in granted), handler


def test_one_table_may_be_adopted_and_the_others_kept() -> None:
    _, template = synth(deletion_protection="false", jobs_table="restored-jobs")
    assert len(resources(template, "AWS::DynamoDB::GlobalTable")) == 2
    assert any(":table/restored-jobs/index/due" in r for r in dynamodb_resources(template, POLLER))


def test_a_table_name_dynamodb_refuses_is_refused_naming_the_key() -> None:
    with pytest.raises(ContextError, match="jobs_table"):
        StackConfig.from_mapping({"jobs_table": "no spaces allowed"})
    with pytest.raises(ContextError, match="control_table"):
        StackConfig.from_mapping({"control_table": "ab"})
