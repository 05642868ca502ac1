"""Redacting twice gives what redacting once gave: a report quotes the manifest's command, which the
capture redacted already, and redacts it again (the adversarial pass's fix for quoted secrets). The
second pass took a header's scheme for its value (`Authorization: <redacted> <redacted>`) and a
shell-quoted value's quotes with it (`'"'"'<redacted>'"'"'` -> `<redacted>`): report != manifest."""

from __future__ import annotations

import pytest

from faultkit import redact

LINES = [
    # the planted-secrets test's command, as `sh -c` quotes it (shlex.join of the argv)
    "sh -c '/tmp/server --db-password '\"'\"'cli-dbpw-0027'\"'\"' --env DB_PASS=cli-env-dbpass-0028 --port 30000'",
    "curl -H 'Authorization: Bearer abcdefghijklmnop1234' -H \"Authorization: Basic dXNlcjpwYXNzd29yZA==\" x",
    "Proxy-Authorization: token ghp_abcdefghijklmnopqrstuvwxyz0123",
    "--api-key 'sk-abcdefghijklmnopqrstuvwx' --hf-token=hf_abcdefghijklmnopqrstuvwxyz",
]


@pytest.mark.parametrize("line", LINES)
def test_redacting_twice_is_redacting_once(line):
    once = redact.text(line)
    assert redact.MARK in once and redact.text(once) == once, (once, redact.text(once))


def test_a_command_the_capture_redacted_is_kept_as_it_is():
    # manifest.json's command: each argument redacted, then joined with the shell's quoting
    manifest = "sh -c '/tmp/server --db-password '\"'\"'<redacted>'\"'\"' -H \"Authorization: Bearer <redacted>\" --port 1'"
    assert redact.text(manifest) == manifest
