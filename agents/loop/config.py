"""How an episode is run and observed: `LoopConfig` and the default system prompt.

A leaf module: the loop and `HumanTurns` (which records a person's calls as the turns the
loop would have produced) both read it, so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.loop.context import ContextConfig

DEFAULT_SYSTEM = (
    "You build 3D models by calling tools that drive Blender and CadQuery. The scene is in "
    "metres and degrees, +Z up; CAD tools (cad_*, cadquery_script) author parts in "
    "millimetres, shown in the scene at 1 mm = 0.001 m. After each step you see a render "
    "montage (iso, front, top, right) and the scene as JSON. Tool errors come back as tool "
    "results: read them and fix the call. When the model matches the request, answer without "
    "calling any tool."
)


@dataclass
class LoopConfig:
    max_steps: int = 20  # policy turns
    max_calls_per_step: int = 8  # more calls in one reply are refused with an error
    render_size: int = 256
    views: list[str] | None = None  # None: the renderer's default montage
    # "changed": render only when the scene changed; "always"; "never" (no render, no scene
    # listing); "text": the scene listing when it changed, as "changed", but no render (a
    # text-only model's prompt is the same either way: its chat format drops images); "auto":
    # "text" for a policy that says it takes no images (`sees_images` False), else "changed"
    # (the eval's default: a text model's frames are renders no one reads)
    observe: str = "changed"
    repeat_warning: int = 2  # an identical failing call seen this often gets a warning
    stuck_after: int = 4  # ... and this often ends the episode as `stuck`
    check_every_step: bool = False  # run the checker after each step and stop on success
    record_artifacts: bool = True  # the final scene as .glb/.blend/.step beside the episode
    system_prompt: str = DEFAULT_SYSTEM
    context: ContextConfig = field(default_factory=ContextConfig)

    def observes(self, changed: bool) -> bool:
        """Whether a turn gets a montage: after a change, always, or never (`observe`)."""
        return self.observe == "always" or (changed and self.observe != "never")
