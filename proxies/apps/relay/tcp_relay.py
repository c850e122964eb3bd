"""A TCP relay that changes how the bytes travel, never what they are: a hop that re-splits.

    python -m proxies.apps.relay.tcp_relay --listen 127.0.0.1:9000 --upstream 127.0.0.1:8000 --split 1-40 --seed 7

Networks, proxies and TLS terminators cut a byte stream wherever they like; a client that treats
one socket read as one event (or decodes each read on its own) breaks only when the cuts fall
inside an event or inside a UTF-8 character. `--split MIN-MAX` writes every response in pieces of
a random size in that range, each its own send, so the cuts fall everywhere; `--seed` makes
the sizes the same on every run (one generator per connection). `--upstream-http 1.0` forwards
each request line as HTTP/1.0, so the server answers close-delimited (no chunked framing, the
end is the close) as it does to an HTTP/1.0 hop. Everything else passes through untouched.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import socket
from typing import Sequence

# A pause between pieces, so each piece leaves in its own segment and the client reads it on its
# own instead of several pieces in one recv (which would hide the re-split from a slow reader).
PIECE_GAP_S = 0.001
READ_SIZE = 65536


def host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: need HOST:PORT")
    return host, int(port)


def size_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        pair = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: need MIN-MAX byte counts, e.g. 1-40") from None
    if not 1 <= pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: need 1 <= MIN <= MAX")
    return pair


def downgrade(head: bytes) -> bytes:
    """The request line with its version set to HTTP/1.0 (the rest of `head` untouched)."""
    line, sep, rest = head.partition(b"\r\n")
    if line.endswith(b" HTTP/1.1"):
        line = line[: -len(b"HTTP/1.1")] + b"HTTP/1.0"
    return line + sep + rest


async def client_to_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             http10: bool) -> None:
    head = b""
    while http10 and b"\r\n" not in head:  # the request line, whole, before anything is sent
        chunk = await reader.read(READ_SIZE)
        if not chunk:
            break
        head += chunk
    if head:
        writer.write(downgrade(head))
        await writer.drain()
    while chunk := await reader.read(READ_SIZE):
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def upstream_to_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             split: tuple[int, int] | None, seed: int) -> None:
    sizes = random.Random(seed)
    while data := await reader.read(READ_SIZE):
        if split is None:
            writer.write(data)
            await writer.drain()
            continue
        while data:
            cut = sizes.randint(*split)
            piece, data = data[:cut], data[cut:]
            writer.write(piece)
            await writer.drain()
            if data:
                await asyncio.sleep(PIECE_GAP_S)
    writer.close()


async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                upstream: tuple[str, int], split: tuple[int, int] | None, seed: int, http10: bool) -> None:
    sock = client_writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each piece its own segment
    try:
        up_reader, up_writer = await asyncio.open_connection(*upstream)
    except OSError:
        client_writer.close()
        return
    tasks = [asyncio.create_task(client_to_upstream(client_reader, up_writer, http10)),
             asyncio.create_task(upstream_to_client(up_reader, client_writer, split, seed))]
    try:
        # The response side ending (or either side failing) ends the connection; a client that
        # only half-closes its sending side still gets the whole answer.
        await tasks[1]
    except (ConnectionError, OSError):
        pass
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for writer in (up_writer, client_writer):
            writer.close()


async def serve(listen: tuple[str, int], upstream: tuple[str, int], split: tuple[int, int] | None,
                seed: int, http10: bool) -> None:
    server = await asyncio.start_server(
        lambda r, w: relay(r, w, upstream, split, seed, http10), *listen)
    print(f"relay listening on {listen[0]}:{listen[1]} -> {upstream[0]}:{upstream[1]} "
          f"(split {split or 'off'}, seed {seed}, upstream HTTP/{'1.0' if http10 else '1.1'})", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", type=host_port, required=True, metavar="HOST:PORT")
    parser.add_argument("--upstream", type=host_port, required=True, metavar="HOST:PORT")
    parser.add_argument("--split", type=size_range, default=None, metavar="MIN-MAX")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--upstream-http", choices=("1.1", "1.0"), default="1.1")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.listen, args.upstream, args.split, args.seed, args.upstream_http == "1.0"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
