"""REST API of the rlweights engine, mounted under /api/v1/ by webapp.urls."""
from rest_framework.routers import SimpleRouter

router = SimpleRouter()
urlpatterns = router.urls
