"""What confines a worker: the jail it runs in and the caps and watches around it.

- `jail`: bubblewrap in a user namespace (namespaces, binds, caps dropped), its `Limits`,
  and whether a jail works here at all (`require_jail`, `why_unjailed`)
- `seccomp`: the syscall filter the jail installs
- `identity`: one host uid per live worker, as root
- `memwatch`: the memory cap of a whole jail, shared memory included
- `diskwatch`: the disk cap of a worker's scratch
- `scratch`: the scratch roots of worker pools, and the sweep of dead ones
- `shader_cache`: Mesa's shader cache, a private copy in each worker's scratch

The worker itself (`tools/worker/`) runs inside; the supervisor (`tools/runtime/`) starts it
through here. docs/SECURITY.md says what the jail guarantees and what it does not.
"""
