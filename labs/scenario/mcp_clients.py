"""The official MCP SDKs' clients the lab measures with, declared once: an MCP scenario's variant
names one (`McpVariant.client_sdk`), the runner opens its sessions through it, `labs setup`
installs what it needs, the report names the package. Each returns the Python client's record
(`labs.client.mcp_session.McpResult`): the Python SDK's (labs/client/mcp_session.py), the
TypeScript SDK's on Node (labs/client/mcp_node.py) and in Chromium on a page of another origin
(labs/scenario/mcp_browser.py).

    outcome = await measure("typescript-sdk", url, calls=2, hold_s=3)

The SDKs are imported when a session runs, not by the catalogue that names them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal

from labs.scenario.chromium import NEEDS as CHROMIUM_NEEDS

if TYPE_CHECKING:
    from labs.client.mcp_session import McpResult

McpClientName = Literal["python-sdk", "typescript-sdk", "typescript-sdk-chromium"]
Measure = Callable[..., Awaitable["McpResult"]]  # (url, **measure_session's options) -> its record


def _python_sdk() -> Measure:
    from labs.client.mcp_session import measure_session
    return measure_session


def _typescript_sdk() -> Measure:
    from labs.client.mcp_node import measure_node_session
    return measure_node_session


def _typescript_sdk_in_chromium() -> Measure:
    from labs.scenario.mcp_browser import browser_session
    return browser_session


@dataclass(frozen=True)
class McpClient:
    name: McpClientName
    package: str  # what runs, as the registry names it
    load: Callable[[], Measure]  # imports the SDK (when a session runs) and gives its measuring function
    modes: tuple[str, ...]  # the handshakes it speaks (labs.client.mcp_session.MODES)
    needs: tuple[str, ...]  # what `labs setup` installs for it (labs.needs.ALL)


MCP_CLIENTS: dict[McpClientName, McpClient] = {client.name: client for client in (
    # Its httpx2 client keeps cookies (a balancer's affinity cookie goes back).
    McpClient("python-sdk", "mcp 2.3 (PyPI)", _python_sdk, ("legacy", "modern"), ("python-mcp",)),
    # Client.connect always sends initialize (sdk 1.32.2); Node's fetch keeps no cookies.
    McpClient("typescript-sdk", "@modelcontextprotocol/sdk 1.32.2 (npm)", _typescript_sdk, ("legacy",),
              ("node-modules",)),
    # The same SDK bundled by webpack (proxies/apps/node/mcp-browser/), run by Chromium.
    McpClient("typescript-sdk-chromium", "@modelcontextprotocol/sdk 1.32.2 (npm) in Chromium",
              _typescript_sdk_in_chromium, ("legacy",), (*CHROMIUM_NEEDS, "node-modules", "mcp-browser-bundle")),
)}
CHROMIUM: McpClientName = "typescript-sdk-chromium"
DEFAULT_CLIENT: McpClientName = "python-sdk"


async def measure(client: McpClientName, url: str, **options: Any) -> McpResult:
    """One session on `url` through `client`'s SDK, measured (measure_session's keyword arguments);
    a handshake the SDK does not speak is a ValueError."""
    mode = options.get("mode", "legacy")  # (the browser's session takes no mode: it is legacy)
    if mode not in MCP_CLIENTS[client].modes:
        raise ValueError(f"the {client} client speaks {MCP_CLIENTS[client].modes}, not mode {mode!r}")
    return await MCP_CLIENTS[client].load()(url, **options)
