"""Keystone's token API and Heat's resource lookups, for test_v2_scripts.

Run as ``python -m tests.integration.fake_heat ADDRESS STATE_FILE``: it
listens on ADDRESS (a free port, printed as the first line of stdout),
issues a token on ``POST /identity/v3/auth/tokens`` whose catalog names
``/heat`` as the orchestration endpoint, and answers
``GET /heat/stacks/<id>/resources/<name>`` from STATE_FILE, a JSON
``{stack id: {resource name: resource}}`` the test rewrites as its Heat
changes.  A process of its own: the tests run under Tacker's eventlet
monkey-patching, which a server thread in the test process would not
survive at shutdown.
"""

import datetime
import http.server
import json
import re
import sys

PROJECT = 'v2-test-project'
TOKEN = 'v2-test-keystone-token'
TOKENS_PATH = '/identity/v3/auth/tokens'
_RESOURCE = re.compile(r'/heat/stacks/([^/]+)/resources/([^/]+)')


def token_body(heat_url):
    """A Keystone v3 token whose catalog has Heat at *heat_url*."""
    expires = (datetime.datetime.now(datetime.timezone.utc) +
               datetime.timedelta(hours=1)).strftime(
                   '%Y-%m-%dT%H:%M:%S.000000Z')
    domain = {'id': 'default', 'name': 'Default'}
    return {'token': {
        'expires_at': expires, 'methods': ['password'],
        'user': {'id': 'nfv', 'name': 'nfv', 'domain': domain},
        'project': {'id': PROJECT, 'name': PROJECT, 'domain': domain},
        'catalog': [{'type': 'orchestration', 'name': 'heat', 'id': 'heat',
                     'endpoints': [{'id': 'heat-public',
                                    'interface': 'public',
                                    'region': 'RegionOne',
                                    'region_id': 'RegionOne',
                                    'url': heat_url}]}]}}


def handler(state_file, heat_url, log):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get('Content-Length') or 0))
            log('POST %s' % self.path)
            if self.path != TOKENS_PATH:
                return self._send(404, {})
            self._send(201, token_body(heat_url), {'X-Subject-Token': TOKEN})

        def do_GET(self):
            log('GET %s' % self.path)
            found = _RESOURCE.fullmatch(self.path)
            if not found:
                return self._send(404, {})
            if self.headers.get('X-Auth-Token') != TOKEN:
                return self._send(401, {})
            with open(state_file) as f:
                stacks = json.load(f)
            resource = stacks.get(found[1], {}).get(found[2])
            if resource is None:
                return self._send(404, {'error': 'not found'})
            self._send(200, {'resource': resource})

        def _send(self, status, body, headers=None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
    return Handler


def main(address, state_file):
    with open(state_file + '.log', 'a', buffering=1) as log_file:
        server = http.server.HTTPServer((address, 0), None)
        url = 'http://%s:%d' % (address, server.server_port)
        server.RequestHandlerClass = handler(
            state_file, url + '/heat',
            lambda line: log_file.write(line + '\n'))
        print(url, flush=True)
        server.serve_forever()


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
