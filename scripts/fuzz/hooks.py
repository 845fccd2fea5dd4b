"""Custom schemathesis 4 checks and hooks for `npm run fuzz` (loaded via SCHEMATHESIS_HOOKS=hooks).

schemathesis 4 calls checks as `(ctx, response, case)` and `before_call` with the request
kwargs too; a check fails by raising AssertionError."""
import json
import os
import uuid
import zlib

import schemathesis

# CONTRACT.md "Error codes": the spec's codes plus these four; no other code.
SPEC_CODES = {
    "AUTH_REQUIRED",
    "FORBIDDEN",
    "NOT_FOUND",
    "VALIDATION_ERROR",
    "AGENT_NOT_RUNNING",
    "RATE_LIMIT_EXCEEDED",
    "SERVER_ERROR",
}
CONTRACT_CODES = {"GONE", "CONTENT_BLOCKED", "INSUFFICIENT_CREDITS", "EMAIL_NOT_VERIFIED"}
ALLOWED_CODES = SPEC_CODES | CONTRACT_CODES

# The status each code goes with (spec "Errors" table and CONTRACT.md): 413
# (body too large) and 431 (headers too large) are refused input; 503 is a
# missing dependency, answered as SERVER_ERROR.
CODE_STATUSES = {
    "AUTH_REQUIRED": {401},
    "FORBIDDEN": {403},
    "EMAIL_NOT_VERIFIED": {403},
    "NOT_FOUND": {404, 405},
    "VALIDATION_ERROR": {400, 413, 431},
    "INSUFFICIENT_CREDITS": {402},
    "AGENT_NOT_RUNNING": {409},
    "GONE": {410},
    "CONTENT_BLOCKED": {422},
    "RATE_LIMIT_EXCEEDED": {429},
    "SERVER_ERROR": {500, 503},
}


def _resolve(schema, node):
    """Follows local $refs (`#/components/...`) in the raw document."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 10:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return None
        target = schema.raw_schema
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
        node = target
        seen += 1
    return node if isinstance(node, dict) else None


def _documented_codes(case, status):
    """The `code` values the operation documents for this status (its own or the default response)."""
    responses = case.operation.definition.raw.get("responses", {})
    response = responses.get(str(status)) or responses.get("default")
    response = _resolve(case.operation.schema, response)
    if response is None:
        return None
    media = (response.get("content") or {}).get("application/json") or {}
    body = _resolve(case.operation.schema, media.get("schema"))
    code = _resolve(case.operation.schema, ((body or {}).get("properties") or {}).get("code"))
    if not code:
        return None
    if "enum" in code:
        return set(code["enum"])
    if "const" in code:
        return {code["const"]}
    return None


def _content_type(response):
    """schemathesis 4 keeps response headers with lowercase keys and list values."""
    return ", ".join(response.headers.get("content-type", []))


def _documents_envelope(case, status):
    """Whether the operation's documented JSON answer for this status is the envelope
    (the model proxy's success answers are OpenAI's, as its document says)."""
    responses = case.operation.definition.raw.get("responses", {})
    response = _resolve(case.operation.schema, responses.get(str(status)) or responses.get("default"))
    if response is None:
        return True
    media = (response.get("content") or {}).get("application/json")
    if media is None:
        return True
    body = _resolve(case.operation.schema, media.get("schema")) or {}
    if "allOf" in body:
        return True
    return "success" in (body.get("properties") or {})


@schemathesis.check
def envelope(ctx, response, case):
    """Every JSON answer is the spec's envelope: success/data or success/error/code."""
    if "application/json" not in _content_type(response):
        return None
    if case.path == "/openapi.json" or not _documents_envelope(case, response.status_code):
        return None
    body = response.json()
    assert isinstance(body, dict), "JSON answer is not an object"
    if body.get("success") is True:
        assert "data" in body, "success envelope without data"
    else:
        assert body.get("success") is False, "answer without a boolean success field"
        assert isinstance(body.get("error"), str), "failure envelope without an error message"
        assert isinstance(body.get("code"), str), "failure envelope without a code"
    return None


@schemathesis.check
def documented_error(ctx, response, case):
    """A failure's code is a contract code, documented by the operation, with its status."""
    if response.status_code < 400:
        return None
    if "application/json" not in _content_type(response):
        return None
    body = response.json()
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        return None  # the envelope check reports it
    code = body["code"]
    status = response.status_code
    assert code in ALLOWED_CODES, f"error code {code!r} is not one CONTRACT.md allows"
    responses = case.operation.definition.raw.get("responses", {})
    assert str(status) in responses or "default" in responses, (
        f"status {status} is not documented for {case.operation.label}"
    )
    documented = _documented_codes(case, status)
    if documented is not None:
        assert code in documented, (
            f"error code {code!r} (status {status}) is not documented for {case.operation.label}"
        )
    assert status in CODE_STATUSES[code], f"error code {code!r} answered with status {status}"
    return None


@schemathesis.check
def no_server_error(ctx, response, case):
    """A 5xx for client input is a bug."""
    assert response.status_code < 500, f"server error {response.status_code}"
    return None


def _seeded_path_ids(case):
    """Every other case on a path with a seeded row uses that row's id (FUZZ_PATH_IDS), so
    the routes answer from real state, not only 404 for a random id. The seeded rows are
    never deleted: the rest of the run needs them (a DELETE of one, e.g. with an id the
    stateful phase read from a list, goes to an id that does not exist)."""
    if not case.path_parameters:
        return
    seeded_rows = json.loads(os.environ.get("FUZZ_PATH_IDS", "[]"))
    if case.method.upper() == "DELETE":
        for seeded in seeded_rows:
            if case.path == seeded["path"] and case.path_parameters.get(seeded["param"]) == seeded["value"]:
                case.path_parameters = {**case.path_parameters, seeded["param"]: str(uuid.uuid4())}
        return
    # A negative case keeps its ids: swapping one in makes schemathesis re-judge the case, and
    # it then took a case still holding another invalid path parameter for a valid one.
    meta = getattr(case, "meta", None)
    if meta is not None and meta.generation.mode.is_negative:
        return
    # An id the stateful phase took from an earlier answer (a link) stays: the checks follow it.
    linked = getattr(getattr(case, "_override", None), "path_parameters", None) or {}
    for seeded in seeded_rows:
        param = seeded["param"]
        if not case.path.startswith(seeded["path"]) or param not in case.path_parameters or param in linked:
            continue
        if zlib.crc32(repr(sorted(case.path_parameters.items())).encode()) % 2 == 0:
            case.path_parameters = {**case.path_parameters, param: seeded["value"]}
        return


def _no_endless_stream(case):
    """GET /agents/{id}/logs?stream=true on a running agent is a live SSE stream that never
    ends: a fuzzer reading the whole body can only time out (the stream has its own tests).
    A value vine reads as true becomes false; other values still reach the validator."""
    if case.path != "/agents/{id}/logs" or not case.query or "stream" not in case.query:
        return
    if str(case.query["stream"]).lower() in ("true", "1", "on"):
        case.query = {**case.query, "stream": "false"}


@schemathesis.auth(refresh_interval=None)
class FuzzCredentials:
    """The API key for /api/v1 (developer API), the JWT everywhere else.

    schemathesis generates an Authorization header for most cases; 1 in 4 of
    those is kept (header parsing is fuzzed too: a junk credential must get a
    401 in the envelope), the others get the valid credential. schemathesis
    marks a case it set credentials on as explicitly authenticated, so the
    ignored_auth check retries it without them and with invalid ones and
    expects 401, and checks that remove the header get no credential back.
    """

    def get(self, case, context):
        # Signing out with the JWT ends every JWT of the account: the rest of the run would be 401.
        if case.path == "/auth/logout":
            return None
        generated = (case.headers or {}).get("Authorization")
        if generated is not None and zlib.crc32(str(generated).encode()) % 4 == 0:
            return None
        return os.environ["FUZZ_API_KEY"] if case.path.startswith("/api/v1") else os.environ["FUZZ_JWT"]

    def set(self, case, token, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}


@schemathesis.hook
def before_call(context, case, kwargs):
    """Seeded ids in paths, and no endless log stream (see above)."""
    _seeded_path_ids(case)
    _no_endless_stream(case)


@schemathesis.hook
def after_call(context, case, response):
    """One line per request (status, method, path, milliseconds) for the run's figures."""
    log = os.environ.get("FUZZ_REQUEST_LOG")
    # Only the operation's own method: checks also send others (unsupported_method).
    if log and case.method.upper() == case.operation.method.upper():
        with open(log, "a", encoding="utf-8") as out:
            auth = (response.request.headers.get("Authorization") or "")[:16]
            url = response.request.url or ""
            elapsed = round(response.elapsed * 1000)
            out.write(f"{response.status_code} {case.method} {case.path} {elapsed} {auth} {url}\n")
