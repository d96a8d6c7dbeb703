"""The loopback server of test/helpers/images-driver.ts: a directory as python3 -m http.server serves
it (the scripts where huggingface.co and raw.githubusercontent.com serve them, the PyPI subset's
directory listings, the Debian subset), and every bare repository under it (a path holding
'.git/') over git's smart HTTP protocol, through git's own CGI program `git http-backend`, as
GitHub serves a repository.

Not git's dumb HTTP (plain files): pip clones a git requirement as a partial clone
(--filter=blob:none, pip's vcs/git.py), which a dumb server cannot honour, and then a commit the
server lacks makes each git fetch start another lazy fetch of it (promisor-remote.c), without end
(the same symptom: https://github.com/folke/lazy.nvim/issues/1183). Smart HTTP answers
"not our ref" and pip fails naming the commit.

    python3 serve.py <port> <directory>
"""

import http.server
import os
import subprocess
import sys
import urllib.parse

ROOT = ""


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=ROOT, **kwargs)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def _git_path(self):
        path = urllib.parse.urlsplit(self.path).path
        return path if ".git/" in path else None

    def do_GET(self):
        if self._git_path() is not None:
            return self._backend(b"")
        return super().do_GET()

    def do_POST(self):
        if self._git_path() is None:
            return self.send_error(405, "POST only to a git repository")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        return self._backend(body)

    def _backend(self, body):
        url = urllib.parse.urlsplit(self.path)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            # A partial clone's filter honoured, as GitHub honours it (git upload-pack's uploadpack.allowFilter).
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "uploadpack.allowFilter",
            "GIT_CONFIG_VALUE_0": "true",
            "PATH_INFO": urllib.parse.unquote(url.path),
            "QUERY_STRING": url.query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
        }
        # The request's own headers git http-backend reads (a gzip body; protocol v2, as GitHub speaks it).
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        r = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
        head, _, out = r.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = r.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if r.returncode != 0 and not head:
            status, out = 500, r.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        if r.stderr:
            sys.stderr.write(r.stderr.decode("utf-8", "replace"))


if __name__ == "__main__":
    ROOT = os.path.abspath(sys.argv[2])
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
