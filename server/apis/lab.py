"""The `lab` request object every protocol accepts: per-request pacing and faults, and overrides of
the server's per-stream flags (server/knobs.py declares each knob; this is its schema, pydantic 2).

The object forbids unknown fields so a typo in a scenario fails loudly (400, param `lab.<field>`).
SDKs send it through `extra_body` on every route (chat, responses, messages); a client that can
only set headers (Codex CLI) sends it as the header `X-Streamlab-Lab: <json>` (`lab_with_header`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from server.errors import APIError, from_validation_errors
from server.knobs import KNOBS, STREAM_KNOBS, Knob

# Floats are finite; JSON numbers beyond them (1e999) or NaN literals are refused, not clamped.
Finite = Field(allow_inf_nan=False)


class _LabBase(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    def stream_overrides(self) -> dict[str, Any]:
        """The StreamSettings fields this request set explicitly (None given = switched off)."""
        overrides: dict[str, Any] = {}
        for knob in STREAM_KNOBS:
            if knob.name not in self.model_fields_set:
                continue
            value = getattr(self, knob.name)
            # null means "off" for the timers; for the others it means "the server's default".
            if value is None and not knob.off_at_zero:
                continue
            overrides[knob.name] = value
        return overrides


def _lab_field(knob: Knob) -> tuple[Any, Any]:
    """The schema field of one knob: its type, its range (knob.check), its default."""
    checked = AfterValidator(knob.check)
    base: Any
    if knob.kind == "float":
        base = Annotated[float, Field(allow_inf_nan=False), checked]
    elif knob.kind == "int":
        base = Annotated[int, checked]
    elif knob.kind == "bool":
        base = bool
    elif knob.kind == "str":
        base = str
    elif knob.kind == "choice":
        base = Literal[knob.choices]  # type: ignore[valid-type]
    else:
        base = Annotated[list[str], checked]
    # A per-stream knob unset or null defers to the server's flag; a lab-only knob whose default
    # is None is optional, the others (delays of 0 s, stamp off) are plain values.
    if knob.flag or knob.default is None:
        return base | None, Field(default=None, description=knob.help)
    return base, Field(default=knob.default, description=knob.help)


def _lab_doc() -> str:
    lines = ["The `lab` request extension: per-request pacing and faults, and overrides of the",
             "server's per-stream flags (server/knobs.py declares each one):", ""]
    lines += [f"{k.name:<20} {k.range_text()}: {k.help}" for k in KNOBS]
    return "\n".join(lines)


LabOptions = create_model("LabOptions", __base__=_LabBase, __doc__=_lab_doc(),
                          __module__=__name__,
                          **{knob.name: _lab_field(knob) for knob in KNOBS})


# The same object as a request header, for clients that cannot add a body field (Codex CLI sets
# only headers and query parameters on a model provider: `http_headers`). Merged under the body's
# `lab` (the body wins), validated and guarded (server/http/lab_access.py) as the body's field is.
LAB_HEADER = "X-Streamlab-Lab"


def lab_with_header(body_lab: Any, header: str | None) -> Any:
    """The request's lab options: the header's JSON object under the body's `lab` (its fields
    win), or the body's alone; a bad header is a 400 naming it (param `X-Streamlab-Lab...`)."""
    if header is None:
        return body_lab
    try:
        from_header = LabOptions.model_validate_json(header)
    except ValidationError as exc:
        refusal = from_validation_errors(exc.errors())
        detail = refusal.message.replace("the request body is", "the header is")
        raise APIError(400, f"{LAB_HEADER}: {detail}", code=refusal.code,
                       param=f"{LAB_HEADER}.{refusal.param}" if refusal.param else LAB_HEADER) from None
    if body_lab is None:
        return from_header
    merged = {**from_header.model_dump(include=from_header.model_fields_set),
              **body_lab.model_dump(include=body_lab.model_fields_set)}
    return LabOptions.model_validate(merged)
