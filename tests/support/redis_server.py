"""A redis-server of a test's or benchmark's own, which it may restart at will."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support.factories import free_port


class PrivateRedis:
    """A redis-server of the test's own on a free port, keeping nothing on disk (as the
    machine's Redis), that the test can restart mid-run; the machine's Redis at
    127.0.0.1:6379 is shared with other tests and is never restarted."""

    def __init__(self, tmp_path: Path) -> None:
        self.port, self.dir = free_port(), tmp_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the redis-server did not start within 10 s") from None
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
