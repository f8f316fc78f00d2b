"""WebSocket routes. asgi.py wraps them in AllowedHostsOriginValidator(AuthMiddlewareStack(...));
each consumer also refuses anonymous users itself (see the consumers in each app)."""

websocket_urlpatterns: list = []
