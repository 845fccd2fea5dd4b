"""Custom schemathesis checks for `npm run fuzz` (loaded via SCHEMATHESIS_HOOKS=hooks)."""
import schemathesis


@schemathesis.check
def envelope(response, case):
    """Every JSON answer is the spec's envelope: success/data or success/error/code."""
    content_type = response.headers.get("Content-Type", "")
    if "application/json" not in content_type:
        return None
    body = response.json()
    if case.path == "/openapi.json":
        return None
    assert isinstance(body, dict), "JSON answer is not an object"
    if body.get("success") is True:
        assert "data" in body, "success envelope without data"
    else:
        assert body.get("success") is False, "answer without a boolean success field"
        assert isinstance(body.get("error"), str), "failure envelope without an error message"
        assert isinstance(body.get("code"), str), "failure envelope without a code"
    return None


@schemathesis.check
def no_server_error(response, case):
    """A 5xx for client input is a bug."""
    assert response.status_code < 500, f"server error {response.status_code}"
    return None


@schemathesis.hook
def before_call(context, case):
    """The API key for /api/v1 (developer API), the JWT everywhere else.

    Left alone when the case already carries an Authorization header, so the
    ignored_auth check's deliberately wrong credentials reach the server.
    """
    import os

    if case.headers and "Authorization" in case.headers:
        return

    token = os.environ["FUZZ_API_KEY"] if case.path.startswith("/api/v1") else os.environ["FUZZ_JWT"]
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}
