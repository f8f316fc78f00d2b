"""Django's ASGI handler with the middleware chain run in sync mode, in one thread a request.

Under ASGI, Django runs each middleware that can do both in async mode, and a MiddlewareMixin
in async mode hands each of its process_request and process_response to a thread and back
(sync_to_async); WhiteNoise (sync only) near the top added one more hop there and back. That
made ~18 hops between the event loop and a thread for every request. Here the chain is
loaded as WSGI loads it and called once in the request's thread (the one thread its database
connection belongs to); only an async view hops, to run on the event loop. Responses, streams
included, are still sent by the ASGI handler on the loop.

Measured (one web process, 20 clients at once, 2 cores): a 404 went from 255 to ~480
requests/s, GET /api/runs/{id} from 200 to ~320, POST /api/runs from 93 to ~140 (issue 25).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class SyncChainASGIHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
