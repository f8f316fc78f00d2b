"""The API contract a script author relies on: the schema is readable with the token it
calls the API with, every route (the event stream too) is in it, unknown query parameters
and dangling references are refused by name, and errors have one readable shape."""

from __future__ import annotations

import json

import pytest
from openapi_spec_validator import validate

from scheduler_app.models import Run
from tests.django_fixtures import API_TOKEN

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "header",
    [{"HTTP_X_AUTH_TOKEN": API_TOKEN}, {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}"}],
    ids=["x-auth-token", "bearer"],
)
def test_the_schema_and_docs_answer_the_api_token(client, agentsys_config, header):
    agentsys_config(api_token=API_TOKEN)
    schema = client.get("/api/openapi.json", **header)
    assert schema.status_code == 200, schema.content[:200]
    assert schema.json()["info"]["title"] == "AgentSys API"
    docs = client.get("/api/docs", **header)
    assert docs.status_code == 200
    assert b"openapi.json" in docs.content


def test_without_credentials_the_schema_is_401_and_the_docs_page_asks_to_log_in(
    client, agentsys_config
):
    agentsys_config(api_token=API_TOKEN)
    schema = client.get("/api/openapi.json", HTTP_X_AUTH_TOKEN="wrong-token")
    assert schema.status_code == 401
    assert schema.json() == {"detail": "Unauthorized"}
    page = client.get("/api/docs", HTTP_ACCEPT="text/html")
    assert page.status_code == 302
    assert page["Location"].startswith("/accounts/login/")


def test_a_logged_in_person_still_reads_the_docs(admin_client):
    assert admin_client.get("/api/docs").status_code == 200
    assert admin_client.get("/api/openapi.json").status_code == 200


def test_the_event_stream_is_described_in_the_schema(api):
    paths = api("get", "/api/openapi.json").json()["paths"]
    stream = paths["/api/agents/events"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    names = {(p["in"], p["name"]) for p in stream["parameters"]}
    assert names == {("query", "after"), ("header", "Last-Event-ID")}


def _refuse_duplicated_keys(pairs):
    keys = [key for key, _ in pairs]
    duplicated = sorted({key for key in keys if keys.count(key) > 1})
    assert not duplicated, f"duplicated keys {duplicated} in {keys}"
    return dict(pairs)


def test_the_served_schema_has_no_duplicated_key(api):
    # Swagger UI and client generators read JSON as YAML, which refuses a repeated key (two
    # "200" under POST /api/chat made /api/docs a "Parser error").
    schema = json.loads(
        api("get", "/api/openapi.json").content, object_pairs_hook=_refuse_duplicated_keys
    )
    assert "/api/chat" in schema["paths"]


def test_the_served_schema_is_valid_openapi(api):
    validate(api("get", "/api/openapi.json").json())


@pytest.mark.parametrize(
    ("method", "path"), [("post", "/api/chat"), ("get", "/api/sessions/{session_id}/stream")]
)
def test_a_streaming_operation_has_one_200_with_its_stream_media_type(api, method, path):
    responses = api("get", "/api/openapi.json").json()["paths"][path][method]["responses"]
    ok = responses["200"]
    assert "application/x-ndjson" in ok["content"]
    assert "NDJSON" in ok["description"]  # the declared text, not ninja's bare "OK"


def test_every_operation_documents_its_errors(api):
    schema = api("get", "/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            documented = set(operation["responses"])
            assert {"400", "401", "422", "503"} <= documented, f"{method} {path}"
            if "{" in path:
                assert "404" in documented, f"{method} {path}"


@pytest.mark.parametrize(
    ("path", "unknown"),
    [
        ("/api/memories?tags=lr", "tags"),  # the route takes `tag`
        ("/api/hosts?verbose=1", "verbose"),  # a route with no query parameters at all
        ("/api/runs?status=running&sort=name", "sort"),
        ("/api/memories/query?type=plan&agent=x", "agent"),
    ],
)
def test_an_unknown_query_parameter_is_422_naming_it(api, path, unknown):
    response = api("get", path)
    assert response.status_code == 422, response.content
    body = response.json()
    assert repr(unknown) in body["detail"]
    assert body["errors"][0]["loc"] == ["query", unknown]


def test_declared_query_parameters_still_work(api):
    assert api("get", "/api/memories?tag=lr&limit=5").status_code == 200
    assert api("get", "/api/runs?status=running").status_code == 200


def test_a_validation_error_reads_as_one_line(api):
    response = api("post", "/api/runs", {"name": "x", "command": "true", "gpu_required": -1})
    assert response.status_code == 422
    body = response.json()
    assert body["detail"].startswith("body.payload.gpu_required: ")
    assert body["errors"][0]["loc"][-1] == "gpu_required"


@pytest.mark.parametrize(("field", "word"), [("sweep_id", "sweep"), ("chat_session_id", "chat")])
def test_a_run_naming_a_missing_sweep_or_chat_is_422_and_stores_nothing(api, field, word):
    response = api("post", "/api/runs", {"name": "x", "command": "true", field: "nope"})
    assert response.status_code == 422, response.content
    assert response.json()["detail"] == f"{field}: no {word}{' session' * (word == 'chat')} 'nope'"
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"lr": "x" * 2_000_000}, "bytes"),
        ({"lr": {"nested": 1}}, "string, number or boolean"),
        ({"lr": None}, "string, number or boolean"),
        ({"--lr; rm -rf /": 1}, "option name"),
        ({f"p{i}": i for i in range(201)}, "at most 200"),
    ],
    ids=["2MB value", "nested", "null", "bad name", "too many"],
)
def test_params_that_cannot_make_a_command_line_are_422(api, params, reason):
    response = api("post", "/api/runs", {"name": "x", "command": "true", "params": params})
    assert response.status_code == 422
    assert reason in response.json()["detail"]
    assert not Run.objects.exists()


def test_params_that_fit_are_kept(api):
    params = {"lr": 0.001, "epochs": 3, "name": "it's fine", "fp16": True, "data.dir": "/d"}
    response = api("post", "/api/runs", {"name": "x", "command": "true", "params": params})
    assert response.status_code == 201, response.content
    assert response.json()["params"] == params


@pytest.mark.parametrize(
    "moment",
    ["0863-02-20T06:50:38+20:26", "2026-01-01T00:00:00-23:59", "2026-01-01T00:00:00"],
    ids=["+20:26 offset", "-23:59 offset", "naive"],
)
def test_any_iso_offset_in_a_time_filter_is_answered(api, moment):
    # PostgreSQL refuses offsets past ±15:59; the filter converts to UTC first (was a 500).
    response = api("get", f"/api/memories/query?before={moment.replace('+', '%2B')}")
    assert response.status_code == 200, response.content


def test_a_time_filter_out_of_range_in_utc_is_422(api):
    response = api("get", "/api/memories/query?since=0001-01-01T00:00:00%2B01:00")
    assert response.status_code == 422
    assert "since" in response.json()["detail"]


@pytest.mark.parametrize(
    "path", ["/api/scheduler/queue", "/api/runs", "/api/memories", "/api/agents"]
)
def test_a_list_offset_past_any_page_is_422_not_a_database_overflow(api, path):
    # Found by the deep fuzz: an offset past PostgreSQL's bigint was a 500.
    response = api("get", f"{path}?offset=180615042449414763395590046577483317248")
    assert response.status_code == 422, response.content
    assert "offset" in response.json()["detail"]
