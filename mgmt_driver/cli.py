"""The ``kubespray-mgmt`` command: the driver's work without Tacker.

Each subcommand is a function ``(args) -> int`` registered in
:func:`build_parser`.  Errors go to stderr: exit code 1 for bad input
(Tacker's ParamInvalid/NotFound), 2 for a remote failure or any other
driver error.
"""

import argparse
import sys

from oslo_config import cfg

from mgmt_driver import conf as kconf
from mgmt_driver import exceptions

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_REMOTE_FAILURE = 2


def _version():
    try:
        from importlib import metadata
        return metadata.version('mgmt-driver-kubespray')
    except Exception:  # running from a source tree that is not installed
        return 'unknown'


# Each entry adds one command group (``params``, ``render``, ...) to the
# subparsers; a command sets ``func`` with ``set_defaults``.
_COMMAND_GROUPS = []


def build_parser():
    """Return the argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog='kubespray-mgmt',
        description='Build and run Kubernetes clusters with kubespray, '
                    'as the Tacker MgmtDriver does, without Tacker.')
    parser.add_argument('--version', action='version',
                        version='%(prog)s ' + _version())
    parser.add_argument('--config-file', action='append', default=[],
                        metavar='FILE',
                        help='oslo.config file with a [kubespray_mgmt] '
                             'section (may be repeated)')
    parser.add_argument('--debug', action='store_true',
                        help='log at DEBUG level')
    subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
    for add_commands in _COMMAND_GROUPS:
        add_commands(subparsers)
    return parser


def _load_config(files):
    kconf.register_opts(cfg.CONF)
    cfg.CONF([], project='kubespray-mgmt', default_config_files=files)


def main(argv=None):
    """Entry point of the ``kubespray-mgmt`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, 'func', None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        _load_config(args.config_file)
        return args.func(args)
    except (exceptions.MgmtDriverParamInvalid,
            exceptions.MgmtDriverNotFound) as exc:
        print('kubespray-mgmt: %s' % exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    except (exceptions.MgmtDriverOtherError,
            exceptions.MgmtDriverRemoteCommandError,
            exceptions.MgmtDriverRemoteCommandTimeOut) as exc:
        print('kubespray-mgmt: %s' % exc, file=sys.stderr)
        return EXIT_REMOTE_FAILURE


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
