"""Flows: a DAG of crawl tasks (spiders or plain functions) run in dependency order."""

from eclaw.flows.flow import Context, Flow, FlowError, Items, Task, TaskFailed

__all__ = ["Context", "Flow", "FlowError", "Items", "Task", "TaskFailed"]
