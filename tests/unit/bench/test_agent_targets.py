"""``make bench``'s issue-22 targets: Responses and Messages streaming against chat streaming on
one deployment, in rounds, judged on the median round (hand-made phase results), and the plan's
order of those rounds."""
from __future__ import annotations

import argparse
from typing import Any

from bench import plan, report, report_agents

SETTINGS = {"kind": "greenfront", "workers": 1, "offload": True, "backend": "fastokens"}


def _phase(scenario: str, round_: int, tokens_per_s: float, server_cpu_s: float = 16.0
           ) -> dict[str, Any]:
    return {"endpoint": f"gf agent APIs #{round_}", "scenario": scenario, "round": round_,
            "settings": dict(SETTINGS, paired=False),
            "load": {"tokens_per_s": tokens_per_s, "tokens_per_event": 1.1, "completed": 100,
                     "ended_before_limit": 0, "errors": 0, "tokens_counted_share": 0.9,
                     "ttft_ms": {"p50": 800.0, "p99": 1500.0},
                     "itl_stream_mean_ms": {"mean": 25.0}, "itl_gap_ms": {"p99": 90.0}},
            "health": {"errors": 0, "latency_ms": {"p99.9": 60.0}},
            "cpu_s": {"server": server_cpu_s, "window_s": 20.0},
            "timing": {"stream_concurrency": 1024}, "sim": {"ttft_ms": 50.0, "itl_ms": 20.0}}


def _judged(phases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    report_agents.agent_targets({"phases": phases}, lambda name, goal, measured, met: rows.update(
        {name.split(" ")[0]: {"measured": measured, "met": met}}))
    return rows


def _rounds(chat: list[float], responses: list[float], messages: list[float]) -> list[dict]:
    phases = []
    for i, (r, m) in enumerate(zip(responses, messages), start=1):
        phases += [_phase("stream-chat", i, chat[i - 1]), _phase("stream-responses", i, r),
                   _phase("stream-messages", i, m)]
    return phases + [_phase("stream-chat", len(responses) + 1, chat[-1])]


def test_each_phase_is_judged_against_the_chat_phases_around_it_and_the_median_wins():
    # Chat drifts 40k -> 30k; each phase is compared with the mean of the chat phases of its
    # round and the next (38k, 35k, 32k), and round 3's Responses outlier (15k: the machine
    # stalled) does not decide the median.
    phases = _rounds([40_000, 36_000, 34_000, 30_000], [37_000, 34_000, 15_000],
                     [38_000, 28_000, 27_000])
    rows = _judged(phases)
    assert rows["Responses"]["met"] is True
    assert rows["Responses"]["measured"].startswith(
        "median of 3 rounds (each against the chat phases before and after it): 97.1%; "
        "rounds 97.4%, 97.1%, 46.9%")
    assert rows["Messages"]["met"] is False  # 100%, 80%, 84.4%
    assert rows["Messages"]["measured"].startswith("median of 3 rounds")
    assert rows["Messages"]["measured"].endswith("missed by 5.6%")


def test_server_cpu_per_token_is_given_beside_the_ratio():
    phases = [_phase("stream-chat", 1, 40_000, 16.0), _phase("stream-responses", 1, 40_000, 20.0),
              _phase("stream-chat", 2, 40_000, 16.0)]
    rows = _judged(phases)
    assert rows["Responses"]["measured"] == "100.0%; server CPU per 1k tokens 1.25× chat's"
    assert rows["Responses"]["met"] is True and "Messages" not in rows


def test_without_chat_phases_nothing_is_judged_and_no_table_is_drawn():
    phases = [_phase("stream-responses", 1, 40_000)]
    assert _judged(phases) == {}
    assert report_agents.agent_tables({"phases": phases}) == []


def test_the_report_has_the_targets_and_the_side_by_side_table():
    results = {"phases": _rounds([40_000, 40_000], [36_500], [35_000])}
    rows = {t["target"].split(" ")[0]: t for t in report.targets(results)}
    assert rows["Responses"]["met"] is True and rows["Messages"]["met"] is False
    table = "\n".join(report_agents.agent_tables(results))
    assert "| Responses | 36.5k | 91.2% | 800 ms | 60.0 ms | 1.00× |" in table
    assert "| Messages | 35.0k | 87.5% |" in table


def test_the_plan_runs_chat_first_in_every_round_alternates_the_others_and_closes_with_chat():
    args = argparse.Namespace(scenarios=["stream-messages", "stream-responses"],
                              backends=["fastokens"], workers=[1], offload=[True], mode="full",
                              tools_rounds=7, agent_rounds=3)
    (step,) = plan.matrix(args, lambda b, o, w, scen, agents=False: plan.Step(
        f"gf{' agent APIs' if agents else ''}", scen, None), 1)
    assert step.label == "gf agent APIs" and step.phases == 10
    order = [(r, s.removeprefix("stream-")) for r, _, s in plan.schedule(step, "ep", None)]
    assert order == [(1, "chat"), (1, "responses"), (1, "messages"),
                     (2, "chat"), (2, "messages"), (2, "responses"),
                     (3, "chat"), (3, "responses"), (3, "messages"), (4, "chat")]
