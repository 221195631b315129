"""Switching the active provider: from a LAN client with the proxy's token, and from the CLI,
which saves a choice only once the running proxy took it (or when none runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from click.testing import CliRunner

from solver.proxy import Provider, ProxyConfig, ProxyServer, load_config
from solver.proxy._app import build_app
from tests.proxy.test_cli import _config, cli

LAN = ("192.168.1.20", 50000)


def _post(config: ProxyConfig, client: tuple[str, int], token: str = "") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(config), client=client)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
            return await http.post("/admin/active", json={"provider": "b"}, headers=headers)

    return asyncio.run(go())


def _providers() -> tuple[Provider, ...]:
    return (
        Provider("a", "http://127.0.0.1:9/v1", "chat"),
        Provider("b", "http://127.0.0.1:9/v1", "chat"),
    )


def test_a_lan_client_with_the_token_may_switch() -> None:
    config = ProxyConfig(providers=_providers(), active="a", host="0.0.0.0", token="s3cret")
    answer = _post(config, LAN, "s3cret")
    assert answer.status_code == 200 and answer.json()["active"] == "b"
    assert _post(config, LAN, "wrong").status_code == 401
    assert _post(config, LAN).status_code == 401


def test_without_a_token_only_loopback_may_switch() -> None:
    config = ProxyConfig(providers=_providers(), active="a")
    assert _post(config, LAN).status_code == 403
    assert _post(config, ("127.0.0.1", 50000)).status_code == 200


def test_use_does_not_save_a_choice_the_running_proxy_refused(tmp_path: Path) -> None:
    running = tmp_path / "running"
    running.mkdir()
    served = _config(running, "http://127.0.0.1:9", "http://127.0.0.1:9")
    mine = tmp_path / "mine.toml"
    mine.write_text(served.read_text().replace('name = "b"', 'name = "c"'))
    with ProxyServer(load_config(served)) as proxy:
        result = CliRunner().invoke(cli, ["proxy", "--config", str(mine), "use", "c",
                                          "--url", proxy.url])  # fmt: skip
    assert result.exit_code == 6, result.output
    assert load_config(mine).active == "a"  # not saved: the running proxy refused it
    assert not mine.with_name(mine.name + ".active").exists()
