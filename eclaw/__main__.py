from eclaw.cli import command

raise SystemExit(command())
