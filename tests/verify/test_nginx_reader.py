"""nginx's reader on the pipeline (labs/verify/nginx/reader.py): the request it matches, the shared
error when nothing serves it, a rewrite that exists in memory until the pipeline writes it, and
the loopback check reading the rewritten text."""
from __future__ import annotations

from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, route
from labs.verify.model import RouteWanted
from labs.verify.nginx.reader import READER
from labs.verify.plan import RunPlan
from labs.verify.rewrite import NotLoopback, assert_loopback
from tests.verify.test_static import write

TWO_SERVERS = """events {}
http {
    server { listen 80; server_name a.example;
        location /v1/ { if ($http_x_team = "b") { return 403; } proxy_pass http://10.0.0.1:8000; }
    }
    server { listen 80; server_name b.example; location /other/ { proxy_pass http://10.0.0.2:8000; } }
}
"""


def test_a_header_reaches_no_location_search_of_nginx(tmp_path: Path) -> None:
    """nginx chooses a server by Host and a location by URI alone: --header changes nothing it
    chooses (an `if ($http_...)` inside the location is not evaluated, and the reading says so),
    while the output still says the header was given to the matchers."""
    path = write(tmp_path, "nginx.conf", TWO_SERVERS)
    plain = read_config(path, "nginx", RouteWanted())
    with_header = read_config(path, "nginx", RouteWanted(headers=(("X-Team", "b"),)))
    assert with_header.route == plain.route and "location /v1/" in plain.route
    assert with_header.why.endswith("header matchers judged with --header X-Team")  # the name, never the value
    assert any("`if` blocks" in note for note in with_header.notes)
    config = READER.parse(path, RouteWanted())
    request = next(route.requests(RouteWanted(headers=(("X-Team", "b"),))))
    assert request.header("x-team") == "b"
    assert READER.match(config, request).handle == READER.match(config, next(route.requests(RouteWanted()))).handle


def test_the_host_picks_the_server_as_nginx_does(tmp_path: Path) -> None:
    path = write(tmp_path, "nginx.conf", TWO_SERVERS)
    reading = read_config(path, "nginx", RouteWanted(path="/other/chat", host="b.example"))
    assert "server b.example" in reading.route and reading.host == "b.example"
    assert "chosen for Host b.example" in reading.why


def test_no_route_error_is_the_pipelines_one(tmp_path: Path) -> None:
    """The error when nothing serves the request is route.choose's, the same for every proxy."""
    path = write(tmp_path, "nginx.conf", TWO_SERVERS)
    with pytest.raises(UnusableInput) as caught:
        read_config(path, "nginx", RouteWanted(path="/elsewhere"))
    message = str(caught.value)
    assert "no route proxies POST /elsewhere; the proxied routes are: server a.example" in message
    assert message.endswith("(choose one with --path, --host or --header)")
    with pytest.raises(UnusableInput) as for_host:
        read_config(path, "nginx", RouteWanted(path="/other/chat", host="a.example"))
    assert "for Host a.example" in str(for_host.value) and str(for_host.value).endswith("(choose one with --path or --header)")


def test_the_rewrite_is_in_memory_until_written(tmp_path: Path) -> None:
    """A TLS listener names the run's certificate: the pair, the logs folder and the files exist
    only once the pipeline writes the rewritten config, after the loopback check."""
    path = write(tmp_path, "nginx.conf", """events {}
http {
    server { listen 443 ssl; ssl_certificate /etc/ssl/x.pem; ssl_certificate_key /etc/ssl/x.key;
             location /v1/ { proxy_pass http://10.0.0.1:8000; } }
}
""")
    wanted = RouteWanted()
    config = READER.parse(path, wanted)
    chosen = route.choose(READER, config, wanted, path)
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = READER.rewrite(config, chosen, RunPlan(65000, folder))
    assert not any(folder.iterdir()) and rewritten.tls and rewritten.listen_port
    rewritten.write()
    assert (folder / "tls" / "cert.pem").is_file() and (folder / "logs").is_dir() and rewritten.main.is_file()


def test_the_loopback_check_reads_an_upstream_server_in_an_included_file(tmp_path: Path) -> None:
    """The addresses are read from the rewritten text, file by file: a `server` line of an
    upstream written in a file of its own is an upstream's too (a leftover one is refused)."""
    write(tmp_path, "servers.conf", "server 10.0.0.7:8000;\n")
    path = write(tmp_path, "nginx.conf", """events {}
http {
    upstream llm { include servers.conf; }
    server { listen 80; location /v1/ { proxy_pass http://llm; } }
}
""")
    wanted = RouteWanted()
    config = READER.parse(path, wanted)
    rewritten = READER.rewrite(config, route.choose(READER, config, wanted, path), RunPlan(65000, tmp_path / "run"))
    assert_loopback(READER.addresses(rewritten))  # rewritten to the lab's server, in the included file too
    included = str(tmp_path / "servers.conf")
    old, _, written = rewritten.files[included]
    rewritten.files[included] = (old, old, written)  # as if the rewrite had missed it
    with pytest.raises(NotLoopback, match=r"servers.conf:1: 10\.0\.0\.7"):
        assert_loopback(READER.addresses(rewritten))
