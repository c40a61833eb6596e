"""How long ling-chat waits on a remote server: one deadline for every network wait.

A server that drips a byte or a keepalive now and then keeps a per-read timeout from ever
firing, so each wait has an overall deadline instead: a whole answer (`/health`,
`/server_info`, `/v1/tokenize`, `/abort_request`), a reply's first token, and each next
token (keepalives do not count). The start-up screen shows it; the error names it.
"""

from __future__ import annotations

from typing import Final

DEFAULT_SERVER_WAIT_S: Final = 120.0
"""The default wait: a long prefill on a busy server fits, a stuck one does not hold the app."""
WAIT_HINT: Final = "server_wait, --server-wait"
"""Where the user changes the wait, named in every message about it."""
