"""The API docs page (Swagger UI) rendered from the app's own template and static files.

django-ninja renders its docs with Django's template engine only when "ninja" is an installed
app, and from a CDN otherwise. It is not one here (researchagent/settings.py says why), while
its template and assets are on the template and static paths: this page renders them itself.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI, Swagger
from ninja.openapi.docs import _csrf_needed


class SwaggerFromOwnAssets(Swagger):
    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        # As Swagger.render_page (the pinned django-ninja), less its CDN branch.
        self.settings["url"] = self.get_openapi_url(api, kwargs)
        context = {
            "swagger_settings": json.dumps(self.settings, indent=1),
            "api": api,
            "add_csrf": _csrf_needed(api),
        }
        return render(request, self.template, context)
