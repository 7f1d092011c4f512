"""TCP between a client and servers: a round-robin forwarder (a load balancer, a node to cut) and a proxy that
delays answers (transfer URLs expiring under a client)."""

from __future__ import annotations

import socket
import threading
import time


class TcpForwarder:
    """TCP forwarder 127.0.0.1:<port> → 127.0.0.1:<one of targets>, each connection to the next target in turn,
    skipping targets that refuse (a load balancer in front of several nodes: a node killed is passed over). The
    first `delayed` connections hold the client's first bytes (its request) for `delay` seconds before
    forwarding them; everything else passes straight through."""

    def __init__(self, targets: list[int], delay: float = 0.0, delayed: int = 0):
        self.targets = list(targets)
        self.next_target = 0
        self.per_target = {t: 0 for t in self.targets}
        self.delay = delay
        self.delayed_left = delayed
        self.delayed_done = 0
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                hold = self.delayed_left > 0
                if hold:
                    self.delayed_left -= 1
            threading.Thread(target=self._serve, args=(client, hold), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        for _ in range(len(self.targets)):
            with self.lock:
                target = self.targets[self.next_target % len(self.targets)]
                self.next_target += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                continue
            with self.lock:
                self.per_target[target] += 1
            return upstream
        return None

    def _serve(self, client: socket.socket, hold: bool) -> None:
        upstream = self._connect()
        if upstream is None:
            client.close()
            return

        def pump(src, dst, first_delay):
            try:
                first = True
                while True:
                    data = src.recv(256 * 1024)
                    if not data:
                        break
                    if first and first_delay:
                        time.sleep(first_delay)
                        with self.lock:
                            self.delayed_done += 1
                    first = False
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pump, args=(upstream, client, 0), daemon=True)
        t.start()
        pump(client, upstream, self.delay if hold else 0)
        t.join(5)
        client.close()
        upstream.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class DelayProxy(TcpForwarder):
    """A TcpForwarder to one target whose first `delayed` connections are held `delay` seconds. Used as the
    server's --public-url so transfer URLs (and only those) go through it."""

    def __init__(self, target_port: int, delay: float, delayed: int = 1):
        super().__init__([target_port], delay, delayed)
