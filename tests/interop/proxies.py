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


class HubFaultProxy:
    """An HTTP proxy in front of an upstream `cairn serve`, shaped like the real Hub and failing as the tests
    say (a mirror's upstream): every request is forwarded and its answer streamed back, except that

    - `fail(status, count, retry_after, only)`: the next `count` requests (whose path contains `only`, when
      given) answer `status` (429, 5xx, or a 404 that is not retried) at once;
    - `cut(after_bytes, count)`: the next `count` file downloads stop after `after_bytes` bytes of body (the
      connection closes mid-answer);
    - `down = True`: every connection is closed before an answer;
    - `redirect = True`: resolve answers a 302 (with the Hub's X-Xet-Hash, X-Linked-* and Link headers) to the
      upstream's own address — another host:port, as the Hub sends downloads to its CDN;
    - `strip_xet` (paths): those files' answers lose their Xet headers (an upstream file without Xet);
    - `throttle` (bytes per second, 0: none): file downloads are sent no faster (a distant, slow upstream);
    - `moved` (path → path): a request whose path starts with a key is answered 307 to the path with the key
      replaced (the Hub's redirect of a legacy id, "gpt2" → "openai-community/gpt2");
    - `flip(count, delay)`: the next `count` xorb transfers (`/v1/transfer/`) are answered after `delay`
      seconds with one bit of their body altered (at byte 4,096: inside the first chunk's data), their length
      unchanged (bytes altered on the way);
    - `xet_through = True`: the upstream's CAS is reached through the proxy too (its address in Xet read
      tokens and reconstructions is rewritten to the proxy's), so that cuts, throttling and counting apply to
      xorb transfers; otherwise the CAS is another host:port, as the Hub's is.

    Counts what it forwarded: `requests` by (method, path) and `body_bytes` of file downloads (resolve, and
    xorb transfers through it) sent."""

    def __init__(self, upstream_url: str):
        import http.server

        self.upstream = upstream_url.rstrip("/")
        self.lock = threading.Lock()
        self.failures: list[tuple[int, str | None, str | None]] = []
        self.cuts: list[int] = []
        self.flips: list[float] = []
        self.flipped = 0
        self.down = False
        self.redirect = False
        self.strip_xet: set[str] = set()
        self.throttle = 0
        self.moved: dict[str, str] = {}
        self.xet_through = False
        self.requests: dict[tuple[str, str], int] = {}
        self.failed = 0
        self.body_bytes = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                proxy._handle(self, "GET")

            def do_HEAD(self):
                proxy._handle(self, "HEAD")

            def do_POST(self):
                proxy._handle(self, "POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fail(self, status: int, count: int = 1, retry_after: str | None = None, only: str | None = None) -> None:
        with self.lock:
            self.failures += [(status, retry_after, only)] * count

    def cut(self, after_bytes: int, count: int = 1) -> None:
        with self.lock:
            self.cuts += [after_bytes] * count

    def flip(self, count: int = 1, delay: float = 0.0) -> None:
        with self.lock:
            self.flips += [delay] * count

    def count(self, method: str, fragment: str) -> int:
        with self.lock:
            return sum(n for (m, p), n in self.requests.items() if m == method and fragment in p)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handle(self, h, method: str) -> None:
        import http.client
        import urllib.parse

        if self.down:
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        with self.lock:
            self.requests[(method, h.path)] = self.requests.get((method, h.path), 0) + 1
            failure = None
            if self.failures and (self.failures[0][2] is None or self.failures[0][2] in h.path):
                failure = self.failures.pop(0)
                self.failed += 1
        for old, new in self.moved.items():
            if h.path == old or h.path.startswith(old + "/") or h.path.startswith(old + "?"):
                h.send_response(307)
                h.send_header("Location", new + h.path[len(old):])
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        if failure:
            status, retry_after, _ = failure
            h.send_response(status)
            if retry_after:
                h.send_header("Retry-After", retry_after)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        body = None
        if method == "POST":
            body = h.rfile.read(int(h.headers.get("Content-Length", "0")))
        is_file = "/resolve/" in h.path or "/v1/transfer/" in h.path
        rewrites = self.xet_through and ("/xet-read-token/" in h.path or "/reconstructions/" in h.path)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        target = urllib.parse.urlsplit(self.upstream)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        if is_file and self.redirect:
            # As the Hub: a 302 carrying the file's Xet headers, to another host that serves the bytes.
            conn.request("HEAD", h.path, headers=headers)
            answer = conn.getresponse()
            answer.read()
            h.send_response(302)
            for k, v in answer.getheaders():
                if k.lower().startswith("x-") or k.lower() in ("link", "etag"):
                    if not self._stripped(h.path, k):
                        h.send_header(k, v)
            h.send_header("Location", self.upstream + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()
            conn.close()
            return
        conn.request(method, h.path, body=body, headers=headers)
        answer = conn.getresponse()
        cut_at = None
        flip_after = None
        if is_file and method == "GET":
            with self.lock:
                cut_at = self.cuts.pop(0) if self.cuts else None
                if self.flips and "/v1/transfer/" in h.path:
                    flip_after = self.flips.pop(0)
        if flip_after is not None:
            time.sleep(flip_after)
        h.send_response(answer.status)
        whole = None
        if (answer.getheader("Content-Length") is None or rewrites) and method != "HEAD":
            whole = answer.read()  # a chunked answer (git's) is passed on whole, with its length
            if rewrites:
                whole = whole.replace(self.upstream.encode(), self.url.encode())
            h.send_header("Content-Length", str(len(whole)))
        for k, v in answer.getheaders():
            if k.lower() in ("connection", "transfer-encoding") or self._stripped(h.path, k):
                continue
            if whole is not None and k.lower() == "content-length":
                continue
            if rewrites and k.lower() == "x-xet-cas-url":
                v = self.url
            h.send_header(k, v)
        h.end_headers()
        if whole is not None:
            h.wfile.write(whole)
            conn.close()
            return
        sent = 0
        while method != "HEAD":
            data = answer.read(64 * 1024)
            if not data:
                break
            if flip_after is not None and sent <= 4096 < sent + len(data):
                data = bytearray(data)
                data[4096 - sent] ^= 0x01
                data = bytes(data)
                with self.lock:
                    self.flipped += 1
            if cut_at is not None and sent + len(data) > cut_at:
                data = data[:cut_at - sent]
                h.wfile.write(data)
                with self.lock:
                    self.body_bytes += len(data) if is_file else 0
                h.wfile.flush()
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
                conn.close()
                return
            h.wfile.write(data)
            sent += len(data)
            if is_file and self.throttle:
                time.sleep(len(data) / self.throttle)
            if is_file:
                with self.lock:
                    self.body_bytes += len(data)
        conn.close()

    def _stripped(self, path: str, header: str) -> bool:
        return header.lower() in ("x-xet-hash", "link") and any(p in path for p in self.strip_xet)
