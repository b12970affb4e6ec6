"""The OpenAPI document as a contract for clients generated from it: docs/openapi.json is the document the API
serves; every operation has a readable, unique ``operationId`` and one of the document's tags; every error
answer is described by the one error schema, ``ErrorOut``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from duetime.api.app import openapi_document

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "docs" / "openapi.json"
CAMEL_CASE = re.compile(r"^[a-z]+([A-Z][a-z]+)*$")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(openapi_document())
    return loaded


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, item in document["paths"].items() for method, op in item.items()]


def test_docs_openapi_json_is_the_document_the_api_serves() -> None:
    assert FILE.read_text() == openapi_document() + "\n", (
        "docs/openapi.json is out of date: python -m duetime.api.openapi_file > docs/openapi.json"
    )


def test_every_operation_has_a_readable_unique_operation_id(document: dict[str, Any]) -> None:
    ids = [op.get("operationId", "") for _, _, op in operations(document)]
    assert all(CAMEL_CASE.match(op_id) for op_id in ids), [i for i in ids if not CAMEL_CASE.match(i)]
    assert len(set(ids)) == len(ids) == len(operations(document))
    assert {"createJob", "listJobs", "getJob", "triggerJob", "listJobRuns", "getRun"} <= set(ids)


def test_every_operation_has_one_of_the_documents_tags(document: dict[str, Any]) -> None:
    declared = {tag["name"] for tag in document["tags"]}
    assert all(tag.get("description") for tag in document["tags"])
    for method, path, op in operations(document):
        assert len(op.get("tags", [])) == 1 and op["tags"][0] in declared, (method, path)


def test_every_error_answer_is_described_by_the_one_error_schema(document: dict[str, Any]) -> None:
    for method, path, op in operations(document):
        for code, answer in op["responses"].items():
            if int(code) >= 400:
                schema = answer["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorOut"}, (method, path, code)
    assert not {"HTTPValidationError", "ValidationError"} & set(document["components"]["schemas"])
