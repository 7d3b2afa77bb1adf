"""The ``schema`` option a strategy takes to answer JSON a parent reads as ``data``.

``single`` and ``react`` take it alike, so a parent (lats' evaluators, debate's
debaters) may pick either and read the same verdict.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from covey.models.structured import SCHEMA_NAME, check_schema


class SchemaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    output_schema: dict[str, Any] | None = Field(
        default=None, alias="schema", description="JSON Schema the answer must match"
    )
    schema_name: str = Field(
        default=SCHEMA_NAME,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the schema's name sent to the model (it picks a sim script)",
    )

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_schema(value)
        return value
