"""A static-files finder that serves plotly.js from the installed ``plotly`` package.

The ``plotly`` Python package ships the exact plotly.js its figures are made for in
``plotly/package_data/plotly.min.js``; this finder exposes that one file as
``vendor/plotly.min.js`` to ``runserver``, the test live server and ``collectstatic``,
so no copy lives in git and no page loads it from a CDN.
"""
from __future__ import annotations

from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

STATIC_NAME = "vendor/plotly.min.js"


def plotly_js_path() -> Path:
    """Absolute path of the plotly.min.js bundled with the installed plotly package."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    """Finds ``vendor/plotly.min.js`` (only that file) in the plotly package."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        folder = plotly_js_path().parent
        self.storage = FileSystemStorage(location=str(folder))
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        return []

    def find(self, path: str, find_all: bool = False, **kwargs):
        if path == STATIC_NAME and plotly_js_path().is_file():
            found = str(plotly_js_path())
            return [found] if (find_all or kwargs.get("all")) else found
        return [] if (find_all or kwargs.get("all")) else None

    def list(self, ignore_patterns):
        if plotly_js_path().is_file():
            yield "plotly.min.js", self.storage
