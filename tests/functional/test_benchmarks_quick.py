"""The benchmarks that need the local site (sshd, ansible-playbook,
HAProxy, keepalived on loopback or in namespaces they create) run in
quick mode here: each exits 0 and prints its figures, none is checked
(issue 38 item 3; tests/unit/test_benchmarks_quick.py runs the others
and checks that every benchmark names its lane).  Addresses: those of
each benchmark in quick mode (127.0.0.2; haproxy_reload.py 127.0.0.11,
127.0.0.21 to 127.0.0.24; lifecycle.py and paired_scaling.py 127.0.2.x,
127.0.3.x, 127.0.20.x and 127.0.21.x; fleet.py 127.0.74.x; slot_turns.py
127.0.82.1; conductor_memory.py 127.0.83.1; TEST-NET-1 in
gateway_failover's namespaces): tools/lanes.py reads them here.
"""

import pytest
from mgmt_localsite import gateways

from tests import benchmarks_quick as quick

#: Why a benchmark cannot run on this machine (None: it can).
_UNAVAILABLE = {'gateway_failover.py': gateways.available}


@pytest.mark.parametrize('name', quick.in_lane('functional'))
def test_quick_mode_runs_and_prints_figures(name):
    reason = _UNAVAILABLE.get(name, lambda: None)()
    if reason:
        pytest.skip(reason)
    quick.run_quick(name, timeout=600)
