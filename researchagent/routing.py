"""WebSocket routes. asgi.py wraps them in AllowedHostsOriginValidator(AuthMiddlewareStack(...));
each consumer also refuses anonymous users itself (see the consumers in each app)."""

from django.urls import path

from events_app.consumers import AgentEventsConsumer
from sessions_app.consumers import ChatEventsConsumer

websocket_urlpatterns: list = [
    path("ws/agents/events/", AgentEventsConsumer.as_asgi(), name="ws-agent-events"),
    path("ws/chat/<str:session_id>/", ChatEventsConsumer.as_asgi(), name="ws-chat-events"),
]
