"""The pure core: object values, the config model, versions, resolution, rendering, inventories,
field diffs, the planner, the fleet diff and the deletion brake. Imports no I/O library (checked
by import-linter and a test).
"""
