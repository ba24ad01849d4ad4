"""URL map: admin, dashboard, API root (/api/v1/), each engine's API, OpenAPI schema and docs."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from webapp.authentication import throttle_logins
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from .health import healthz
from .views import not_found

urlpatterns = [
    path("admin/login/", throttle_logins(admin.site.login)),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("accounts/login/", throttle_logins(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/placement/", include("placement.api")),
    path("api/v1/tuning/", include("tuning.api")),
    path("api/v1/rlweights/", include("rlweights.api")),
    path("api/v1/federation/", include("federation.api")),
    path("api/v1/", include("webapp.api")),
    # any other URL under /api/ ending in a slash: the JSON 404 of ``handler404``, also with
    # DEBUG on (where Django shows its HTML page instead of calling the handler); a URL without
    # the slash still gets CommonMiddleware's redirect first, as everywhere else
    # (CSRF-exempt: it changes nothing, and a DELETE must get the 404, not a CSRF 403 page)
    re_path(r"^api/(?:.*/)?$", csrf_exempt(not_found)),
    path("placement/", include("placement.urls")),
    path("federation/", include("federation.urls")),
    path("rlweights/", include("rlweights.urls")),
    path("tuning/", include("tuning.urls")),
    path("", include("webapp.dashboard_urls")),
]

handler404 = "webapp.views.not_found"
