"""Downtime and goodput accounting (pure): where each job's wall time went, what each
interruption cost and why, each node's record, the cluster's badput by cause, and the
monitor-mode scorecard. Inputs are ``facts`` (what was observed); ``None`` in any figure
means "not measured", never 0. Goodput itself is ``trainmedic.core.goodput``."""

from __future__ import annotations

from trainmedic.core.accounting.cluster import (
    ClusterSummary,
    JobLine,
    WindowFigures,
    cluster_summary,
)
from trainmedic.core.accounting.facts import (
    AdviceFacts,
    AttemptFacts,
    CheckpointFacts,
    FeedbackFacts,
    IncidentFacts,
    JobFacts,
    NodeEventFacts,
)
from trainmedic.core.accounting.interruptions import UNATTRIBUTED, Interruption, Part
from trainmedic.core.accounting.job import (
    CAUSES,
    AttemptAccount,
    JobAccounting,
    Segment,
    account_job,
)
from trainmedic.core.accounting.nodes import NodeAccount, account_node, account_nodes
from trainmedic.core.accounting.scorecard import Agreement, Scorecard, scorecard

__all__ = [
    "CAUSES",
    "UNATTRIBUTED",
    "AdviceFacts",
    "Agreement",
    "AttemptAccount",
    "AttemptFacts",
    "CheckpointFacts",
    "ClusterSummary",
    "FeedbackFacts",
    "IncidentFacts",
    "Interruption",
    "JobAccounting",
    "JobFacts",
    "JobLine",
    "NodeAccount",
    "NodeEventFacts",
    "Part",
    "Scorecard",
    "Segment",
    "WindowFigures",
    "account_job",
    "account_node",
    "account_nodes",
    "cluster_summary",
    "scorecard",
]
