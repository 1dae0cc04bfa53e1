"""Alerts: tell people when a monitor fails, a job fails or a schedule is missed.

``load_alerts(path_or_mapping)`` reads the ``[alerts]`` table of a TOML file (or a mapping of the
same shape) and returns an :class:`Alerter`; ``alerter.notify(Alert(...))`` queues an alert and
returns at once; the alerter's own task sends it to every channel (JSON webhook, Slack, DingTalk,
WeCom, email over SMTP with STARTTLS) with retries and a per-channel rate limit;
``await alerter.close()`` drains the queue within a bound.
"""

from eclaw.alerts.alerter import Alerter
from eclaw.alerts.channels import Alert, Channel
from eclaw.alerts.config import load_alerts

__all__ = ["Alert", "Alerter", "Channel", "load_alerts"]
