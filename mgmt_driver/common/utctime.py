"""One way to show a time: ISO 8601 in UTC, to the second
(``2026-11-23T23:05:01Z``), whatever form it was read in.

``kubespray-mgmt status`` shows times from several sources: playbook
log names and etcd snapshot names (``20261123T230501Z``, compact for a
file name), kubeadm's certificate dates (RFC 3339, maybe with a
fraction or an offset), the queue's arrival times.  Each is shown as
:func:`iso_utc` words it, so one report never mixes two forms.
"""

import datetime

#: The form every time is shown in.
FORMAT = '%Y-%m-%dT%H:%M:%SZ'
#: The compact form of file names (:func:`iso_utc` reads it too).
COMPACT = '%Y%m%dT%H%M%SZ'


def iso_utc(text):
    """*text* (a compact time, or ISO 8601 / RFC 3339 with ``Z`` or an
    offset, maybe a fraction) as :data:`FORMAT`; *text* unchanged when
    it is none of them (it is shown as read, never guessed at).

    :param text: a time as read, or None.
    """
    if not isinstance(text, str):
        return text
    try:
        when = datetime.datetime.strptime(text, COMPACT)
    except ValueError:
        when = _rfc3339(text)
    if when is None:
        return text
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc)
    return when.strftime(FORMAT)


def _rfc3339(text):
    if not text.endswith('Z') and '+' not in text[10:] and \
            '-' not in text[10:]:
        return None  # no zone: not a UTC time
    try:
        return datetime.datetime.fromisoformat(text.replace('Z', '+00:00'))
    except ValueError:
        return None
