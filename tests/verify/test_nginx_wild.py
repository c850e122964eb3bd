"""nginx constructs common in published configs: each read, rewritten and accepted by `nginx -t`
with its meaning kept (only addresses, paths and TLS change), the right route judged."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config
from labs.verify.launch import validate
from labs.verify.model import RouteWanted
from labs.verify.run import rewrite_config
from tests.verify.test_static import write

LAB = 65000


def http(body: str, top: str = "") -> str:
    return f"{top}\nevents {{}}\nhttp {{\n{body}\n}}\n"


def run_here(path: Path, folder: Path, wanted: RouteWanted = RouteWanted()):
    """Read, rewrite and let nginx itself check the result: every case must pass `nginx -t`."""
    reading = read_config(path, "nginx", wanted)
    rewritten = rewrite_config(reading, LAB, folder / "run")
    validate(rewritten)
    return reading, rewritten, "".join(new for _, new, _ in rewritten.files.values())


def live(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def test_a_pcre_named_capture_location_is_matched_not_a_crash(tmp_path):
    path = write(tmp_path, "nginx.conf", http(r"""server { listen 80;
  location / { return 404; }
  location ~ ^/(?<ver>v\d+)/chat/completions$ { proxy_pass http://10.0.0.5:8000/$ver/chat/completions; }
}"""))
    reading, _, _ = run_here(path, tmp_path)
    assert "(?<ver>v\\d+)" in reading.route and reading.path == "/v1/chat/completions"


def test_several_statements_on_one_line_are_each_rewritten(tmp_path):
    path = write(tmp_path, "nginx.conf", http("""upstream u { server a.internal:8000; server 10.1.1.1:8000 max_fails=2; }
server { listen 80; listen [::]:80; location /v1/ { proxy_pass http://u; } }"""))
    _, rewritten, text = run_here(path, tmp_path)
    assert f"server 127.0.0.1:{LAB}; server 127.0.0.1:{LAB} max_fails=2;" in text
    assert re.search(r"listen 127\.0\.0\.1:\d+; listen 127\.0\.0\.1:\d+;", text)
    assert "internal" not in live(text) and "10.1.1.1" not in live(text)


@pytest.mark.parametrize("target, kept", [
    ("$u", f"proxy_pass http://127.0.0.1:{LAB};"),                      # the URL in a variable
    ("$scheme://backend", "proxy_pass http://backend;"),                # a variable scheme, an upstream
    ("http://$backend_host:8000", f"proxy_pass http://127.0.0.1:{LAB};"),  # the host in a variable
    ("http://unix:/run/vllm.sock", f"proxy_pass http://127.0.0.1:{LAB};"),  # a unix socket
    ("http://unix:/run/vllm.sock:/v1/", f"proxy_pass http://127.0.0.1:{LAB}/v1/;"),  # ... with a URI
    ("https://backend", "proxy_pass http://backend;"),                  # TLS to a named upstream
    ("https://api.openai.example/v1/", f"proxy_pass http://127.0.0.1:{LAB}/v1/;"),
])
def test_every_proxy_pass_form_keeps_its_meaning(tmp_path, target, kept):
    path = write(tmp_path, "nginx.conf", http(f"""upstream backend {{ server vllm.svc:8000; }}
map $http_x_pool $backend_host {{ default vllm.svc; }}
server {{ listen 80; set $u http://vllm.svc:8000;
  location /v1/ {{ proxy_pass {target}; proxy_ssl_server_name on; proxy_ssl_verify off; }} }}"""))
    _, _, text = run_here(path, tmp_path)
    assert kept in text
    assert "proxy_ssl_server_name on;" not in live(text)  # the lab's server is plain HTTP


def test_a_site_file_is_judged_in_the_platforms_stock_main(tmp_path):
    site = write(tmp_path, "default.conf", """upstream webui { server open-webui:8080; }
server {
    listen 80;
    server_name chat.example.com;
    location / { proxy_pass http://webui; proxy_http_version 1.1; }
}
""")
    reading, rewritten, text = run_here(site, tmp_path)
    assert reading.host == "chat.example.com" and "official-image" in " ".join(reading.notes)
    assert reading.get("worker_connections").text == "worker_connections 1024"
    assert reading.get("worker_connections").where.startswith("official-image nginx.conf:")
    assert reading.get("gzip").is_default  # the image leaves it commented out
    assert "official-image nginx.conf" in rewritten.diff and "/etc/nginx/conf.d" not in live(text)
    debian = read_config(site, "nginx", RouteWanted(main="debian"))
    assert debian.get("gzip").value == "on" and debian.get("worker_connections").value == "768"


def test_a_site_file_in_the_users_own_main(tmp_path):
    main = write(tmp_path, "main/nginx.conf", "events {}\nhttp {\n  proxy_read_timeout 5s;\n}\n")
    site = write(tmp_path, "site.conf", "server { listen 80; location /v1/ { proxy_pass http://10.0.0.1; } }\n")
    reading, _, text = run_here(site, tmp_path, RouteWanted(main=str(main)))
    assert reading.get("proxy_read_timeout").value == "5s"
    assert f"include {tmp_path / 'run'}" in text  # inserted where the main had no site include
    with pytest.raises(UnusableInput, match="--main is for a site file"):
        read_config(main, "nginx", RouteWanted(main="debian"))
    with pytest.raises(UnusableInput, match="--main must be"):
        read_config(site, "nginx", RouteWanted(main="/no/such/nginx.conf"))


def test_a_missing_include_is_named_with_what_it_could_change(tmp_path):
    site = write(tmp_path, "app.conf", """server {
    listen 443 ssl;
    include /etc/letsencrypt/options-ssl-nginx.conf;
    location /v1/ { proxy_read_timeout 300s; proxy_pass http://10.0.0.1:8000; }
}
""")
    reading, rewritten, _ = run_here(site, tmp_path)
    note = next(n for n in reading.notes if "options-ssl-nginx.conf" in n)
    assert "is not here" in note and "proxy_buffering" in note and "proxy_read_timeout" not in note
    assert "not here: left out" in rewritten.diff


def test_includes_written_for_the_deployed_machine_are_found_beside_the_config(tmp_path):
    write(tmp_path, "conf.d/api.conf", "server { listen 80; location /v1/ { proxy_pass http://10.0.0.1; } }\n")
    write(tmp_path, "snippets/stream.conf", "proxy_buffering off;\n")
    main = write(tmp_path, "nginx.conf", http("include /etc/nginx/snippets/stream.conf;\n"
                                              "include /etc/nginx/conf.d/*.conf;\ninclude mime.types;"))
    reading, _, _ = run_here(main, tmp_path)
    assert reading.get("proxy_buffering").value == "off" and "conf.d/api.conf" in reading.route


def test_a_relative_load_module_resolves_against_the_packaged_prefix(tmp_path, monkeypatch):
    from labs.verify.nginx import targets
    write(tmp_path, "prefix/modules/ngx_stream_module.so", "")
    monkeypatch.setattr(targets, "compiled_prefix", lambda binary: str(tmp_path / "prefix"))
    assert targets.module_here("modules/ngx_stream_module.so", "nginx") == str(
        tmp_path / "prefix/modules/ngx_stream_module.so")  # not the run's own prefix


def test_a_module_not_installed_here_is_left_out_and_said(tmp_path):
    path = write(tmp_path, "nginx.conf", http("server { listen 80; location / { proxy_pass http://a; } }",
                                              top="load_module modules/ngx_http_nothere_module.so;"))
    _, rewritten, text = run_here(path, tmp_path)
    assert "load_module" not in live(text) and any("ngx_http_nothere_module" in n for n in rewritten.notes)


def test_the_api_route_is_found_under_a_prefix_and_a_catch_all_comes_last(tmp_path):
    path = write(tmp_path, "nginx.conf", http("""server { listen 80;
  location / { proxy_pass http://10.0.0.9:3000; }
  location /api/ { proxy_pass http://10.0.0.1:8080; proxy_buffering off; }
}"""))
    reading = read_config(path, "nginx")
    assert reading.path == "/api/chat/completions" and "location /api/" in reading.route
    assert len(reading.routes) == 2 and reading.get("proxy_buffering").value == "off"
    asked = read_config(path, "nginx", RouteWanted(path="/v1/chat/completions"))
    assert "location / " in asked.route and "--path" in asked.why


def test_an_outer_regex_wins_over_a_nested_prefix_as_in_nginx(tmp_path):
    path = write(tmp_path, "nginx.conf", http("""server { listen 80;
  location /v1/ { proxy_pass http://a; location /v1/chat/ { proxy_pass http://b; proxy_buffering on; } }
  location ~ /completions$ { proxy_pass http://c; proxy_buffering off; }
}"""))
    assert "location ~ /completions$" in read_config(path, "nginx").route
    # ^~ stops the regexes; an exact match ends everything.
    stopped = write(tmp_path, "b.conf", http("""server { listen 80;
  location ^~ /v1/ { proxy_pass http://a; }
  location ~ /completions$ { proxy_pass http://c; }
  location = /v1/models { proxy_pass http://d; }
}"""))
    assert "location ^~ /v1/" in read_config(stopped, "nginx").route


def test_the_server_is_chosen_by_server_name(tmp_path):
    path = write(tmp_path, "nginx.conf", http("""
server { listen 80 default_server; server_name _; location / { proxy_pass http://ui; } }
server { listen 80; server_name *.example.com; location /v1/ { proxy_pass http://wild; } }
server { listen 80; server_name api.example.com; location /v1/ { proxy_pass http://exact; } }
server { listen 80; server_name ~^llm\\d+\\.corp$; location /v1/ { proxy_pass http://regex; } }"""))
    def target(host):
        return read_config(path, "nginx", RouteWanted(host=host)).route
    assert "api.example.com" in target("api.example.com")
    assert "*.example.com" in target("chat.example.com")
    assert "~^llm" in target("llm7.corp")
    assert "server _" in target("other.org")  # nobody's name: the default server


def test_an_unusable_route_lists_what_is_proxied(tmp_path):
    path = write(tmp_path, "nginx.conf", http("server { listen 80; location /static/ { proxy_pass http://s; } }"))
    with pytest.raises(UnusableInput, match=r"proxied routes are: server .*location /static/"):
        read_config(path, "nginx")
    assert read_config(path, "nginx", RouteWanted(path="/static/chat/completions")).path.startswith("/static/")


def test_a_newer_nginxs_defaults_are_judged_and_written_into_the_run(tmp_path):
    path = write(tmp_path, "nginx.conf", http("""upstream llm { server 10.0.0.1:8000; }
server { listen 80; location /v1/ { proxy_pass http://llm; proxy_set_header Host $host; } }"""))
    here = read_config(path, "nginx")  # no flag: the current release's own defaults
    assert here.get("proxy_http_version").value == "1.1" and here.version.startswith("1.30")
    old = read_config(path, "nginx", RouteWanted(version="1.22"))
    assert old.get("proxy_http_version").value == "1.0" and old.version == "1.22"
    # 1.29.7: the lab has no 1.29, so 1.22 stands in, with 1.29.7's defaults written into its run
    reading, rewritten, text = run_here(path, tmp_path, RouteWanted(version="1.29.7"))
    assert rewritten.series == "1.22"
    assert reading.get("proxy_http_version").value == "1.1" and reading.get("keepalive").value == "32 local"
    assert reading.get("proxy_set_header Connection").value == ""
    assert "proxy_http_version 1.1;" in text and 'proxy_set_header Connection "";' in text
    assert "keepalive 32;" in text and any("1.29.7" in n for n in reading.notes + rewritten.notes)
    _, _, text = run_here(path, tmp_path / "current")  # 1.30 has them of itself: nothing written
    assert "proxy_http_version" not in text and "keepalive" not in text
    with pytest.raises(UnusableInput, match="--proxy-version must look like"):
        read_config(path, "nginx", RouteWanted(version="latest"))


def test_tls_is_kept_with_a_certificate_made_for_the_run(tmp_path):
    path = write(tmp_path, "nginx.conf", http("""server { listen 80; return 301 https://$host$request_uri; }
server { listen 443 ssl; http2 on; server_name chat.example.com;
  ssl_certificate /etc/letsencrypt/live/chat/fullchain.pem; ssl_certificate_key /etc/letsencrypt/live/chat/privkey.pem;
  ssl_dhparam /etc/letsencrypt/ssl-dhparams.pem; ssl_stapling on; ssl_protocols TLSv1.2 TLSv1.3;
  if ($scheme = http) { return 301 https://$host$request_uri; }
  location /v1/ { proxy_pass https://10.0.0.1:8443; proxy_buffering off; } }"""))
    _, rewritten, text = run_here(path, tmp_path)
    assert rewritten.tls and re.search(rf"listen 127\.0\.0\.1:{rewritten.listen_port} ssl http2;", text)
    assert f"ssl_certificate {tmp_path / 'run'}/tls/cert.pem;" in text and "ssl_protocols TLSv1.2 TLSv1.3;" in text
    assert "letsencrypt" not in live(text) and "ssl_stapling on" not in live(text)
