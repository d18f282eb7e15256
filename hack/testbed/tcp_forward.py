"""A TCP forwarder: `python3 tcp_forward.py LISTEN_IP:PORT TARGET_IP:PORT`.

The API server listens on 127.0.0.1 only; pods reach it through this forwarder on the node's
bridge gateway address, which is also the address the API server advertises (so the `kubernetes`
Service's endpoint is this forwarder). TLS passes through untouched: the serving certificate
carries the gateway address. Standard library only, one thread per direction per connection.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _serve(client: socket.socket, target: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(target, timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _addr(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main(argv: list[str]) -> int:
    listen, target = _addr(argv[1]), _addr(argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(listen)
    srv.listen(128)
    print(f"forwarding {argv[1]} -> {argv[2]}", flush=True)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=_serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
