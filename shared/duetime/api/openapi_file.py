"""Writes the API's OpenAPI document as docs/openapi.json keeps it: ``python -m duetime.api.openapi_file >
docs/openapi.json`` (a test checks the file is current)."""

from __future__ import annotations

import sys

from duetime.api.app import openapi_document


def main() -> None:
    sys.stdout.write(openapi_document() + "\n")


if __name__ == "__main__":
    main()
