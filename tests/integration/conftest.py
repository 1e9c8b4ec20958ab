"""Shared fixtures for real-component tests: one lab Slurm cluster and one PostgreSQL server
per test session."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from tests.integration.pg_server import PostgresUnavailable, postgres_server

from trainmedic.lab import SlurmCluster, SlurmLabUnavailable


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """4 nodes (node1..node4, 2 CPUs each), cred_expire=10: a requeued job restarts in ~11 s."""
    yield from _started(SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes=4, cred_expire=10))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server (tests.integration.pg_server); the URL of its
    ``postgres`` database."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_server())
        except PostgresUnavailable as err:
            pytest.skip(str(err))
        yield url


FRAMEWORK_NODES = 16
"""The framework tests run their jobs at once (2 nodes each, a spare for every exclusion)."""


@pytest.fixture(scope="session")
def framework_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """16 nodes (fw1..fw16, 2 CPUs each: one job per node), cred_expire=10, for the real
    framework workloads (test_frameworks_e2e.py), which run all their jobs concurrently."""
    yield from _started(
        SlurmCluster(
            tmp_path_factory.mktemp("slurm-fw"),
            nodes=FRAMEWORK_NODES,
            cred_expire=10,
            node_prefix="fw",
        )
    )


def _started(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster started for the session and stopped after it (skipped where this machine
    cannot run the lab, which scripts/test.sh sets up)."""
    try:
        cluster.start()
    except SlurmLabUnavailable as err:
        pytest.skip(str(err))
    try:
        yield cluster
    finally:
        cluster.stop()
