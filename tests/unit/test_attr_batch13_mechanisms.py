"""Mechanisms batch13 taught, each tested on lines in other shapes than the batch's, and on
healthy lines of the same kind, which must stay as they were.

A remote data service that answered a download with a server-side 5xx, or cut the transfer,
is the store's failure (the node reached it); the scheduler's own start estimate a day or more
out is the queue's policy holding the job; an internal check failing inside a communication
library's own source is the software stack's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category

FAILURES: dict[str, tuple[str, Category]] = {
    "requests_502_from_a_dataset_server": (
        "Traceback (most recent call last):\n"
        "requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: "
        "https://data.example.org/shards/train-00017.parquet\n",
        Category.STORAGE,
    ),
    "urllib_503_while_fetching_weights": (
        "urllib.error.HTTPError: HTTP Error 503: Service Unavailable\n",
        Category.STORAGE,
    ),
    "http_client_remote_disconnected": (
        '  File "/usr/lib/python3.10/http/client.py", line 287, in _read_status\n'
        "http.client.RemoteDisconnected: Remote end closed connection without response\n",
        Category.STORAGE,
    ),
    "chunked_transfer_cut": (
        "requests.exceptions.ChunkedEncodingError: ('Connection broken: IncompleteRead(0 bytes "
        "read, 512 more expected)', IncompleteRead(0 bytes read, 512 more expected))\n",
        Category.STORAGE,
    ),
    "start_estimate_in_days": (
        "$ showstart 4411\njob 4411 requires 8 procs for 2:00:00:00\n"
        "Estimated start in 4:01:00:00 on Thu Jan  8 09:00:00\n",
        Category.SCHEDULER,
    ),
    "start_estimate_in_words": (
        "queue notice: Estimated start time is in 3 days (fairshare)\n",
        Category.SCHEDULER,
    ),
    "rccl_assertion_in_its_source": (
        "python: /src/rccl/src/transport/p2p.cc:301: p2pSetup: Assertion `peer >= 0' failed.\n"
        "Aborted (core dumped)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "hcl_condition_failed": (
        "/opt/habana/hcl/src/platform/gen2/hcl_box.cpp::44(init): The condition [ nics > 0 ] "
        "failed. No scale-out ports\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mechanism_names_its_category(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.category is category, (name, verdict)


HEALTHY: dict[str, str] = {
    "hub_download_ok": "INFO: GET https://huggingface.co/api/datasets/org/corpus 200 OK\n",
    "start_estimate_in_hours": (
        "$ showstart 4412\nEstimated Rsv based start in                03:12:05 on Mon Sep 15\n"
        "Estimated start in 0:04:10:00 on Fri Mar  7 10:00:00\n"
    ),
    "nccl_info_with_source_path": (
        "/opt/nccl/src/init.cc:88 NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_lines_stay_healthy(tmp_path: Path, name: str) -> None:
    assert not _verdict(tmp_path, HEALTHY[name]).failure, name


def test_client_side_unreachable_hub_stays_the_nodes_egress(tmp_path: Path) -> None:
    """No egress (DNS, connect refused) is the node's environment, not the remote store."""
    verdict = _verdict(
        tmp_path,
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded with url: /api/models/org/model (Caused by "
        "NewConnectionError('[Errno -3] Temporary failure in name resolution'))\n",
    )
    assert verdict.category is Category.SYSTEM_SOFTWARE
