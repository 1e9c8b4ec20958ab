"""Run the API with uvicorn in a background thread, next to the service loop (or a test).

    with ApiServer(create_app(store, config), host="127.0.0.1", port=8377) as server:
        ...  # server.url == "http://127.0.0.1:8377"

``port=0`` picks a free port (the socket is bound before uvicorn starts, so there is no
race between choosing the port and listening on it). With ``ssl_certfile`` and
``ssl_keyfile`` it serves HTTPS. ``exposure_warnings(config)`` says what is unsafe about
where and how the API listens; ``trainmedic serve`` logs each at startup.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from trainmedic.core.errors import TrainmedicError
from trainmedic.service.config.sections import Config


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name) only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def exposure_warnings(config: Config) -> list[str]:
    """One line per unsafe setting of the API: listening beyond loopback in clear text,
    endpoints left without a token."""
    service, api = config.service, config.api
    warnings = []
    if not is_loopback(service.api_host) and not api.tls:
        warnings.append(
            f"the API listens on {service.api_host}:{service.api_port} beyond loopback "
            "without TLS: tokens and job data cross the network in clear text (set "
            "[api] tls_certfile and tls_keyfile, or listen on 127.0.0.1 behind a proxy)"
        )
    if not service.api_token and not service.api_read_token:
        warnings.append(
            "no API token configured: every endpoint but /healthz answers 403 (set "
            "service.api_read_token / service.api_token or $TRAINMEDIC_API_READ_TOKEN / "
            "$TRAINMEDIC_API_TOKEN)"
        )
    return warnings


class ApiServerError(TrainmedicError):
    """The API server could not start (address in use, ...)."""


class ApiServer:
    def __init__(
        self,
        app: FastAPI,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        ssl_certfile: str = "",
        ssl_keyfile: str = "",
    ) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._log_level = log_level
        self._ssl = (ssl_certfile, ssl_keyfile) if ssl_certfile and ssl_keyfile else None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            raise ApiServerError("API server not started")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "https" if self._ssl else "http"
        return f"{scheme}://{host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self._host, self._port))
        except OSError as error:
            sock.close()
            raise ApiServerError(
                f"cannot listen on {self._host}:{self._port}: {error.strerror}"
            ) from error
        self._socket = sock
        certfile, keyfile = self._ssl or (None, None)
        config = uvicorn.Config(
            self._app,
            log_level=self._log_level,
            access_log=False,
            lifespan="off",
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="trainmedic-api", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ApiServerError(f"API server on {self._host}:{self._port} did not start")
            time.sleep(0.01)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._socket is not None:
            self._socket.close()
        self._server = None
        self._thread = None

    def __enter__(self) -> ApiServer:
        self.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self.stop()
