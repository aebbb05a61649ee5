import json
import pytest
from tests.api.conftest import *  # noqa
pytestmark = pytest.mark.django_db

def test_smoke(api):
    run = waiting_run()
    r = api.get(f"/api/v1/runs/{run.pk}")
    print(r.status_code, json.dumps(r.json(), indent=1)[:3000])
    r = api.get("/api/v1/runs")
    print(r.status_code, json.dumps(r.json(), indent=1)[:1500])
    r = api.get("/api/v1/tickets")
    print(r.status_code, json.dumps(r.json(), indent=1)[:1500])
    t = r.json()["items"][0]["id"]
    r = api.post(f"/api/v1/tickets/{t}/decision", {"action": "approve"}, format="json")
    print(r.status_code, r.json())
    r = api.post(f"/api/v1/tickets/{t}/decision", {"action": "approve"}, format="json")
    print(r.status_code, r.json())
    r = api.get("/api/v1/schema/")
    print(r.status_code, r["Content-Type"])
    r = api.get("/api/v1/docs/")
    print(r.status_code, r.content[:300])
    r = api.get("/readyz")
    print(r.status_code, r.json())
    r = api.get("/api/v1/nope")
    print(r.status_code, r.json())

from tests.api.schema_check import conforms

def test_conform(api):
    run = waiting_run()
    r = api.get(f"/api/v1/runs/{run.pk}")
    conforms(r, "GET", "/api/v1/runs/{run_id}")
    r = api.get("/api/v1/runs/nope")
    conforms(r, "GET", "/api/v1/runs/{run_id}")
    r = api.get("/api/v1/runs")
    conforms(r, "GET", "/api/v1/runs")

def test_conform_negative(api):
    import time
    t=time.time()
    from tests.api.schema_check import api_schema
    api_schema(); print("load", time.time()-t)
    run = waiting_run()
    r = api.get(f"/api/v1/runs/{run.pk}")
    r.content = b'{"run_id": 5}'
    with pytest.raises(Exception) as e:
        conforms(r, "GET", "/api/v1/runs/{run_id}")
    print(str(e.value)[:500])
