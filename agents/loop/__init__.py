"""The episode loop: a policy acts on a tool session turn by turn until it stops.

`episode_loop` runs one episode (`EpisodeLoop`, `run_episode`), `config` holds its settings,
`context` builds what the model reads each turn, `turns` takes a person's turns into the same
loop, `start_state` prepares the scene an episode starts from, `episode` and `events` are the
records it emits, and `scheduler` runs many episodes over a pool of tool workers. The layers
above use the face in `agents/__init__.py`.
"""
