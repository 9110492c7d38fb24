"""The sandboxed worker process: holds Blender (bpy) and CadQuery, executes tool calls.

Only the worker imports bpy and OCP; the supervisor talks to it through tools.protocol.
"""
