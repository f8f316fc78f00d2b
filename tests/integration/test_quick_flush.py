"""The flush between transactional tests (tests/quick_flush.py) leaves what Django's leaves:
every table empty but the content types and permissions the migrations made, and those as a
full flush makes them even after a test changed them. The tests run in this order."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType

from scheduler_app.models import Sweep

pytestmark = pytest.mark.django_db(transaction=True)
PERMISSIONS = {}


def test_a_test_leaves_rows_and_changes_a_content_type():
    PERMISSIONS["before"] = Permission.objects.count()
    get_user_model().objects.create(username="ada")
    Sweep.objects.create(id="sweep-0000aaaa", name="lr sweep")
    ContentType.objects.filter(app_label="scheduler_app", model="sweep").delete()
    ContentType.objects.create(app_label="gone_app", model="gone")


def test_the_next_starts_empty_with_the_migrations_content_types():
    assert not get_user_model().objects.exists()
    assert not Sweep.objects.exists()
    assert not ContentType.objects.filter(app_label="gone_app").exists()
    sweep_type = ContentType.objects.get_for_model(Sweep)
    assert Permission.objects.filter(content_type=sweep_type, codename="view_sweep").exists()
    assert Permission.objects.count() == PERMISSIONS["before"]


def test_and_the_one_after_that_too():
    test_the_next_starts_empty_with_the_migrations_content_types()
