"""A SARIF log checked against the SARIF 2.1.0 schema vendored in tests/data/schemas/ (its README
says where it comes from), with the validator of the JSON Schema draft the schema declares."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

SCHEMA = json.loads((Path(__file__).resolve().parent / "data" / "schemas" / "sarif-schema-2.1.0.json")
                    .read_text(encoding="utf-8"))


def valid_sarif(text: str) -> dict:
    """The log, once the schema has accepted it (jsonschema raises ValidationError otherwise)."""
    log = json.loads(text)
    validator = jsonschema.validators.validator_for(SCHEMA)
    validator.check_schema(SCHEMA)
    validator(SCHEMA, format_checker=validator.FORMAT_CHECKER).validate(log)
    return log
