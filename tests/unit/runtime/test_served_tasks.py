"""runtime.served_tasks: the routes vLLM 0.32 registers for an engine's tasks."""
from __future__ import annotations

from runtime.served_tasks import (GENERATION_ROUTES, POOLING_ROUTES, SCORING_ROUTES, num_labels,
                                  served_tasks)

RERANKER = {"method": "from_2_way_softmax", "classifier_from_token": ["no", "yes"]}


def test_a_generate_engine_serves_no_pooling_route():
    served = served_tasks(["generate"], {})
    assert served.routes == GENERATION_ROUTES and served.pooling_task is None
    assert all(served.refuses(path) for path in POOLING_ROUTES)
    assert not served.refuses("/v1/completions") and not served.refuses("/tokenize")


def test_an_embedding_engine_serves_embeddings_pooling_and_bi_encoder_scoring():
    served = served_tasks(["token_embed", "embed"], {})
    assert served.routes == {"/v1/embeddings", "/v2/embed", "/pooling"} | SCORING_ROUTES
    assert served.pooling_task == "embed" and served.score_type == "bi-encoder"
    assert all(served.refuses(path) for path in GENERATION_ROUTES)
    assert served.refuses("/classify")
    assert served.refuses("/v1/responses/resp_1/cancel") and served.refuses("/v1/messages")
    assert not served_tasks(["generate"], {}).refuses("/v1/responses/resp_1")


def test_a_classifier_scores_only_with_one_label():
    reranker = served_tasks(["classify", "token_classify"], RERANKER)
    assert reranker.routes == {"/classify", "/pooling"} | SCORING_ROUTES
    assert reranker.score_type == "cross-encoder"
    two_labels = served_tasks(["classify", "token_classify"], {})
    assert two_labels.routes == {"/classify", "/pooling"} and two_labels.score_type is None


def test_label_counts_as_vllm_derives_them():
    assert num_labels(RERANKER) == 1
    assert num_labels({"classifier_from_token": ["a", "b", "c"]}) == 3
    assert num_labels({"num_labels": 5}) == 5
    assert num_labels({"id2label": {"0": "x"}}) == 1
    assert num_labels({}) == 2
