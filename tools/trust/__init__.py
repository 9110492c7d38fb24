"""What bounds or judges what a worker wrote, before the trusted side uses it.

A worker ran someone else's code, so its files, its replies and its images are a hostile
party's data:
- `confined`: reading from (and writing into) a folder a worker can write: no link followed,
  regular files only, sizes capped
- `images`: PNG decoding bounded by the pixel count the header claims
- `replies`: the schema every worker frame is held to before any caller reads it
- `outbox`: the one writer into a person's folder (`--out`, `--workspace`, `--image`)
- `ledger`: the trusted side's own record of a session, instead of what the worker claims

The verifier that rebuilds an episode in a clean worker is a session itself, so it lives with
the sessions in `tools/runtime/verifier.py`. docs/SECURITY.md tells the whole story.
"""
