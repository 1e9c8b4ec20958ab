"""Run the API with uvicorn in a background thread, next to the service loop (or a test).

    with ApiServer(create_app(store, config), host="127.0.0.1", port=8377) as server:
        ...  # server.url == "http://127.0.0.1:8377"

``port=0`` picks a free port (the socket is bound before uvicorn starts, so there is no
race between choosing the port and listening on it).
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from trainmedic.core.errors import TrainmedicError


class ApiServerError(TrainmedicError):
    """The API server could not start (address in use, ...)."""


class ApiServer:
    def __init__(
        self, app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._log_level = log_level
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
        return f"http://{host}:{self.port}"

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
        config = uvicorn.Config(
            self._app, log_level=self._log_level, access_log=False, lifespan="off"
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
