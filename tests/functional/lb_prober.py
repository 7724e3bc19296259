"""A load balancer's API port asked over and over while a test changes
the cluster behind it."""

import threading
import time

from mgmt_localsite import haproxy as haproxy_site


class Prober:
    """Connects to the LB's API port over and over from a thread:
    ``(time, backend)`` of each attempt (the backend's greeting
    ``(name, port)``), ``None`` for a failed one.

    :param interval: seconds between the end of one attempt and the
        next.
    """

    def __init__(self, address, port, interval=0.02):
        self.address, self.port = address, port
        self.interval = interval
        self.seen = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def _probe(self):
        while not self._stop.is_set():
            try:
                backend = haproxy_site.ask(self.address, self.port,
                                           timeout=2.0)
            except OSError:
                backend = None
            self.seen.append((time.time(), backend))
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join(10)
