"""One crawl on the processes of one machine (``eclaw crawl ... --processes N``).

:mod:`~eclaw.processes.crawl` prepares the crawl's directory and forks the processes
(:mod:`~eclaw.processes.part`: each crawls its part of the URLs, see
:mod:`eclaw.frontier.partition`); :mod:`~eclaw.processes.group` watches them and says
when the crawl is over; :mod:`~eclaw.processes.outputs` writes their items and files of
record where one process would have.
"""
