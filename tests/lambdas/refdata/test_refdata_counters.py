import threading
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from boto3.dynamodb.conditions import Key
from moto.dynamodb.responses import DynamoHandler
from refdata.counters import counter_key, next_key, next_value
from refdata.globalid import create_item
from refdata.registry import KeyConventionError, indexable_schemas

pytestmark = pytest.mark.integration


def test_counters_are_per_partition(table):
    next_value(table, "geozone::a")
    assert next_value(table, "geozone::b") == 1


def test_next_key_refuses_schemas_without_counter_sort_keys(table):
    with pytest.raises(KeyConventionError, match="counter"):
        next_key(table, "productDate", {"collectionId": "c", "activityType": "a", "activityId": "1"})


def test_counter_item_is_outside_the_data_partition_and_the_indexable_prefixes(table):
    pk, sk = next_key(table, "geozone", {"collectionId": "bcparks_1"})
    create_item(table, {"pk": pk, "sk": sk, "name": "zone"})
    items = table.query(KeyConditionExpression=Key("pk").eq(pk))["Items"]
    assert [i["sk"] for i in items] == [sk]
    counter_pk = counter_key(pk)["pk"]
    assert not any(counter_pk.startswith(s.pk_prefix) for s in indexable_schemas())


def test_concurrent_creations_get_distinct_gapless_sort_keys(table, monkeypatch):
    # DynamoDB applies each UpdateItem atomically; moto handles one without a lock (it reads the item, updates it and
    # renders the answer in separate steps), so under load two threads could get one counter value. A lock per
    # request makes the double as atomic as the service; the code under test is unchanged.
    lock = threading.Lock()
    update_item = DynamoHandler.update_item

    def atomic_update_item(self):
        with lock:
            return update_item(self)

    monkeypatch.setattr(DynamoHandler, "update_item", atomic_update_item)

    def create_many(worker: int) -> list[str]:
        # boto3 resources are not thread-safe: each worker gets its own session.
        region = table.meta.client.meta.region_name
        own_table = boto3.Session().resource("dynamodb", region_name=region).Table(table.name)
        sks = []
        for n in range(10):
            pk, sk = next_key(own_table, "geozone", {"collectionId": "bcparks_1"})
            create_item(own_table, {"pk": pk, "sk": sk, "worker": worker, "n": n})
            sks.append(sk)
        return sks

    with ThreadPoolExecutor(max_workers=8) as pool:
        allocated = [sk for sks in pool.map(create_many, range(8)) for sk in sks]

    stored = table.query(KeyConditionExpression=Key("pk").eq("geozone::bcparks_1"))["Items"]
    expected = [str(n).zfill(10) for n in range(1, 81)]
    assert sorted(allocated) == expected
    assert [i["sk"] for i in stored] == expected
