"""The ``kubespray-mgmt`` console script's entry: :func:`main`.

A command of its own reports an error by its message and exit status,
never by the exception's class, so it needs none of Tacker's: on a
conductor host, where the ``tacker`` package is installed, importing
Tacker's exceptions module (webob, oslo.serialization, Tacker's package)
would cost every command its start-up time for nothing.  The stand-ins
of :mod:`mgmt_driver.common.tacker_compat` have the same names, message
templates and keywords, so the command prints and exits the same.  This
module imports nothing else of the package before choosing them.
"""

import sys

from mgmt_driver.common import tacker_compat


def main(argv=None):
    """Run ``kubespray-mgmt`` (:func:`mgmt_driver.adapters.cli.main`)
    with the stand-ins of Tacker's classes.

    :param argv: the words after the command's name (default: the
        process's).
    :returns: the command's exit status.
    """
    tacker_compat.without_tacker()
    # Imported here: the CLI's modules define their exceptions from the
    # classes chosen at their import, which must be the stand-ins.
    from mgmt_driver.adapters import cli
    return cli.main(argv)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
