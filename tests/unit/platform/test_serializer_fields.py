"""webapp.serializers.BuiltOnce: each serializer instance gets its own fields, bound to itself,
copied from fields built once per class, which stay unbound and unchanged."""
from __future__ import annotations

import pytest
from rest_framework.relations import ManyRelatedField

from webapp.serializers import JobSerializer

pytestmark = pytest.mark.django_db


def test_instances_get_their_own_bound_fields():
    a, b = JobSerializer(), JobSerializer()
    assert list(a.fields) == list(b.fields) == JobSerializer.Meta.fields
    for name in a.fields:
        assert a.fields[name] is not b.fields[name], name
        assert a.fields[name].parent is a and b.fields[name].parent is b, name
        assert a.fields[name].field_name == name
    gpus_a, gpus_b = a.fields["gpus"], b.fields["gpus"]
    assert isinstance(gpus_a, ManyRelatedField)
    assert gpus_a.child_relation is not gpus_b.child_relation and gpus_a.child_relation.parent is gpus_a
    assert a.fields["owner"].source_attrs == ["owner", "username"]
    built = JobSerializer._built_fields
    assert all(f.parent is None and f.field_name is None for f in built.values())


def test_validation_still_applies_each_fields_limits():
    bad = JobSerializer(data={"model_name": "resnet18", "batch_size": 5000, "steps": 0})
    assert not bad.is_valid()
    assert set(bad.errors) == {"batch_size", "steps"}
    assert "less than or equal to 4096" in str(bad.errors["batch_size"][0])
    good = JobSerializer(data={"model_name": "resnet18", "batch_size": 8, "steps": 3})
    assert good.is_valid(), good.errors
    assert good.validated_data["batch_size"] == 8
    again = JobSerializer(data={"model_name": "resnet18", "batch_size": 5000, "steps": 3})
    assert not again.is_valid() and set(again.errors) == {"batch_size"}


def test_every_wrong_field_is_named_at_once():
    s = JobSerializer(data={"model_name": 5, "batch_size": 5000, "steps": 0, "num_gpus": -1, "batchsize": 3})
    assert not s.is_valid()
    assert set(s.errors) == {"model_name", "batch_size", "steps", "num_gpus", "batchsize"}, s.errors
    assert s.errors["model_name"] == ["must be a string."] and "unknown field" in s.errors["batchsize"][0]
    missing = JobSerializer(data={"batchsize": 3})  # required fields absent: named too
    assert not missing.is_valid() and {"model_name", "batch_size", "batchsize"} <= set(missing.errors)
