"""schemathesis hooks for tests/integration/platform/test_schemathesis.py (loaded by the CLI
through ``SCHEMATHESIS_HOOKS``): YAML responses are read as a stream of documents.

schemathesis's own YAML deserializer reads one document and fails on the multi-document YAML
that ``GET /api/v1/federation/plans/{id}/karmada/`` returns; the schema describes that stream as
the list of its documents, which is what this deserializer yields (PyYAML ``safe_load_all``).
"""
from __future__ import annotations

import schemathesis
import yaml


# every YAML media type schemathesis registers its own deserializer for: any of them matches a
# YAML response, and the first registered wins, so each is replaced
@schemathesis.deserializer("text/yaml", "text/x-yaml", "application/x-yaml", "text/vnd.yaml", "application/yaml")
def yaml_stream(ctx, response):
    return list(yaml.safe_load_all(response.content.decode(response.encoding or "utf-8")))
