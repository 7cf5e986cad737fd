#!/usr/bin/env python3
"""A static file server with HTTP Range support, for the storage tests.

Serves the files under --root on 127.0.0.1 (HTTP/1.1, keep-alive, one thread
per connection): GET and HEAD; a single "Range: bytes=a-b" (or "a-" or
"-n") answers 206 with Content-Range, a range starting past the end 416 with
"Content-Range: bytes */<size>". Prints "port <n>" on stdout once it
listens, then serves until killed. Standard library only.
"""
import argparse
import http.server
import os
import re
import sys

RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY the
    # body of a small response waits for the client's delayed ACK (40 ms).
    disable_nagle_algorithm = True
    root = "."

    def log_message(self, *args):  # quiet
        pass

    def _path(self):
        path = os.path.normpath(os.path.join(self.root, self.path.split("?")[0].lstrip("/")))
        if not path.startswith(os.path.abspath(self.root)) or not os.path.isfile(path):
            return None
        return path

    def _plain(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = self._path()
        if path is None:
            self._plain(404, "not found: %s" % self.path)
            return
        size = os.path.getsize(path)
        first, last = 0, size - 1
        header = self.headers.get("Range")
        status = 200
        if header is not None:
            m = RANGE.match(header.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                self._plain(400, "bad Range: %s" % header)
                return
            if m.group(1) == "":
                first = max(0, size - int(m.group(2)))
            else:
                first = int(m.group(1))
                if m.group(2) != "":
                    last = min(int(m.group(2)), size - 1)
            if first >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        length = last - first + 1
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(path, "rb") as f:
            f.seek(first)
            left = length
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    Handler.root = os.path.abspath(args.root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print("port %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
