"""The python3-websockets echo server that doc/benchmarks.md compares
petrel's wsecho with: one process, asyncio, every message sent back as it
came.  Usage: /usr/bin/python3 py_echo_server.py PORT"""
import asyncio
import sys

import websockets


async def echo(ws, path=None):
    async for m in ws:
        await ws.send(m)


async def main(port):
    async with websockets.serve(echo, "127.0.0.1", port, max_size=None, ping_interval=None,
                                compression=None):
        print("listening", flush=True)
        await asyncio.Future()

asyncio.run(main(int(sys.argv[1])))
