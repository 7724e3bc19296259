"""Tacker's driver base class and exceptions, or same-named stand-ins.

Inside tacker-conductor the driver must subclass Tacker's
``VnflcmMgmtAbstractDriver`` and raise Tacker's own exception classes, so
that Tacker records a readable error on the LCM operation.  Outside Tacker
(the ``kubespray-mgmt`` command, unit tests), and in a v2 script, which
Tacker runs as a process of its own (:func:`without_tacker`), the stand-ins
below have the same names, constructor keywords and message templates, so
the rest of the package never needs to know which one it got.
"""

import abc
import importlib

#: Tacker's exception classes this module gives, by name (the stand-in
#: of each is ``_StandIn<name>``).
_EXCEPTIONS = ('TackerException', 'MgmtDriverOtherError',
               'MgmtDriverParamInvalid', 'MgmtDriverNotFound',
               'MgmtDriverRemoteCommandError',
               'MgmtDriverRemoteCommandTimeOut')
_BASE = 'VnflcmMgmtAbstractDriver'

#: Set by :func:`without_tacker`.
_standalone = False
#: The classes given, by name, and ``TACKER_AVAILABLE``: chosen once, at
#: the first use of one of them (see :func:`__getattr__`).
_chosen = None


class _StandInTackerException(Exception):
    """Mirrors ``tacker.common.exceptions.TackerException``.

    An explicit *message* wins; otherwise the class's template is filled
    from the keyword arguments, and a template that cannot be filled falls
    back to the bare template, as Tacker's does.
    """

    message = 'An unknown exception occurred.'
    code = 500

    def __init__(self, message=None, **kwargs):
        if not message:
            try:
                message = self.message % kwargs
            except (KeyError, TypeError, ValueError):
                message = self.message
        self.msg = message
        super().__init__(message)

    def __str__(self):
        return self.msg


class _StandInMgmtDriverOtherError(_StandInTackerException):
    message = 'An error occurred in MgmtDriver: %(error_message)s.'


class _StandInMgmtDriverParamInvalid(_StandInTackerException):
    message = 'The %(param)s in the additionalParams is invalid.'


class _StandInMgmtDriverNotFound(_StandInTackerException):
    message = 'The %(param)s in the additionalParams does not exist.'


class _StandInMgmtDriverRemoteCommandError(_StandInTackerException):
    message = 'Failed to execute remote command.'


class _StandInMgmtDriverRemoteCommandTimeOut(_StandInTackerException):
    message = 'The execution of the remote command timed out.'


class _StandInVnflcmMgmtAbstractDriver(metaclass=abc.ABCMeta):
    """Mirrors Tacker's ``VnflcmMgmtAbstractDriver``: 15 abstract methods."""

    @abc.abstractmethod
    def get_type(self):
        """Return the driver type, the key Tacker stores the driver under."""

    @abc.abstractmethod
    def get_name(self):
        """Return the driver name."""

    @abc.abstractmethod
    def get_description(self):
        """Return a one-line description of the driver."""

    @abc.abstractmethod
    def instantiate_start(self, context, vnf_instance,
                          instantiate_vnf_request, grant,
                          grant_request, **kwargs):
        """Before Tacker creates the VNF's resources."""

    @abc.abstractmethod
    def instantiate_end(self, context, vnf_instance,
                        instantiate_vnf_request, grant,
                        grant_request, **kwargs):
        """After Tacker created the VNF's resources."""

    @abc.abstractmethod
    def terminate_start(self, context, vnf_instance,
                        terminate_vnf_request, grant,
                        grant_request, **kwargs):
        """Before Tacker deletes the VNF's resources."""

    @abc.abstractmethod
    def terminate_end(self, context, vnf_instance,
                      terminate_vnf_request, grant,
                      grant_request, **kwargs):
        """After Tacker deleted the VNF's resources."""

    @abc.abstractmethod
    def scale_start(self, context, vnf_instance,
                    scale_vnf_request, grant,
                    grant_request, **kwargs):
        """Before scale-in (and on rollback of a failed scale-out)."""

    @abc.abstractmethod
    def scale_end(self, context, vnf_instance,
                  scale_vnf_request, grant,
                  grant_request, **kwargs):
        """After scale-out."""

    @abc.abstractmethod
    def heal_start(self, context, vnf_instance,
                   heal_vnf_request, grant,
                   grant_request, **kwargs):
        """Before Tacker re-creates the healed resources."""

    @abc.abstractmethod
    def heal_end(self, context, vnf_instance,
                 heal_vnf_request, grant,
                 grant_request, **kwargs):
        """After Tacker re-created the healed resources."""

    @abc.abstractmethod
    def change_external_connectivity_start(
            self, context, vnf_instance,
            change_ext_conn_request, grant,
            grant_request, **kwargs):
        """Before an external connectivity change."""

    @abc.abstractmethod
    def change_external_connectivity_end(
            self, context, vnf_instance,
            change_ext_conn_request, grant,
            grant_request, **kwargs):
        """After an external connectivity change."""

    @abc.abstractmethod
    def modify_information_start(self, context, vnf_instance,
                                 modify_vnf_request, **kwargs):
        """Before a modify-information operation."""

    @abc.abstractmethod
    def modify_information_end(self, context, vnf_instance,
                               modify_vnf_request, **kwargs):
        """After a modify-information operation."""


def without_tacker():
    """Give the stand-ins in this process, even where tacker is installed.

    For a process of its own whose failure Tacker reads from its stderr,
    never by an exception's class: the v2 scripts.  Tacker's exceptions
    module brings webob, oslo.serialization and Tacker's package, about
    0.04 s of CPU at each start of such a process (one per hook of every
    v2 LCM operation).  Call it before this module's classes are used
    (the script's first step, before it imports the v2 adapter).

    :raises RuntimeError: Tacker's classes are in use already.
    """
    global _standalone
    if _chosen is not None and _chosen['TACKER_AVAILABLE']:
        raise RuntimeError('tacker_compat: Tacker\'s classes are in use '
                           'already')
    _standalone = True


def _tacker_classes():  # pragma: no cover - exercised by tests/integration
    try:
        exceptions = importlib.import_module('tacker.common.exceptions')
        base = importlib.import_module(
            'tacker.vnfm.mgmt_drivers.vnflcm_abstract_driver')
    except ImportError:
        return None
    chosen = {name: getattr(exceptions, name) for name in _EXCEPTIONS}
    chosen[_BASE] = getattr(base, _BASE)
    chosen['TACKER_AVAILABLE'] = True
    return chosen


def _stand_ins():
    chosen = {name: globals()['_StandIn' + name]
              for name in _EXCEPTIONS + (_BASE,)}
    chosen['TACKER_AVAILABLE'] = False
    return chosen


def __getattr__(name):
    """Tacker's class *name* where tacker is installed (and not
    :func:`without_tacker`), else its stand-in; ``TACKER_AVAILABLE``:
    True when the classes are Tacker's own."""
    global _chosen
    if name not in _EXCEPTIONS + (_BASE, 'TACKER_AVAILABLE'):
        raise AttributeError('module %r has no attribute %r' % (__name__,
                                                                name))
    if _chosen is None:
        _chosen = (not _standalone and _tacker_classes()) or _stand_ins()
    return _chosen[name]
