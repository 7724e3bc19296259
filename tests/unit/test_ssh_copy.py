"""``Connection.copy_to``: whatever ends a copy, its temporary file goes
and the error is the driver's own, naming the host."""

import io
import struct

import paramiko
import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import ssh


class _Reader(io.BytesIO):
    def __init__(self, data, error):
        super().__init__(data)
        self.error = error

    def read(self, size=-1):
        if self.tell() >= 4 and self.error is not None:
            raise self.error
        return super().read(4)


class _Writer(io.BytesIO):
    def chmod(self, mode):
        pass

    def set_pipelined(self, on):
        pass


class FakeSFTP:
    """An SFTP client over a dict of files; the source's read raises
    *error* after the first chunk."""

    def __init__(self, files, error=None):
        self.files = files
        self.error = error

    def open(self, path, mode):
        if 'r' in mode:
            return _Reader(self.files[path], self.error)
        sftp = self

        class Writer(_Writer):
            def close(self):
                sftp.files[path] = self.getvalue()
                super().close()
        return Writer()

    def remove(self, path):
        del self.files[path]

    def posix_rename(self, old, new):
        self.files[new] = self.files.pop(old)


def _connection(host, sftp):
    conn = ssh.Connection(host, ssh.Credentials('u', password='p'))
    conn._sftp = lambda *args: sftp  # no SSH: the copy's logic only
    return conn


@pytest.mark.parametrize('error', [
    paramiko.SFTPError('Garbage packet received'),
    struct.error('unpack requires a buffer of 4 bytes'),
    EOFError(), paramiko.SSHException('closed')])
def test_a_failed_copy_leaves_nothing_and_names_the_host(error):
    master = FakeSFTP({'/tmp/s.db': b'12345678'}, error)
    ansible = FakeSFTP({})
    with pytest.raises(exceptions.RemoteFileError) as caught:
        _connection('10.0.0.5', master).copy_to(
            '/tmp/s.db', _connection('10.0.0.9', ansible), '/w/s.db')
    assert ansible.files == {}
    assert '10.0.0.5' in str(caught.value)


def test_a_whole_copy_is_renamed():
    master = FakeSFTP({'/tmp/s.db': b'12345678'})
    ansible = FakeSFTP({})
    assert _connection('10.0.0.5', master).copy_to(
        '/tmp/s.db', _connection('10.0.0.9', ansible), '/w/s.db') == 8
    assert ansible.files == {'/w/s.db': b'12345678'}
