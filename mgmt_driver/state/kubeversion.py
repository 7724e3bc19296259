"""The workspace record of the Kubernetes version of the last upgrade.

The parameters Tacker keeps are those of the instantiation: after an
upgrade, every later operation renders the version recorded here
instead (:mod:`mgmt_driver.operations.upgrade` writes it).
"""

import re

#: The workspace file holding the version of the last upgrade.
RECORD_FILE = 'kube-version.yaml'

_RECORD_RE = re.compile(
    r'kube_version: "([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,4})"')


def render_record(target):
    """The text of :data:`RECORD_FILE` for *target* (major, minor,
    patch)."""
    return 'kube_version: "%d.%d.%d"\n' % tuple(target)


def parse_record(text):
    """The version recorded in :data:`RECORD_FILE`, or None.

    The file lives on the Ansible server: only one exact line shape is
    accepted; anything else is refused rather than guessed.

    :param text: the file's text, or None when it is absent.
    :raises ValueError: the text is not a record.
    """
    if text is None:
        return None
    lines = [line for line in text.splitlines()[:3] if line.strip()]
    match = _RECORD_RE.fullmatch(lines[0].strip()) if len(lines) == 1 \
        else None
    if match is None:
        raise ValueError('not a single "kube_version: X.Y.Z" line')
    return tuple(int(part) for part in match.groups())
