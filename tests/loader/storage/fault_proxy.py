#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for the storage tests.

Listens on 127.0.0.1 and forwards each request to --upstream (host:port),
injecting faults decided by a pure function of (--seed, the request's
method, path and Range, and how many times that same request was seen):
  delay     sleep --delay-ms before forwarding
  slowdown  answer 503 with S3's <Code>SlowDown</Code> body
  reset     close the connection with a TCP reset, no response
  truncate  forward the response but cut its body in half, then close
Each kind has a probability (--p-delay, ...). A request is faulted at most
--max-faults times in a row (then forwarded clean), so that a client that
retries enough always succeeds; only requests of --methods are faulted. Every response carries the upstream's
status and headers. GET /__faults answers the counts as JSON. Prints
"port <n>" once it listens. Standard library only.
"""
import argparse
import hashlib
import http.client
import json
import socket
import socketserver
import struct
import sys
import threading
import time

COUNTS = {"requests": 0, "delay": 0, "slowdown": 0, "reset": 0, "truncate": 0,
          "clean": 0}
SEEN = {}
LOCK = threading.Lock()
ARGS = None


def decide(method, path, range_header):
    key = "%s %s %s" % (method, path, range_header)
    with LOCK:
        n = SEEN.get(key, 0)
        SEEN[key] = n + 1
        COUNTS["requests"] += 1
    if n >= ARGS.max_faults or method not in ARGS.methods.split(","):
        return "clean"
    digest = hashlib.sha256(("%d|%s|%d" % (ARGS.seed, key, n)).encode()).digest()
    draw = struct.unpack("<Q", digest[:8])[0] / 2.0 ** 64
    for kind in ("delay", "slowdown", "reset", "truncate"):
        p = getattr(ARGS, "p_" + kind)
        if draw < p:
            return kind
        draw -= p
    return "clean"


class Handler(socketserver.StreamRequestHandler):
    disable_nagle_algorithm = True  # see range_http_server.py

    def handle(self):
        while True:
            line = self.rfile.readline(65537)
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                continue
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers = []
            while True:
                h = self.rfile.readline(65537)
                if h in (b"\r\n", b"\n", b""):
                    break
                name, _, value = h.decode("latin-1").partition(":")
                headers.append((name.strip(), value.strip()))
            body = b""
            for name, value in headers:
                if name.lower() == "content-length":
                    body = self.rfile.read(int(value))
            if target == "/__faults":
                payload = json.dumps(COUNTS).encode()
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(payload))
                if method != "HEAD":
                    self.wfile.write(payload)
                continue
            range_header = next((v for n, v in headers if n.lower() == "range"), "")
            kind = decide(method, target, range_header)
            with LOCK:
                COUNTS[kind] += 1
            if kind == "delay":
                time.sleep(ARGS.delay_ms / 1000.0)
            elif kind == "slowdown":
                payload = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown"
                           b"</Code><Message>Please reduce your request rate.</Message></Error>")
                self.wfile.write(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
                continue
            elif kind == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
                return
            upstream = http.client.HTTPConnection(ARGS.upstream_host, ARGS.upstream_port,
                                                  timeout=30)
            upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() not in ("connection", "content-length"):
                    upstream.putheader(name, value)
            if body:
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body if body else None)
            response = upstream.getresponse()
            data = response.read() if method != "HEAD" else b""
            out = ["HTTP/1.1 %d %s" % (response.status, response.reason)]
            length = None
            for name, value in response.getheaders():
                if name.lower() in ("connection", "transfer-encoding", "keep-alive"):
                    continue
                if name.lower() == "content-length":
                    length = value
                    continue
                out.append("%s: %s" % (name, value))
            out.append("Content-Length: %s" % (length if method == "HEAD" and length
                                                else len(data)))
            upstream.close()
            self.wfile.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            if kind == "truncate" and len(data) > 1:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.connection.close()
                return
            self.wfile.write(data)
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True, help="host:port")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--p-delay", type=float, default=0.0)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--p-slowdown", type=float, default=0.0)
    parser.add_argument("--p-reset", type=float, default=0.0)
    parser.add_argument("--p-truncate", type=float, default=0.0)
    parser.add_argument("--max-faults", type=int, default=2)
    parser.add_argument("--methods", default="GET,HEAD",
                        help="the methods faults may hit, comma-separated")
    ARGS = parser.parse_args()
    ARGS.upstream_host, port = ARGS.upstream.rsplit(":", 1)
    ARGS.upstream_port = int(port)
    server = Server(("127.0.0.1", 0), Handler)
    print("port %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
