#!/usr/bin/env python3
"""moto's standalone S3 server on 127.0.0.1, for the S3 suites.

Starts moto's ThreadedMotoServer on a free port, creates --bucket and uploads
every file under --upload (its path below --upload as the key, under
--prefix) with boto3 against that server, prints "port <n>" on stdout and
serves until killed. Fails (exit 1, saying why) when moto or boto3 is
missing: CI installs them (third_party/python-test-requirements.txt).
"""
import argparse
import os
import signal
import sys
import threading


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--upload", default="")
    parser.add_argument("--prefix", default="")
    args = parser.parse_args()
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as e:
        print("moto_server.py: %s (pip install 'moto[server]': "
              "third_party/install-deps.sh --tests)" % e, file=sys.stderr)
        return 1
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line a request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = "http://127.0.0.1:%d" % port
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=args.bucket)
    if args.upload:
        for directory, _, files in os.walk(args.upload):
            for name in sorted(files):
                path = os.path.join(directory, name)
                key = args.prefix + os.path.relpath(path, args.upload)
                s3.upload_file(path, args.bucket, key)
    print("port %d" % port, flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
