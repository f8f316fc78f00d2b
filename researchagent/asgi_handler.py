"""Django's ASGI handler with the middleware chain run in sync mode, in one thread a request,
and that thread reused by the next request.

Under ASGI, Django runs each middleware that can do both in async mode, and a MiddlewareMixin
in async mode hands each of its process_request and process_response to a thread and back
(sync_to_async); WhiteNoise (sync only) near the top added one more hop there and back. That
made ~18 hops between the event loop and a thread for every request. Here the chain is
loaded as WSGI loads it and called once in the request's thread (the one thread its database
connection belongs to); only an async view hops, to run on the event loop. Responses, streams
included, are still sent by the ASGI handler on the loop.

Each request's thread-sensitive work runs on one thread of its own, as Django has it; but
asgiref made that thread for the request and then another to join it at the end. Here an
idle thread of an earlier request is taken instead (RequestThreads). One still running what
a cancelled request left behind (a sync view cannot be interrupted) is never handed on.

Measured (one web process, 20 clients at once, 2 cores): a 404 went from 255 to ~480
requests/s, GET /api/runs/{id} from 200 to ~320, POST /api/runs from 93 to ~140 (issue 25).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler

IDLE_THREADS_KEPT = 32  # past this many idle ones, a request's thread ends with it


class RequestThread(ThreadPoolExecutor):
    """One thread that runs a request's sync work, and knows whether it is still at it."""

    def __init__(self):
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._lock = threading.Lock()
        self._pending = 0

    def submit(self, fn, /, *args, **kwargs):
        with self._lock:
            self._pending += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future) -> None:
        with self._lock:
            self._pending -= 1

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._pending == 0


class RequestThreads:
    def __init__(self, keep: int = IDLE_THREADS_KEPT):
        self._idle: list[RequestThread] = []
        self._keep = keep

    def take(self) -> RequestThread:
        return self._idle.pop() if self._idle else RequestThread()

    def give_back(self, thread: RequestThread) -> None:
        if thread.idle and len(self._idle) < self._keep:
            self._idle.append(thread)
        else:  # it ends once what it runs returns (or at the process's exit)
            thread.shutdown(wait=False)


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()
        self.request_threads = RequestThreads()  # used from the event loop's thread only

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}")
        thread = self.request_threads.take()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send)
        finally:
            self.request_threads.give_back(thread)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
