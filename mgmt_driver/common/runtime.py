"""What the driver needs from the conductor's runtime: threads or eventlet.

A module of its own (not in DESIGN's list): Tacker 16 runs the conductor
on oslo.service threads, Tacker 15 and older monkey-patch it with
eventlet (``tacker/cmd/eventlet/__init__.py``), where one green thread
that blocks without yielding stops every other one, the AMQP heartbeat
included.  Socket, select, ``time.sleep``, subprocess and threading
primitives are green once patched; what eventlet cannot make green is
work that blocks inside C: an ``flock`` wait
(:mod:`mgmt_driver.state.sharedfiles` polls instead) and the key derivation
that decrypts an encrypted private key (bcrypt: 0.4 s at ssh-keygen's default
16 rounds on a busy 2-core host, seconds at more rounds).  :func:`offload` runs
such work on a native thread under eventlet, so the hub goes on meanwhile.

Concurrency audit of the package (issue 28), hooks of several instances
at once in one process:

* module state: only constants, compiled templates (``lru_cache`` of a
  jinja2 ``Environment``, safe to share) and ``sharedfiles``' per-path
  lock table (guarded by its own lock);
* ``LcmHooks`` (one object per conductor, shared by every hook) keeps
  only what ``__init__`` set; each hook builds its own ``ClusterDriver``,
  ``ConnectionPool``, ``KnownHosts`` and ``Stats``;
* records and ``known_hosts``: every change under ``sharedfiles.locked``
  (a thread lock and an ``flock`` across processes), written atomically;
  readers see a whole file;
* logging: loggers only; no handler, level or adapter is changed while a
  hook runs (``kubespray-mgmt`` and the v2 script, each a process of its
  own, set theirs at start); every line names its host or instance;
* no ``os.environ`` change, no ``os.chdir``, no ``umask``, no signal
  handler in what Tacker loads (the local site's are test-only);
* ``registry.TackerVimRegistry`` created Tacker's ``NfvoPlugin`` lazily
  without a lock: two first hooks at once built two; now under a lock;
* ``csar._tosca_problems`` silences the process-wide ``tosca`` logger
  while it parses: ``kubespray-mgmt csar`` only, never a hook;
* ``sleep=time.sleep`` defaults (kubectl, detached, ssh) are bound when
  the module is imported: green because Tacker patches before it loads
  any driver (``tacker.cmd.eventlet`` is imported first);
* paramiko's reader threads, ``select`` on a channel, ``Event.wait``,
  sockets and subprocesses are green once patched; a closed transport's
  reader is joined (:func:`mgmt_driver.remote.ssh._close_transport`);
* left to Tacker: two instances asking for one VIM name at once can both
  pass ``check_free`` (Tacker's database has no unique VIM name).
"""

import sys


def green():
    """Whether eventlet has monkey-patched this process's threads."""
    eventlet = sys.modules.get('eventlet')
    if eventlet is None:
        return False
    patcher = getattr(eventlet, 'patcher', None)
    return bool(patcher and patcher.is_monkey_patched('thread'))


def offload(function, *args):
    """``function(*args)``, on a native thread when eventlet patched the
    process (it must release the GIL while it blocks, as bcrypt and
    cryptography do), else in the calling thread."""
    if not green():
        return function(*args)
    from eventlet import tpool
    return tpool.execute(function, *args)
