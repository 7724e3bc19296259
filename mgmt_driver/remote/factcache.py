"""Ansible's fact cache on the Ansible server: facts only where needed.

kubespray's ``--limit`` runs (``scale.yml``, ``cluster.yml
--limit=etcd,kube_control_plane``) read the facts of every host they
leave out from Ansible's fact cache.  kubespray's ``ansible.cfg`` sets
it up as ``fact_caching = jsonfile`` in ``fact_caching_connection``
(``/tmp``: one directory for every inventory on the server, keyed by
host name) with ``fact_caching_timeout`` (7200 s up to v2.19, 86400 s
since v2.20); v2.27+ stops such a run when a ``k8s_cluster`` host left
out has no valid entry.  The driver gives each workspace a jsonfile
cache of its own (:mod:`mgmt_driver.remote.isolation`: clusters on private
networks share node names, and another cluster's entries must not count
as this one's).  Instead of ``facts.yml`` over every host before each
limited run, :func:`refresh_facts`:

1. checks the workspace's cache in one remote command
   (:data:`PROBE`: the checkout's timeout, the server's clock
   and the age of each host's entry, the file's mtime, which is what
   Ansible's jsonfile plugin goes by);
2. runs the facts playbook limited to the hosts whose entry is missing
   or expires within a margin (every host, unlimited, when the cache
   cannot be read with certainty: ``ANSIBLE_CONFIG``, or a cache
   timeout or prefix in the server's environment);
3. when that run finds hosts unreachable (kubespray's bootstrap play is
   ``any_errors_fatal``: one such host stops it for all), keeps the
   entries of those that are still valid, refreshes the others again,
   and fails with :class:`~mgmt_driver.common.exceptions.FactsUnavailable`
   naming the unreachable hosts that have no valid entry at all.

Everything read from the server is parsed line by line with bounded
fields; a line that does not parse is ignored (the host then counts as
uncached, so the worst a hostile server achieves is a facts run).
"""

import dataclasses
import re

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.remote import isolation
from mgmt_driver.remote import programs

LOG = safetext.logger(__name__)

#: The program that reads the cache's state (scripts/fact-cache-probe.sh):
#: ``ROOT CACHE_DIR HOST...``, one ``FC:<KIND>:<value>`` line a finding.
PROBE = 'fact-cache-probe'

#: Ansible's default fact_caching_timeout when ansible.cfg sets none.
DEFAULT_TIMEOUT = 86400
_INT = re.compile(r'^\d{1,12}$')
_MAX_LINES = 100000


@dataclasses.dataclass(frozen=True)
class CacheReport:
    """What :data:`PROBE` found.

    :param doubts: reasons the entries cannot be trusted (then every
        host counts as uncached).
    :param timeout: ``fact_caching_timeout`` (0: entries never expire).
    :param now: the server's clock (epoch seconds).
    :param entries: ``{host: mtime}`` of the entries found.
    """

    doubts: tuple = ()
    timeout: int = DEFAULT_TIMEOUT
    now: int = 0
    entries: dict = dataclasses.field(default_factory=dict)

    def remaining(self, host):
        """Seconds *host*'s entry stays valid; None if it has none, or
        the cache is in doubt."""
        if self.doubts or host not in self.entries:
            return None
        if self.timeout == 0:
            return float('inf')
        left = self.timeout - (self.now - self.entries[host])
        return left if left > 0 else None

    def stale(self, hosts, margin):
        """The *hosts* whose entry is missing or expires within
        *margin* seconds (all of them when in doubt)."""
        margin = min(margin, self.timeout // 2)
        return [h for h in hosts
                if (self.remaining(h) or 0) <= margin]


def parse_probe(stdout):
    """The :class:`CacheReport` of :data:`PROBE`'s output."""
    found = {'doubts': [], 'entries': {}}
    for line in stdout.splitlines()[:_MAX_LINES]:
        kind, _, value = line.partition(':')[2].partition(':')
        if not line.startswith('FC:'):
            continue
        _take(found, kind, value.strip())
    doubts = list(found['doubts'])
    if 'now' not in found:
        doubts.append('no clock reading')
    return CacheReport(doubts=tuple(doubts),
                       timeout=found.get('timeout', DEFAULT_TIMEOUT),
                       now=found.get('now', 0), entries=found['entries'])


def _take(found, kind, value):
    if kind == 'DOUBT':
        # Escaped and clipped here: doubts go to log lines and status.
        found['doubts'].append(safetext.clip(value, 40))
    elif kind in ('TIMEOUT', 'NOW') and _INT.match(value):
        found[kind.lower()] = int(value)
    elif kind == 'ENTRY':
        host, _, mtime = value.rpartition(':')
        if host and _INT.match(mtime):
            found['entries'][host] = int(mtime)


def probe(conn, kubespray_root, cache_dir, hosts):
    """Read the fact cache's state for *hosts*: one remote command.

    :param cache_dir: the workspace's cache (every run of the workspace
        uses it: :func:`mgmt_driver.remote.isolation.playbook_env`).
    :returns: a :class:`CacheReport`.
    """
    result = conn.run(programs.command(PROBE, kubespray_root, cache_dir,
                                       *hosts))
    report = parse_probe(result.stdout)
    if report.doubts:
        LOG.info('Fact cache on %s not trusted (%s): refreshing every '
                 'host', conn.host, safetext.clip_list(
                     report.doubts, count=5, width=40, separator='; '))
    return report


def refresh_facts(runner, hosts, margin):
    """Make sure every one of *hosts* has a valid fact cache entry.

    Call it before a ``--limit`` run with the hosts that run leaves out.

    :param runner: the :class:`~mgmt_driver.remote.kubespray.Runner`.
    :param hosts: inventory names the coming limited run leaves out.
    :param margin: seconds an entry must stay valid to be kept.
    :returns: the hosts whose facts were gathered.
    :raises FactsUnavailable: an unreachable host has no valid entry.
    :raises PlaybookFailed: the facts run failed otherwise.
    """
    hosts = list(hosts)
    if not hosts:
        return []
    report = probe(runner.conn, runner.root,
                   isolation.fact_cache_dir(runner.workspace.path), hosts)
    stale = report.stale(hosts, margin)
    LOG.info('Fact cache on %s: %d of %d host(s) to refresh',
             runner.conn.host, len(stale), len(hosts))
    if not stale:
        return []
    if report.doubts:
        runner.facts(len(hosts))
        return hosts
    return _gather(runner, report, stale)


def _gather(runner, report, stale):
    try:
        runner.facts(len(stale), limit=stale)
        return stale
    except exceptions.PlaybookFailed as exc:
        wanted = set(stale)  # the recap is remote data: no list scan
        down = [h for h in exc.unreachable_hosts if h in wanted]
        if not down:
            raise
    missing = [h for h in down if report.remaining(h) is None]
    if missing:
        raise exceptions.FactsUnavailable(hosts=', '.join(missing),
                                          host=runner.conn.host)
    for host in down:
        LOG.warning('%s is unreachable: keeping its cached facts (valid '
                    'for %d more s)', host, report.remaining(host))
    gone = set(down)
    rest = [h for h in stale if h not in gone]
    if rest:
        runner.facts(len(rest), limit=rest)
    return rest
