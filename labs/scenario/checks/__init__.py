"""Reusable symptom and cure checks, by what they look at. Every margin is a multiple of the
workload's token interval (see `base`), never a tight absolute number.

    from labs.scenario import checks
    symptom_checks=(checks.held_to_end(), checks.content_encoded("gzip"))
"""
from __future__ import annotations

from labs.findings.buffering import HELD_SLACK_INTERVALS
from labs.scenario.checks.base import (ARRIVAL_SLACK_INTERVALS, STREAM_SLACK_INTERVALS, STREAMED_READ_SHARE,
                                       threshold)
from labs.scenario.checks.agent import (agent_exited, agent_requests, agent_retried, cut_in_the_silence,
                                        sat_through_the_silence)
from labs.scenario.checks.layers import (close_delimited, framed_as, heartbeats_dropped, hop_said,
                                         resplit, server_sent_heartbeats)
from labs.scenario.checks.cache import every_stream_live, replayed_from_cache, server_requests
from labs.scenario.checks.judged import finding, no_finding
from labs.scenario.checks.many import (gap_p99_at_most, stayers_ttft_at_least, stayers_ttft_within,
                              ttft_max_at_least, ttft_p99_within, ttft_spread_at_least)
from labs.scenario.checks.outcome import (client_error_names, complete_with_done, data_bytes_per_event_at_least,
                                 error_reported, failed_share_at_least, failure_on_time, finish_reason_is,
                                 open_after_failure, outcome_is,
                                 outcome_not_only, status_is, status_seen, statuses_are,
                                 unseen_by_server)
from labs.scenario.checks.proxy import culprit_hop, logged_count_matches_usage, proxy_stat_at_least, waf_rule_logged
from labs.scenario.checks.server import (release_at_least, release_within, server_metric_at_least,
                                server_metric_at_most, slot_held_at_least, slot_held_at_most,
                                tokens_for_nobody_at_least, tokens_for_nobody_at_most,
                                writes_per_token_at_least, writes_per_token_at_most)
from labs.scenario.checks.stream import (coalesced, content_encoded, content_events_at_most, headers_at_least,
                                headers_prompt, heartbeats_at_least, held_to_end, hop_delay_at_least,
                                hop_delay_at_most, http_version_is, socket_reads_spread, streamed,
                                ttft_late)
from labs.scenario.checks.stress import (STRESS_MARGIN_INTERVALS, cut_after_silence, cut_at_deadline, departed,
                                first_token_after, outlived, reloaded_mid_stream, sent_together_at_least,
                                server_heard_departures, server_peak_at_least, silence_outlasted)
from labs.scenario.checks.text import (no_stop_leak, replacement_chars_at_least, resume_joins, stop_leaked,
                              text_cut_short, text_is_script)

__all__ = [
    "agent_exited",
    "agent_requests",
    "agent_retried",
    "cut_in_the_silence",
    "sat_through_the_silence",
    "ARRIVAL_SLACK_INTERVALS",
    "close_delimited",
    "framed_as",
    "heartbeats_dropped",
    "hop_said",
    "resplit",
    "server_sent_heartbeats",
    "HELD_SLACK_INTERVALS",
    "STREAMED_READ_SHARE",
    "STREAM_SLACK_INTERVALS",
    "STRESS_MARGIN_INTERVALS",
    "coalesced",
    "client_error_names",
    "complete_with_done",
    "data_bytes_per_event_at_least",
    "content_encoded",
    "content_events_at_most",
    "culprit_hop",
    "cut_after_silence",
    "cut_at_deadline",
    "departed",
    "error_reported",
    "failure_on_time",
    "open_after_failure",
    "every_stream_live",
    "failed_share_at_least",
    "finding",
    "finish_reason_is",
    "gap_p99_at_most",
    "heartbeats_at_least",
    "held_to_end",
    "hop_delay_at_least",
    "hop_delay_at_most",
    "no_finding",
    "no_stop_leak",
    "outcome_is",
    "outcome_not_only",
    "outlived",
    "logged_count_matches_usage",
    "proxy_stat_at_least",
    "waf_rule_logged",
    "release_at_least",
    "release_within",
    "reloaded_mid_stream",
    "replacement_chars_at_least",
    "replayed_from_cache",
    "resume_joins",
    "sent_together_at_least",
    "server_heard_departures",
    "server_metric_at_least",
    "server_metric_at_most",
    "server_peak_at_least",
    "server_requests",
    "silence_outlasted",
    "slot_held_at_least",
    "slot_held_at_most",
    "socket_reads_spread",
    "status_is",
    "status_seen",
    "stayers_ttft_at_least",
    "stayers_ttft_within",
    "stop_leaked",
    "streamed",
    "text_cut_short",
    "text_is_script",
    "threshold",
    "tokens_for_nobody_at_least",
    "tokens_for_nobody_at_most",
    "ttft_late",
    "ttft_max_at_least",
    "ttft_p99_within",
    "ttft_spread_at_least",
    "writes_per_token_at_least",
    "writes_per_token_at_most",
    "headers_at_least",
    "headers_prompt",
    "http_version_is",
    "first_token_after",
]
