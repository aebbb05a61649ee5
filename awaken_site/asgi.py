import os

from awaken_site import http_limits
from awaken_site.asgi_handler import http_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "awaken_site.settings")
http_limits.install()  # long addresses reach the app, which says what is too long
django_asgi_app = http_application()  # one thread hop per request (asgi_handler.py)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from awaken_site.admission import with_admission  # noqa: E402
from awaken_site.flow_control import with_flow_control  # noqa: E402
from runs.a2a_server import with_a2a  # noqa: E402
from runs.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # streamed responses paced by what the client reads (daphne's send never waits);
        # a bounded number of requests in Django's views at once (awaken_site/admission.py)
        "http": with_flow_control(with_a2a(with_admission(django_asgi_app))),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

from django.urls import get_resolver  # noqa: E402

from awaken_site import gc_tuning  # noqa: E402

get_resolver().url_patterns  # noqa: B018  (loaded now rather than by the first request)
gc_tuning.settle()
