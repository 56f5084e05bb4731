"""Delivery of notifications (the edge behind :class:`reconciler.core.notifications.Notifier`):
HTTP endpoints (a generic JSON webhook, Slack- and Microsoft Teams-compatible bodies), GitHub
and GitLab commit statuses, and Kubernetes Events, from a queue worked by one thread per daemon,
with retries and backoff (tenacity).

- :mod:`reconciler.notify.bodies`: the request each endpoint is sent (pure);
- :mod:`reconciler.notify.secrets`: endpoint secrets from files or Secrets, never from the repo;
- :mod:`reconciler.notify.transport`: HTTP POST through urllib3, errors translated once;
- :mod:`reconciler.notify.delivery`: the queue, the worker, the retries, the report;
- :mod:`reconciler.notify.outbox`: the notifications kept in the state store until they are
  sent (claimed by one replica, sent in order, marked after).
"""
