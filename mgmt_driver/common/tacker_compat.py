"""Tacker's driver base class and exceptions, or same-named stand-ins.

Inside tacker-conductor the driver must subclass Tacker's
``VnflcmMgmtAbstractDriver`` and raise Tacker's own exception classes, so
that Tacker records a readable error on the LCM operation.  Outside Tacker
(the ``kubespray-mgmt`` command, unit tests) the stand-ins below have the
same names, constructor keywords and message templates, so the rest of the
package never needs to know which one it got.
"""

import abc

try:  # pragma: no cover - exercised by the tests/integration layer
    from tacker.common import exceptions as _tacker_exceptions
    from tacker.vnfm.mgmt_drivers import vnflcm_abstract_driver as _tacker_base
except ImportError:
    _tacker_exceptions = None
    _tacker_base = None

#: True when the classes below are Tacker's own.
TACKER_AVAILABLE = _tacker_exceptions is not None


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


if TACKER_AVAILABLE:  # pragma: no cover - exercised by tests/integration
    VnflcmMgmtAbstractDriver = _tacker_base.VnflcmMgmtAbstractDriver
    TackerException = _tacker_exceptions.TackerException
    MgmtDriverOtherError = _tacker_exceptions.MgmtDriverOtherError
    MgmtDriverParamInvalid = _tacker_exceptions.MgmtDriverParamInvalid
    MgmtDriverNotFound = _tacker_exceptions.MgmtDriverNotFound
    MgmtDriverRemoteCommandError = (
        _tacker_exceptions.MgmtDriverRemoteCommandError)
    MgmtDriverRemoteCommandTimeOut = (
        _tacker_exceptions.MgmtDriverRemoteCommandTimeOut)
else:
    VnflcmMgmtAbstractDriver = _StandInVnflcmMgmtAbstractDriver
    TackerException = _StandInTackerException
    MgmtDriverOtherError = _StandInMgmtDriverOtherError
    MgmtDriverParamInvalid = _StandInMgmtDriverParamInvalid
    MgmtDriverNotFound = _StandInMgmtDriverNotFound
    MgmtDriverRemoteCommandError = _StandInMgmtDriverRemoteCommandError
    MgmtDriverRemoteCommandTimeOut = _StandInMgmtDriverRemoteCommandTimeOut
