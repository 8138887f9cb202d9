"""The loopback server's search: the query DSL, relevance, sorting and paging it emulates, and the 400 it answers
for what it does not (tests/support/opensearch_query.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from tests.support.opensearch_errors import OpenSearchError
from tests.support.opensearch_query import IndexView, Visible, analyze, date_millis, search
from tests.support.shapes import square

TEXT = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 8}}}
MAPPINGS = {
    "properties": {
        "name": TEXT,
        "code": {"type": "keyword"},
        "size": {"type": "double"},
        "day": {"type": "date"},
        "open": {"type": "boolean"},
        "shape": {"type": "geo_shape"},
        "spot": {"type": "geo_point"},
    }
}


def hits(documents: Mapping[str, Mapping[str, Any]], body: Mapping[str, Any]) -> list[str]:
    return [hit["_id"] for hit in answer(documents, body)["hits"]["hits"]]


def answer(
    documents: Mapping[str, Mapping[str, Any]], body: Mapping[str, Any], **options: Any
) -> dict[str, Any]:
    seq_nos = {doc_id: n for n, doc_id in enumerate(documents)}
    view = Visible(IndexView("i", MAPPINGS, documents), (), None, lambda source: source, seq_nos)
    return search([view], body, **options)


def refusal(documents: Mapping[str, Mapping[str, Any]], body: Mapping[str, Any]) -> OpenSearchError:
    with pytest.raises(OpenSearchError) as refused:
        answer(documents, body)
    assert refused.value.status == 400
    return refused.value


# --- text ---------------------------------------------------------------------------------------------------


def test_the_standard_analyzer_splits_words_and_lower_cases() -> None:
    assert analyze("Lake-Shore's U.S.A. 3.14 foo_bar, ÉTÉ") == [
        "lake",
        "shore's",
        "u.s.a",
        "3.14",
        "foo_bar",
        "été",
    ]


def test_match_is_analyzed_and_term_is_not() -> None:
    docs = {"1": {"name": "Lake Shore", "code": "Lake"}}

    assert hits(docs, {"query": {"match": {"name": "LAKE"}}}) == ["1"]
    assert hits(docs, {"query": {"term": {"name": "Lake"}}}) == []  # the indexed token is "lake"
    assert hits(docs, {"query": {"term": {"name": "lake"}}}) == ["1"]
    assert hits(docs, {"query": {"term": {"code": "lake"}}}) == []  # keywords are exact
    assert hits(docs, {"query": {"match": {"code": "Lake"}}}) == ["1"]


def test_a_keyword_longer_than_ignore_above_is_not_indexed() -> None:
    docs = {"short": {"name": "Lake"}, "long": {"name": "Lake Shore Park"}}

    assert hits(docs, {"query": {"term": {"name.keyword": "Lake Shore Park"}}}) == []
    assert hits(docs, {"query": {"match": {"name": "park"}}}) == ["long"]


def test_operator_and_needs_every_word_and_a_query_without_words_matches_nothing() -> None:
    docs = {"1": {"name": "lake shore"}, "2": {"name": "lake"}}

    assert hits(docs, {"query": {"match": {"name": {"query": "lake shore", "operator": "and"}}}}) == ["1"]
    assert sorted(hits(docs, {"query": {"match": {"name": "lake shore"}}})) == ["1", "2"]
    assert hits(docs, {"query": {"match": {"name": "--"}}}) == []


def test_bm25_scores_follow_lucenes_formula() -> None:
    docs = {"1": {"name": "a b"}, "2": {"name": "a"}, "3": {"name": "c c c"}}

    scores = {
        hit["_id"]: hit["_score"] for hit in answer(docs, {"query": {"match": {"name": "a"}}})["hits"]["hits"]
    }

    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # 3 documents, 2 hold "a"
    average = (2 + 1 + 3) / 3
    assert scores["1"] == pytest.approx(idf / (1 + 1.2 * (0.25 + 0.75 * 2 / average)))
    assert scores["2"] == pytest.approx(idf / (1 + 1.2 * (0.25 + 0.75 * 1 / average)))
    assert list(scores) == ["2", "1"]  # most relevant first


def test_multi_match_best_fields_takes_the_best_field_and_boosts_multiply() -> None:
    docs = {"1": {"name": "lake", "code": "lake"}}
    name_only = answer(docs, {"query": {"match": {"name": "lake"}}})["hits"]["max_score"]

    best = answer(docs, {"query": {"multi_match": {"query": "lake", "fields": ["name^2", "code"]}}})
    most = answer(
        docs, {"query": {"multi_match": {"query": "lake", "fields": ["name"], "type": "most_fields"}}}
    )

    keyword = math.log(1 + 0.5 / 1.5) / (1 + 1.2)  # the keyword field: no norms
    assert best["hits"]["max_score"] == pytest.approx(max(2 * name_only, keyword))
    assert most["hits"]["max_score"] == pytest.approx(name_only)


# --- term-level and bool ----------------------------------------------------------------------------------


def test_bool_clauses_combine_as_the_engine_combines_them() -> None:
    docs = {"1": {"code": "a", "open": True}, "2": {"code": "b", "open": False}, "3": {"code": "c"}}

    assert hits(docs, {"query": {"bool": {"must_not": [{"term": {"open": True}}]}}}) == ["2", "3"]
    assert hits(
        docs, {"query": {"bool": {"should": [{"term": {"code": "a"}}, {"term": {"code": "b"}}]}}}
    ) == [
        "1",
        "2",
    ]
    two_of = {"should": [{"term": {"code": "a"}}, {"term": {"open": True}}], "minimum_should_match": 2}
    assert hits(docs, {"query": {"bool": two_of}}) == ["1"]
    assert hits(docs, {"query": {"bool": {}}}) == ["1", "2", "3"]
    filtered = answer(docs, {"query": {"bool": {"filter": [{"exists": {"field": "open"}}]}}})
    assert [hit["_score"] for hit in filtered["hits"]["hits"]] == [0.0, 0.0]


def test_terms_exists_prefix_and_a_field_nobody_mapped() -> None:
    docs = {"1": {"code": "ab-1"}, "2": {"code": "ab-2"}, "3": {"code": "c"}, "4": {}}

    assert hits(docs, {"query": {"terms": {"code": ["c", "ab-1"]}}}) == ["1", "3"]
    assert hits(docs, {"query": {"prefix": {"code": "ab-"}}}) == ["1", "2"]
    assert hits(docs, {"query": {"exists": {"field": "code"}}}) == ["1", "2", "3"]
    assert hits(docs, {"query": {"term": {"colour": "red"}}}) == []


def test_date_bounds_missing_components_round_like_the_engine() -> None:
    docs = {
        "start": {"day": "2025-12-31T00:00:00Z"},
        "late": {"day": "2025-12-31T23:59:59.999Z"},
        "next": {"day": "2026-01-01"},
        "millis": {"day": date_millis("2025-12-31T12:00:00+02:00")},
    }

    def days(bounds: dict[str, Any]) -> list[str]:
        return hits(docs, {"query": {"range": {"day": bounds}}})

    assert days({"gte": "2025-12-31", "lte": "2025-12-31"}) == ["start", "late", "millis"]
    assert days({"gt": "2025-12-31"}) == ["next"]  # gt rounds up to the day's last millisecond
    assert days({"lt": "2025-12-31"}) == []
    assert days({"gte": "2025-12-31T10:00:00Z", "lt": "2025-12-31T11:00:00Z"}) == [
        "millis"
    ]  # 12:00 at +02:00


def test_ranges_on_numbers_and_on_strings() -> None:
    docs = {"1": {"size": 5, "code": "b"}, "2": {"size": 10.5, "code": "d"}}

    assert hits(docs, {"query": {"range": {"size": {"gt": 5, "lte": 10.5}}}}) == ["2"]
    assert hits(docs, {"query": {"range": {"code": {"gte": "a", "lt": "c"}}}}) == ["1"]


# --- geo ----------------------------------------------------------------------------------------------------


def test_shape_relations_count_boundaries_as_inside() -> None:
    docs = {
        "square": {"shape": square(0, 0, 1)},
        "edge": {"shape": {"type": "Point", "coordinates": [1, 0.5]}},
        "line": {"shape": {"type": "LineString", "coordinates": [[2, 2], [3, 3]]}},
    }
    same = square(0, 0, 1)

    def related(relation: str, shape: dict[str, Any]) -> list[str]:
        return hits(docs, {"query": {"geo_shape": {"shape": {"shape": shape, "relation": relation}}}})

    assert related("intersects", same) == ["square", "edge"]
    assert related("within", same) == ["square", "edge"]
    assert related("contains", {"type": "point", "coordinates": [1, 0.5]}) == ["square", "edge"]
    assert related("disjoint", same) == ["line"]
    envelope = {"type": "envelope", "coordinates": [[1.5, 4], [4, 1.5]]}
    assert related("within", envelope) == ["line"]


def test_bounding_boxes_may_cross_the_dateline_and_distances_are_arcs() -> None:
    docs = {
        "east": {"spot": {"lat": 0, "lon": 179.5}},
        "west": {"spot": [-179.5, 0]},
        "far": {"spot": "0,90"},
    }
    box = {"top_left": {"lat": 1, "lon": 179}, "bottom_right": {"lat": -1, "lon": -179}}

    assert hits(docs, {"query": {"geo_bounding_box": {"spot": box}}}) == ["east", "west"]
    # 1° of arc on the engine's sphere (mean radius 6,371,008.7714 m) is 111,195 m.
    near = {"geo_distance": {"distance": "111.2km", "spot": {"lat": 0, "lon": 179.5}}}
    assert hits(docs, {"query": near}) == ["east", "west"]
    assert hits(docs, {"query": {"geo_distance": {"distance": "111190m", "spot": [179.5, 0]}}}) == ["east"]


def test_sorting_by_distance_gives_the_distance_in_the_unit() -> None:
    docs = {"one": {"spot": {"lat": 0, "lon": 1}}, "two": {"spot": {"lat": 0, "lon": 2}}}
    sort = [{"_geo_distance": {"spot": {"lat": 0, "lon": 0}, "order": "desc", "unit": "km"}}]

    found = answer(docs, {"sort": sort})["hits"]["hits"]

    assert [hit["_id"] for hit in found] == ["two", "one"]
    assert [hit["sort"][0] for hit in found] == pytest.approx([222.39, 111.19], abs=0.01)


# --- sort and paging --------------------------------------------------------------------------------------


def test_missing_values_sort_last_either_way_unless_asked_first() -> None:
    docs = {"none": {}, "low": {"size": [1, 9]}, "mid": {"size": 5}}

    assert hits(docs, {"sort": [{"size": "asc"}]}) == ["low", "mid", "none"]
    assert hits(docs, {"sort": [{"size": "desc"}]}) == ["low", "mid", "none"]  # desc takes the max: 9
    assert hits(docs, {"sort": [{"size": {"order": "asc", "missing": "_first"}}]}) == ["none", "low", "mid"]


def test_search_after_counts_every_match_but_returns_those_after() -> None:
    docs = {str(n): {"code": f"c{n}", "day": f"2025-01-0{n}"} for n in range(1, 6)}

    page = answer(docs, {"size": 2, "sort": [{"day": "asc"}], "search_after": [date_millis("2025-01-02")]})

    assert [hit["_id"] for hit in page["hits"]["hits"]] == ["3", "4"]
    assert page["hits"]["hits"][0]["sort"] == [date_millis("2025-01-03")]  # dates sort as epoch milliseconds
    assert page["hits"]["total"] == {"value": 5, "relation": "eq"}
    assert page["hits"]["hits"][0]["_score"] is None


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        ({"sort": ["name"]}, "search_phase_execution_exception", "Text fields are not optimised"),
        ({"sort": ["colour"]}, "search_phase_execution_exception", "No mapping found for [colour]"),
        (
            {"sort": ["code"], "search_after": ["a", "b"]},
            "search_phase_execution_exception",
            "has 2 value(s)",
        ),
        (
            {"sort": ["code"], "search_after": ["a"], "from": 1},
            "action_request_validation_exception",
            "`from`",
        ),
        ({"query": {"match_phrase": {"name": "a"}}}, "parsing_exception", "unknown query [match_phrase]"),
        ({"query": {"match": {"name": {"query": "a", "fuzziness": 1}}}}, "parsing_exception", "not emulated"),
        ({"query": {"range": {"day": {"gte": "now-1d"}}}}, "parsing_exception", "date math"),
        ({"aggs": {}}, "parsing_exception", "not emulated"),
        ({"query": {"geo_shape": {"shape": {"shape": {"type": "circle"}}}}}, "parsing_exception", "circle"),
        (
            {
                "query": {
                    "geo_shape": {
                        "shape": {"shape": {"type": "LineString", "coordinates": [[-170, 0], [170, 0]]}}
                    }
                }
            },
            "parsing_exception",
            "180 degrees",
        ),
        (
            {"query": {"geo_shape": {"spot": {"shape": {"type": "point", "coordinates": [0, 0]}}}}},
            "parsing_exception",
            "on a geo_point field",
        ),
        ({"query": {"geo_distance": {"distance": "1 league", "spot": [0, 0]}}}, "parsing_exception", "units"),
        ({"query": {"exists": {}}}, "parsing_exception", "failed to parse"),
        (
            {"query": {"geo_distance": {"distance": 1, "code": [0, 0]}}},
            "search_phase_execution_exception",
            "unsupported type [keyword]",
        ),
        ({"query": {"range": {"day": {"gte": "31/12/2025"}}}}, "parsing_exception", "failed to parse"),
    ],
)
def test_what_the_engine_refuses_or_the_server_does_not_emulate_is_a_400(
    body: dict[str, Any], error_type: str, reason: str
) -> None:
    error = refusal({"1": {"code": "a"}}, body)

    assert error.error_type == error_type
    assert reason in error.reason or (error.cause is not None and reason in error.cause.reason)


def test_total_hits_are_tracked_as_asked() -> None:
    docs = {str(n): {"code": "a"} for n in range(3)}

    assert answer(docs, {"size": 1})["hits"]["total"] == {"value": 3, "relation": "eq"}
    assert answer(docs, {"track_total_hits": 2})["hits"]["total"] == {"value": 2, "relation": "gte"}
    assert answer(docs, {"track_total_hits": True})["hits"]["total"] == {"value": 3, "relation": "eq"}
    assert "total" not in answer(docs, {"track_total_hits": False})["hits"]


def test_count_takes_only_a_query() -> None:
    docs = {"1": {"code": "a"}, "2": {"code": "b"}}

    assert answer(docs, {"query": {"term": {"code": "a"}}}, count_only=True)["count"] == 1
    with pytest.raises(OpenSearchError, match=r"request does not support \[size\]"):
        answer(docs, {"size": 1}, count_only=True)
