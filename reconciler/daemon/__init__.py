"""The long-running service: follows git, runs the operations on a schedule, serves health, metrics,
status and the webhook over HTTP, logs.
"""
