"""The Pi host: the shim's JSON-RPC methods, Pi's message and session-file shapes, and the names
Pi gives things. Nothing outside ``hosts/`` knows any of it."""
