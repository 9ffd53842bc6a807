"""`serve --listen`'s routing, pure (SPEC 3.4): which opening request is upgraded to the
WebSocket, which gets a page, and which is refused, and with what."""

from __future__ import annotations

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request

from acp_server.providers.secret import Secret
from acp_server.server.listen import ListenConfig, own_origins, route

TOKEN = "s3cret-token"
CONFIG = ListenConfig(
    "127.0.0.1", 8765, Secret(TOKEN), allowed_origins=frozenset({"https://a.example"})
)
OWN = own_origins("127.0.0.1", 8765)


def request(path: str, **headers: str) -> Request:
    return Request(path, Headers({k.replace("_", "-"): v for k, v in headers.items()}))


def test_the_acp_path_with_the_token_in_the_query_is_upgraded() -> None:
    assert route(request(f"/acp?token={TOKEN}"), CONFIG, OWN) is None


def test_the_acp_path_with_a_bearer_header_is_upgraded() -> None:
    assert route(request("/acp", Authorization=f"Bearer {TOKEN}"), CONFIG, OWN) is None


def test_the_bearer_scheme_is_case_insensitive() -> None:
    assert route(request("/acp", Authorization=f"bearer {TOKEN}"), CONFIG, OWN) is None


def test_no_token_is_401_with_a_bearer_challenge() -> None:
    response = route(request("/acp"), CONFIG, OWN)
    assert response is not None
    assert (response.status_code, response.headers["WWW-Authenticate"]) == (
        401,
        'Bearer realm="acp-server"',
    )
    assert response.body == b"A bearer token is required (Authorization or ?token=)\n"


def test_a_token_of_another_scheme_is_not_taken() -> None:
    response = route(request("/acp", Authorization=f"Basic {TOKEN}"), CONFIG, OWN)
    assert response is not None and response.status_code == 401


def test_a_prefix_of_the_token_is_401() -> None:
    response = route(request(f"/acp?token={TOKEN[:-1]}"), CONFIG, OWN)
    assert response is not None and response.status_code == 401


def test_a_foreign_origin_is_403_even_with_the_token() -> None:
    response = route(request(f"/acp?token={TOKEN}", Origin="http://evil.example"), CONFIG, OWN)
    assert response is not None
    assert (response.status_code, response.body) == (
        403,
        b"Origin http://evil.example is not allowed to connect\n",
    )


@pytest.mark.parametrize("name", ["Authorization", "Origin", "Host"])
def test_a_header_routing_reads_given_twice_is_400(name: str) -> None:
    headers = Headers([(name, f"Bearer {TOKEN}"), (name, f"Bearer {TOKEN}")])
    response = route(Request(f"/acp?token={TOKEN}", headers), CONFIG, OWN)
    assert response is not None
    assert (response.status_code, response.reason_phrase, response.body) == (
        400,
        "Bad Request",
        f"The {name} header is given more than once\n".encode(),
    )


def test_the_servers_own_origins_by_every_loopback_name() -> None:
    assert own_origins("127.0.0.1", 8765) == {
        "http://127.0.0.1:8765",
        "http://localhost:8765",
        "http://[::1]:8765",
    }


def test_a_server_on_another_address_owns_only_that_origin() -> None:
    assert own_origins("192.0.2.7", 80) == {"http://192.0.2.7:80"}


def test_an_allowed_origin_matches_whatever_its_case() -> None:
    allowed = request(f"/acp?token={TOKEN}", Origin="HTTPS://A.example/")
    assert route(allowed, CONFIG, OWN) is None


def test_an_unknown_path_is_404() -> None:
    response = route(request("/etc/passwd"), CONFIG, OWN)
    assert response is not None and (response.status_code, response.body) == (404, b"Not found\n")


def test_a_nested_sessions_path_is_404() -> None:
    response = route(request("/sessions/abc/def"), CONFIG, OWN)
    assert response is not None and response.status_code == 404


def test_a_file_of_the_web_directory_is_served_with_its_type_and_no_caching() -> None:
    response = route(request("/client.js"), CONFIG, OWN)
    assert response is not None
    assert (response.status_code, response.headers["Content-Type"]) == (
        200,
        "text/javascript; charset=utf-8",
    )
    assert (response.headers["Cache-Control"], response.headers["Referrer-Policy"]) == (
        "no-store",
        "no-referrer",
    )
